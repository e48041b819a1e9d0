/**
 * Single-token tags are a fast path of the text rule (docs/algorithm.md §1, "Tags are text"):
 * the embedded model rolled out twice with the same seed, once as it is and once with its tags
 * hidden from `tokenId` (so the stop matcher matches `</search>` / `</answer>` on decoded text
 * and rounds are read through the character → token map), gives identical records.
 */
import { CausalLM } from '../../src/engines/local/causal-lm';
import { LocalModel } from '../../src/engines/local/local-model';
import { runPipeline } from '../../src/pipeline/pipeline';
import { protocolIds } from '../../src/pipeline/trajectory';
import { readQuestions } from '../../src/io/questions';
import { Bm25Retriever } from '../../src/retrieval/bm25';
import { CORPUS, MODEL_DIR } from './helpers';
import { resolve } from 'node:path';

const TRAIN = resolve(__dirname, '..', '..', 'data', 'world', 'train.jsonl');
const TAGS = new Set(['<mem>', '</mem>', '<think>', '</think>', '<search>', '</search>', '<answer>', '</answer>', '<information>', '</information>']);

async function run(hideTags: boolean) {
  const model = await CausalLM.load(MODEL_DIR, { sessionOptions: { intraOpNumThreads: 1 } });
  try {
    const tok = model.tokenizer!;
    if (hideTags) {
      const tokenId = tok.tokenId.bind(tok);
      tok.tokenId = (s: string) => (TAGS.has(s) ? undefined : tokenId(s));
    }
    const local = new LocalModel(model);
    expect(local.stopTokenIds.length > 1).toBe(!hideTags);
    expect(protocolIds(local.codec).memTags === undefined).toBe(hideTags);
    return await runPipeline({
      questions: readQuestions(TRAIN).slice(0, 2),
      generator: local,
      scorer: local,
      retriever: Bm25Retriever.fromJsonl(CORPUS),
      options: { rollout: { groupSize: 3, seed: 5, maxTurns: 4, maxResponseTokens: 400 } },
    });
  } finally {
    await model.dispose();
  }
}

test('the embedded model gives the same records through the id fast path and the text path', async () => {
  const fast = await run(false);
  const text = await run(true);
  expect(text.records).toEqual(fast.records);
  // The comparison means something: rounds with closed mem spans and memory rewards.
  const rounds = fast.records.flatMap((r) => r.rounds);
  expect(rounds.some((r) => r.memSpan !== null && r.index >= 2)).toBe(true);
  expect(rounds.some((r) => r.memReward !== null)).toBe(true);
  expect(rounds.some((r) => r.finishReason === 'stop')).toBe(true);
});
