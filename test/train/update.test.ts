/**
 * The policy update's wiring (docs/algorithm.md §6, §9) against a recording in-process learner:
 * micro-batches get the mini-batch's global normaliser, so the gradient each row receives does not
 * depend on how the mini-batch is split; old / reference log-probs come from the right policy.
 */
import type { Learner, LearnerForwardOptions, LearnerSample, OptimParams } from '../../src/contracts';
import { microBatches, trainRows, type TrainRow } from '../../src/train/samples';
import { policyUpdate } from '../../src/train/update';
import { resolveTrainOptions } from '../../src/train/options';
import { rng } from '../helpers';

/** log p of token x at position t under "policy shift" s: a fixed negative function of (x, t, s). */
const logpOf = (x: number, t: number, shift: number) => -0.1 - ((x * 7 + t * 3) % 11) / 10 - shift;

class RecordingLearner implements Learner {
  readonly name = 'recording learner';
  /** Per sample key (its ids joined): the summed gradient it received. */
  grads = new Map<string, Float64Array>();
  forwards: Array<{ n: number; policy: string; grad: boolean }> = [];
  steps = 0;
  private last: LearnerSample[] = [];
  constructor(private readonly shift = 0.05) {}
  info() { return Promise.resolve({ protocol: 1, learner: 'rec', model: '', parameters: 0, device: 'cpu', dtype: 'fp32', step: this.steps }); }
  forward(samples: readonly LearnerSample[], o: LearnerForwardOptions = {}) {
    this.forwards.push({ n: samples.length, policy: o.policy ?? 'current', grad: o.grad === true });
    if (o.grad) this.last = [...samples];
    // The current policy has moved from the sampler (old = shift 0) by `shift`; the reference by 2·shift.
    const s = o.policy === 'reference' ? -this.shift : o.grad ? this.shift : 0;
    return Promise.resolve(samples.map((smp) => Float32Array.from(Array.from(smp.ids).slice(smp.targetStart), (x, t) => logpOf(x, t, s))));
  }
  backward(grads: readonly Float32Array[]) {
    this.last.forEach((smp, i) => {
      const key = Array.from(smp.ids).join(',');
      const acc = this.grads.get(key) ?? new Float64Array(grads[i]!.length);
      grads[i]!.forEach((g, t) => { acc[t]! += g; });
      this.grads.set(key, acc);
    });
    return Promise.resolve();
  }
  optimStep(_p: OptimParams) { this.steps++; return Promise.resolve({ gradNorm: 1.5, step: this.steps }); }
  saveWeights() { return Promise.resolve(); }
  saveCheckpoint() { return Promise.resolve({ step: this.steps }); }
  loadCheckpoint() { return Promise.resolve({ step: this.steps }); }
  close() { return Promise.resolve(); }
}

function rows(n: number, seed: number): TrainRow[] {
  const r = rng(seed);
  return Array.from({ length: n }, (_, i) => {
    const P = 3 + Math.floor(r() * 5);
    const T = 2 + Math.floor(r() * 9);
    const ids = Array.from({ length: P + T }, () => 1 + Math.floor(r() * 50));
    ids[0] = i + 100; // unique key per row
    const mask = Uint8Array.from({ length: T }, () => (r() < 0.7 ? 1 : 0));
    mask[0] = 1;
    return { sample: { ids, targetStart: P }, mask, advantages: Float32Array.from({ length: T }, () => r() * 2 - 1), samplerLogp: null, tokens: mask.reduce((a, m) => a + m, 0) };
  });
}

describe('policyUpdate', () => {
  for (const aggMode of ['token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean'] as const) {
    it(`${aggMode}: each row's gradient is the same whether the mini-batch is one micro-batch or many`, async () => {
      const data = rows(9, 3);
      const whole = new RecordingLearner();
      const split = new RecordingLearner();
      const o = (tokens: number) => resolveTrainOptions({ microBatchTokens: tokens, loss: { aggMode, klCoef: 0.01 } });
      const a = await policyUpdate(whole, data, o(1_000_000), 1);
      const b = await policyUpdate(split, data, o(20), 1);
      expect(split.forwards.filter((f) => f.grad).length).toBeGreaterThan(3);
      expect(whole.forwards.filter((f) => f.grad).length).toBe(1);
      for (const [k, g] of whole.grads) {
        const h = split.grads.get(k)!;
        g.forEach((x, t) => expect(Math.abs(x - h[t]!)).toBeLessThan(1e-7));
      }
      expect(Math.abs(a.loss - b.loss)).toBeLessThan(1e-6);
      expect(Math.abs(a.klRef! - b.klRef!)).toBeLessThan(1e-7);
      expect(Math.abs(a.clipFrac - b.clipFrac)).toBeLessThan(1e-9);
      expect(a.updates).toBe(1);
    });
  }

  it('token-mean over the whole mini-batch: a row gets −A·ratio / (all mask tokens), never its own count', async () => {
    // the sampler's log-probs are shift 0, the learner's current ones shift 0.01: ratio e^−0.01, inside the clip range
    const data = rows(4, 8).map((r) => ({ ...r, samplerLogp: Float32Array.from(Array.from(r.sample.ids).slice(r.sample.targetStart), (x, t) => logpOf(x, t, 0)) }));
    const l = new RecordingLearner(0.01);
    await policyUpdate(l, data, resolveTrainOptions({ oldLogp: 'sampler', microBatchTokens: 1, loss: { klCoef: 0 } }), 1);
    const total = data.reduce((a, r) => a + r.tokens, 0);
    for (const r of data) {
      const g = l.grads.get(Array.from(r.sample.ids).join(','))!;
      r.mask.forEach((m, t) => {
        // d/dlogp of −A·exp(logp − old) at logp = old − 0.01, divided by the mini-batch's tokens
        const want = m ? (-r.advantages[t]! * Math.exp(-0.01)) / total : 0;
        expect(Math.abs(g[t]! - want)).toBeLessThan(1e-6);
      });
    }
  });

  it('reference log-probs only with a KL term; recomputed old log-probs need a forward only for rows after the first update', async () => {
    const l = new RecordingLearner();
    const u = await policyUpdate(l, rows(8, 1), resolveTrainOptions({ ppoEpochs: 2, miniBatches: 2, microBatchTokens: 1_000_000 }), 5);
    // reference for all 8, then old log-probs (no graph) for the 4 rows of the second mini-batch only
    expect(l.forwards.slice(0, 2)).toEqual([{ n: 8, policy: 'reference', grad: false }, { n: 4, policy: 'current', grad: false }]);
    expect(l.forwards.slice(2).every((f) => f.grad && f.policy === 'current' && f.n === 4)).toBe(true);
    expect(l.forwards.length).toBe(6);
    expect(u.updates).toBe(4);
    expect(l.steps).toBe(4);
    // one on-policy update (the defaults): a single forward, its own log-probs are the old ones (ratio 1)
    const l0 = new RecordingLearner();
    const u0 = await policyUpdate(l0, rows(3, 1), resolveTrainOptions({ loss: { klCoef: 0 } }), 5);
    expect(l0.forwards).toEqual([{ n: 3, policy: 'current', grad: true }]);
    expect(u0.approxKl).toBe(0);
    expect(u0.clipFrac).toBe(0);
  });

  it("with oldLogp 'sampler' the sampler's log-probs are used and no old-logp forward runs", async () => {
    const data = rows(3, 2).map((r) => ({ ...r, samplerLogp: new Float32Array(r.mask.length).fill(-1) }));
    const l = new RecordingLearner();
    const u = await policyUpdate(l, data, resolveTrainOptions({ oldLogp: 'sampler', loss: { klCoef: 0 } }), 0);
    expect(l.forwards).toEqual([{ n: 3, policy: 'current', grad: true }]);
    expect(u.approxKl).not.toBe(0);
  });
});

