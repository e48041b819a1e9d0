// A rollout through the library on the embedded defaults: the tiny model that ships in the
// package (ONNX Runtime) samples groups of multi-turn trajectories in the embedded page world (BM25
// search over the corpus with URLs, and its pages behind <access>URL</access>), the pipeline scores them (outcome and memory rewards, advantages) and hands each
// batch to the `for await` loop as padded typed arrays, ready for a trainer.
//
// Run: node examples/rollout.mjs      (after `npm install mempo`; about 5 s on 2 cores)
import { EMBEDDED, LocalModel, Bm25Retriever, PageStore, readQuestionFiles, pipelineBatches, resolveProtocolIds, toTensorBatch } from 'mempo';

const local = await LocalModel.load(EMBEDDED.model());          // Generator + TargetScorer
const retriever = Bm25Retriever.fromJsonl(EMBEDDED.corpusPages(), {}, PageStore.fromJsonl(EMBEDDED.pages()));
// Dev questions and dev page questions, interleaved in proportion: the third is a page question.
const questions = readQuestionFiles([EMBEDDED.split('dev'), EMBEDDED.split('dev-pages')]).slice(0, 3);
const { padTokenId } = resolveProtocolIds(local.codec, local.model.config);

try {
  // One batch per question here (questionsPerBatch: 1): 4 sampled trajectories each.
  for await (const { batchIndex, records, stats } of pipelineBatches({
    questions, generator: local, scorer: local, retriever,
    options: { rollout: { groupSize: 4, questionsPerBatch: 1, seed: 1 }, tool: { access: true, pageChunkChars: 1000 } },
  })) {
    const t = toTensorBatch(records, padTokenId);                // B×P prompts, B×T responses, advantages, old log-probs
    const memRewards = records.flatMap((r) => r.rounds.map((rd) => rd.memReward)).filter((x) => x !== null);
    console.log(`batch ${batchIndex}: ${records[0].uid} "${questions[batchIndex].question}" → ${t.B}×${t.T} tokens, ` +
      `scores ${Array.from(t.scores).join(' ')}, ${memRewards.length} memory rewards, ${stats.rounds} rounds so far`);
    // A trainer would take its PPO step on `t` here; breaking out of the loop stops the rollout cleanly.
  }
} finally {
  await local.dispose();
}
