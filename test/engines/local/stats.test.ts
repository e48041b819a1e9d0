/**
 * @jest-environment ./test/runtime-environment.js
 *
 * Statistics belong to the call that did the work: two calls in flight on one model at once
 * each get the counts of their own prompts / items. Expected counts are written from the inputs.
 */
import { CausalLM } from '../../../src/engines/local/causal-lm';
import { MODEL_DIR, randomIds } from './helpers';

let model: CausalLM;
beforeAll(async () => {
  model = await CausalLM.load(MODEL_DIR);
});
afterAll(async () => {
  await model.dispose();
});

describe('per-call statistics with two concurrent calls on one model', () => {
  it('gives each generate call the counts of its own prompts', async () => {
    const a = [randomIds(12, 1), randomIds(20, 2)];
    const b = [randomIds(7, 3), randomIds(9, 4), randomIds(15, 5)];
    // Which call sampled, in order: shows that the two calls interleave.
    const order: string[] = [];
    const opts = (label: string, maxNewTokens: number, seed: number) => ({
      maxNewTokens,
      seed,
      eosTokenIds: [],
      logitsProcessor: () => void order.push(label),
    });
    const [ra, rb] = await Promise.all([
      model.generateWithStats(a, opts('a', 3, 1)),
      model.generateWithStats(b, opts('b', 5, 2)),
    ]);
    expect(order.indexOf('b')).toBeLessThan(order.lastIndexOf('a'));
    expect(ra.results.map((r) => r.tokenIds.length)).toEqual([3, 3]);
    expect(rb.results.map((r) => r.tokenIds.length)).toEqual([5, 5, 5]);
    // Every sequence runs to its budget: samples = maxNewTokens, decode steps one fewer.
    expect(ra.stats).toEqual({ waves: 1, prefillTokens: 12 + 20, paddedPrefillTokens: 2 * 20, decodeSteps: 2, generatedTokens: 2 * 3, compactions: 0 });
    expect(rb.stats).toEqual({ waves: 1, prefillTokens: 7 + 9 + 15, paddedPrefillTokens: 3 * 15, decodeSteps: 4, generatedTokens: 3 * 5, compactions: 0 });
    // The convenience field holds the stats of the call that finished last (b: more steps).
    expect(model.lastGenerationStats).toBe(rb.stats);
    // Nothing else is shared either: the same call alone samples the same tokens.
    const alone = await model.generateWithStats(b, opts('b', 5, 2));
    expect(alone.results.map((r) => r.tokenIds)).toEqual(rb.results.map((r) => r.tokenIds));
    expect(alone.stats).toEqual(rb.stats);
  });

  it('gives each scoreTargets call the counts of its own items', async () => {
    const a = [
      { contextIds: randomIds(10, 6), targetIds: [9, 77, 10] },
      { contextIds: randomIds(30, 7), targetIds: [9, 10] },
    ];
    const b = [
      { contextIds: randomIds(5, 8), targetIds: [9, 78, 79, 10] },
      { contextIds: randomIds(12, 9), targetIds: [9, 10] },
      { contextIds: randomIds(40, 10), targetIds: [9, 80, 10] },
    ];
    const [ra, rb] = await Promise.all([
      model.scoreTargetsWithStats(a, { sharePrefixes: false }),
      model.scoreTargetsWithStats(b, { sharePrefixes: false }),
    ]);
    expect(ra.results.map((r) => r.length)).toEqual([3, 2]);
    expect(rb.results.map((r) => r.length)).toEqual([4, 2, 3]);
    const one = { microBatches: 1, sharedItems: 0, tailTokens: 0 };
    expect(ra.stats).toEqual({ ...one, items: 2, tokens: 13 + 32, paddedTokens: 2 * 32, targetTokens: 5 });
    expect(rb.stats).toEqual({ ...one, items: 3, tokens: 9 + 14 + 43, paddedTokens: 3 * 43, targetTokens: 9 });
  });
});