describe('microBatches and trainRows', () => {
  it('packs rows while rows × longest ≤ the budget; a longer row goes alone', () => {
    const mk = (n: number) => ({ sample: { ids: new Array<number>(n).fill(1), targetStart: 1 } });
    const parts = microBatches([mk(4), mk(4), mk(5), mk(20), mk(2)], 12);
    expect(parts.map((p) => p.map((r) => r.sample.ids.length))).toEqual([[4, 4], [5], [20], [2]]);
  });

  it('drops excluded trajectories and those without generated tokens', () => {
    const base = { uid: 'q', sample: 0, question: '', golds: [], hops: null, objectives: null, rounds: [], score: 1, formatValid: true, formatReason: null, text: '', doneReason: null, error: null, oldLogp: null };
    const rec = (o: Record<string, unknown>) => ({ ...base, promptIds: [1, 2], responseIds: [3, 4], responseMask: [1, 0], outcomeAdvantage: [0.5, 0], memoryAdvantage: [0, 0], advantages: [0.5, 0], excluded: false, ...o });
    const got = trainRows([rec({}), rec({ excluded: true }), rec({ responseMask: [0, 0] })] as never);
    expect(got.length).toBe(1);
    expect(got[0]!.sample).toEqual({ ids: [1, 2, 3, 4], targetStart: 2 });
    expect(got[0]!.tokens).toBe(1);
  });

  // The learner refuses a sample longer than its context (400); an observation after the last
  // generated token may run past it (§2 trims observations to the response budget only).
  it("cuts trailing observation tokens past the learner's context; a generated token past it is an error naming the trajectory", () => {
    const base = { sample: 0, question: '', golds: [], hops: null, objectives: null, rounds: [], score: 1, formatValid: true, formatReason: null, text: '', doneReason: null, error: null, excluded: false };
    const rec = { ...base, uid: 'q7', promptIds: [1, 2, 3], responseIds: [4, 5, 6, 7, 8, 9], responseMask: [1, 1, 0, 0, 0, 0], oldLogp: [-1, -2, 0, 0, 0, 0], outcomeAdvantage: [], memoryAdvantage: [], advantages: [0.5, 0.25, 0, 0, 0, 0] };
    const [row] = trainRows([rec] as never, 7);
    expect(row!.sample).toEqual({ ids: [1, 2, 3, 4, 5, 6, 7], targetStart: 3 });
    expect([...row!.mask]).toEqual([1, 1, 0, 0]);
    expect([...row!.advantages]).toEqual([0.5, 0.25, 0, 0]);
    expect([...row!.samplerLogp!]).toEqual([-1, -2, 0, 0]);
    expect(trainRows([rec] as never, 9)[0]!.sample.ids.length).toBe(9);
    expect(() => trainRows([rec] as never, 4)).toThrow("trajectory q7: generated token 1 of the response sits at position 4, past the learner's context of 4; serve the learner's model with the rollout model's context");
  });
});

describe('resolveTrainOptions', () => {
  it('fills the defaults of docs/algorithm.md §9 and names an invalid option', () => {
    const o = resolveTrainOptions({});
    expect([o.ppoEpochs, o.miniBatches, o.oldLogp, o.loss.klCoef, o.loss.klType, o.optim.maxGradNorm]).toEqual([1, 1, 'learner', 0.001, 'low_var_kl', 1]);
    expect(() => resolveTrainOptions({ optim: { lr: -1 } })).toThrow(/^Invalid training option train\.optim\.lr: /);
    expect(() => resolveTrainOptions({ ppoEpoch: 2 })).toThrow('Invalid training option train: Unrecognized key: "ppoEpoch" ("ppoEpoch")');
  });
});
