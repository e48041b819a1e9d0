// A MemPO training loop on the learner API: the embedded model samples and scores (LocalModel),
// the torch reference learner (a Python process mempo starts) takes the PPO steps, and after
// each step the engine loads the learner's new weights. Metrics go to OUT/metrics.jsonl and
// checkpoints to OUT/checkpoints/step-N; run it again on the same OUT and it resumes from there.
//
// Needs python3 with torch ≥ 1.13 (Debian: apt-get install python3-torch libopenblas0-pthread).
// Run:  npx tsc --module nodenext --target es2022 --strict --outDir build examples/train.ts
//       node build/train.js [OUT]        (2 steps of 2 questions × 4 samples; about a minute on 2 cores)
// (as an ES module: "type": "module" in your package.json, or name the file train.mts)
import {
  EMBEDDED, LocalModel, Bm25Retriever, PageStore, readQuestionFiles, spawnLearner, runTraining, checkpoints,
  resolveOptions, resolveTrainOptions, type StepMetrics,
} from 'mempo';

const out = process.argv[2] ?? 'out/train-example';
const model = EMBEDDED.model();
const local = await LocalModel.load(model);                     // rollouts and memory-reward scoring, current weights
const learner = await spawnLearner({ model, seed: 0 });          // or new HttpLearner(url, { token }) for one on a GPU host
try {
  const { maxContext } = await learner.info();
  const metrics = await runTraining({
    generator: local,
    scorer: local,                                               // null: GRPO without the memory reward
    // The embedded page world: BM25 over the corpus with URLs, its pages behind <access>URL</access>.
    retriever: Bm25Retriever.fromJsonl(EMBEDDED.corpusPages(), {}, PageStore.fromJsonl(EMBEDDED.pages())),
    learner,
    sync: async (dir) => { await local.reload(dir); },           // the learner's weights back into the engine
    pipeline: resolveOptions({ rollout: { groupSize: 4 }, tool: { access: true, pageChunkChars: 1000 }, advantage: { alpha: 1 } }),
    train: resolveTrainOptions({ steps: 2, questionsPerStep: 2, evalEvery: 0 }),
    dev: [],
    maxContext,
  }, {
    out,
    order: readQuestionFiles([EMBEDDED.split('train'), EMBEDDED.split('train-pages')]),   // interleaved in proportion
    resume: checkpoints(out).length > 0,
    onStepDone: (m: StepMetrics) => console.log(`step ${m.step}: mean score ${m.meanScore}, memory reward ${m.memoryReward.mean?.toFixed(3)}, ` +
      `loss ${m.loss?.toFixed(4)}, grad norm ${m.gradNorm?.toFixed(3)}, ${((m.wallMs['total'] ?? 0) / 1000).toFixed(1)} s`),
  });
  console.log(`${metrics.length} steps in ${out}/metrics.jsonl; checkpoints: ${checkpoints(out).map((c) => `step-${c.step}`).join(', ')}`);
} finally {
  await learner.close();
  await local.dispose();
}
