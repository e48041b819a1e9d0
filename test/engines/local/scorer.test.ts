/**
 * @jest-environment ./test/runtime-environment.js
 */
import { backend, setBackend } from '../../../src/kernels/backend';
import { CausalLM } from '../../../src/engines/local/causal-lm';
import { MODEL_DIR, VOCAB, maxAbsDiff, randomIds, referenceLogprobs } from './helpers';

let model: CausalLM;
beforeAll(async () => {
  model = await CausalLM.load(MODEL_DIR);
});
afterAll(async () => {
  await model.dispose();
});

/** A MemPO-shaped set: shared-prefix contexts of varied lengths, short answer targets. */
function items(): { contextIds: number[]; targetIds: number[] }[] {
  const out: { contextIds: number[]; targetIds: number[] }[] = [];
  const lengths = [1, 2, 7, 31, 64, 5, 120, 33, 17, 90, 3, 48];
  lengths.forEach((n, i) => {
    const target = [9, ...randomIds(1 + (i % 5), 100 + i), 10];
    out.push({ contextIds: randomIds(n, i + 1), targetIds: target });
  });
  return out;
}

describe('scoreTargets on the embedded model', () => {
  it('equals teacher forcing one unpadded sequence at a time within 1e-4 (right padding)', async () => {
    const batch = items();
    const got = await model.scoreTargets(batch);
    expect(got).toHaveLength(batch.length);
    expect(model.lastScoreStats!.microBatches).toBe(1);
    for (let i = 0; i < batch.length; i++) {
      const ref = await referenceLogprobs(model, batch[i]!.contextIds, batch[i]!.targetIds);
      expect(got[i]).toBeInstanceOf(Float32Array);
      expect(maxAbsDiff(got[i]!, ref)).toBeLessThan(1e-4);
    }
  });

  it('equals teacher forcing with left padding', async () => {
    const batch = items();
    const got = await model.scoreTargets(batch, { padding: 'left' });
    for (let i = 0; i < batch.length; i++) {
      const ref = await referenceLogprobs(model, batch[i]!.contextIds, batch[i]!.targetIds);
      expect(maxAbsDiff(got[i]!, ref)).toBeLessThan(1e-4);
    }
  });

  it('splits into micro-batches by the padded token budget and returns items in input order', async () => {
    const batch = items();
    const whole = await model.scoreTargets(batch);
    const split = await model.scoreTargets(batch, { maxBatchTokens: 200 });
    const stats = model.lastScoreStats!;
    expect(stats.microBatches).toBeGreaterThan(3);
    expect(stats.items).toBe(batch.length);
    expect(stats.targetTokens).toBe(batch.reduce((a, b) => a + b.targetIds.length, 0));
    expect(stats.paddedTokens).toBeGreaterThanOrEqual(stats.tokens);
    for (let i = 0; i < batch.length; i++) expect(maxAbsDiff(split[i]!, whole[i]!)).toBeLessThan(1e-4);
  });

  it('caps the token budget by maxLogitsBytes', async () => {
    const batch = items();
    // VOCAB-wide rows of 4 bytes: 130 padded tokens per pass. Lengths sorted: 124 | 97 | 71 |
    // 52 38 | 37 23 12 | 8 6 6 4 (rows x longest row <= 130). Full logits: with selected
    // logits the bound counts target rows only (select-logits.test.ts).
    await model.scoreTargets(batch, { maxLogitsBytes: 130 * VOCAB * 4, selectLogits: false });
    const stats = model.lastScoreStats!;
    expect(stats.microBatches).toBe(6);
    expect(stats.paddedTokens).toBe(124 + 97 + 71 + 2 * 52 + 3 * 37 + 4 * 8);
  });

  it('gathers the same log-probs on the native and the JS kernels', async () => {
    const batch = items();
    const before = backend();
    try {
      setBackend('js');
      const js = await model.scoreTargets(batch);
      setBackend('native');
      const native = await model.scoreTargets(batch);
      for (let i = 0; i < batch.length; i++) expect(maxAbsDiff(native[i]!, js[i]!)).toBeLessThan(1e-5);
    } finally {
      setBackend(before);
    }
  });

  it('hands the kernel only the target rows, as views of the logits', async () => {
    const batch = items();
    const calls: { rows: number; length: number; shared: boolean }[] = [];
    let buffer: ArrayBufferLike | undefined;
    await model.scoreTargets(batch, {
      gather: (logits, targets, rows, vocab) => {
        expect(vocab).toBe(VOCAB);
        buffer ??= logits.buffer;
        calls.push({ rows, length: logits.length, shared: logits.buffer === buffer });
        expect(targets.length).toBe(rows);
        return new Float32Array(rows);
      },
    });
    expect(calls).toHaveLength(batch.length);
    for (const c of calls) {
      expect(c.length).toBe(c.rows * VOCAB);
      expect(c.shared).toBe(true);
    }
  });

  it('scores contexts that are prefixes of other contexts from their cache, exactly', async () => {
    // Two trajectories whose round contexts are prefixes of one another (MemPO full contexts),
    // one context repeated with another target, a one-token context, and unrelated items.
    const trajA = randomIds(150, 31);
    const trajB = randomIds(90, 32);
    const tA = [9, 300, 301, 10];
    const tB = [9, 400, 10];
    const batch = [
      { contextIds: trajA.slice(0, 40), targetIds: tA },
      { contextIds: trajB.slice(0, 90), targetIds: tB },
      { contextIds: randomIds(25, 33), targetIds: [9, 5, 10] },
      { contextIds: trajA.slice(0, 150), targetIds: tA },
      { contextIds: trajA.slice(0, 95), targetIds: tA },
      { contextIds: trajB.slice(0, 30), targetIds: tB },
      { contextIds: trajA.slice(0, 95), targetIds: [9, 7, 8, 6, 10] },
      { contextIds: trajA.slice(0, 1), targetIds: [9, 11] },
    ];
    const shared = await model.scoreTargets(batch, { padding: 'left' });
    const stats = model.lastScoreStats!;
    expect(stats.sharedItems).toBe(5);
    expect(stats.tokens).toBe(150 + 4 + 90 + 3 + 25 + 3);
    expect(stats.tailTokens).toBe(4 + 3 + 4 + 5 + 2);
    const plain = await model.scoreTargets(batch, { sharePrefixes: false });
    expect(model.lastScoreStats!.sharedItems).toBe(0);
    for (let i = 0; i < batch.length; i++) {
      const ref = await referenceLogprobs(model, batch[i]!.contextIds, batch[i]!.targetIds);
      expect(maxAbsDiff(shared[i]!, ref)).toBeLessThan(1e-4);
      expect(maxAbsDiff(plain[i]!, ref)).toBeLessThan(1e-4);
    }
    // A tiny budget splits hosts and tails into many passes, with the same results.
    const split = await model.scoreTargets(batch, { maxBatchTokens: 100 });
    expect(model.lastScoreStats!.sharedItems).toBe(5);
    for (let i = 0; i < batch.length; i++) expect(maxAbsDiff(split[i]!, shared[i]!)).toBeLessThan(1e-4);
  });

  it('scores contexts sharing only a prompt with a host from the cached prompt, exactly', async () => {
    // MemPO memory contexts: the question prompt + a round's <mem> span; the full contexts of
    // the same question (a chain, so a host) start with the same prompt.
    const prompt = randomIds(40, 51);
    const traj = [...prompt, ...randomIds(120, 52)];
    const target = [9, 600, 601, 10];
    const batch = [
      { contextIds: traj.slice(0, 100), targetIds: target },
      { contextIds: traj, targetIds: target },
      { contextIds: [...prompt, 3, ...randomIds(20, 53), 4], targetIds: target },
      { contextIds: [...prompt, 3, ...randomIds(25, 54), 4], targetIds: target },
      { contextIds: [...prompt.slice(0, 10), ...randomIds(30, 55)], targetIds: target },
      { contextIds: randomIds(30, 56), targetIds: target },
    ];
    const got = await model.scoreTargets(batch);
    let stats = model.lastScoreStats!;
    // traj.slice(0, 100) by exact prefix, the two memory contexts by their 40-token prompt; the
    // item sharing 10 tokens and the unrelated one run on their own.
    expect(stats.sharedItems).toBe(3);
    expect(stats.tokens).toBe(160 + 4 + 40 + 4 + 30 + 4);
    // A tail runs the context after the shared prefix and the target but its last token.
    expect(stats.tailTokens).toBe(4 + (22 + 3) + (27 + 3));
    for (let i = 0; i < batch.length; i++) {
      const ref = await referenceLogprobs(model, batch[i]!.contextIds, batch[i]!.targetIds);
      expect(maxAbsDiff(got[i]!, ref)).toBeLessThan(1e-4);
    }
    await model.scoreTargets(batch, { minSharedPrefix: 5, padding: 'left' });
    stats = model.lastScoreStats!;
    expect(stats.sharedItems).toBe(4);
    await model.scoreTargets(batch, { minSharedPrefix: Infinity });
    expect(model.lastScoreStats!.sharedItems).toBe(1);
  });

  it('keeps the oldest context tokens out only when truncate is left', async () => {
    const V = model.config.maxPositions;
    const context = randomIds(V, 7);
    const target = [9, 500, 10];
    await expect(model.scoreTargets([{ contextIds: [1, 2], targetIds: [3] }, { contextIds: context, targetIds: target }])).rejects.toThrow(
      `items[1] has ${V} context + 3 target tokens = ${V + 3}, more than the model's maximum length ${V} (pass truncate: 'left' to drop the oldest context tokens)`,
    );
    const [got] = await model.scoreTargets([{ contextIds: context, targetIds: target }], { truncate: 'left' });
    const ref = await referenceLogprobs(model, context.slice(3), target);
    expect(maxAbsDiff(got!, ref)).toBeLessThan(1e-4);
  });
});
