/**
 * Native against the JS twin on random hostile inputs (fixed seed, a few seconds): random shapes
 * with empty rows and zero-row calls, NaN, ±Infinity, −0, subnormals and huge magnitudes in
 * every float input. Both backends must throw the same error or return the same numbers: NaN and
 * infinities at the same places, finite values within the float32-versus-double tolerance.
 */
import {
  answerProbability,
  gatherLogProbs,
  grpoOutcomeAdvantage,
  memoryAdvantage,
  ppoPolicyLoss,
} from '../../src';
import { AGG_MODES, KL_TYPES } from '../../src/kernels/ppo-policy-loss';
import { firstMismatch, onEachBackend, outcomeOf, rng } from '../helpers';

/** Runs fn on both backends; returns both results when both returned, after checking that any throw is the same. */
function both<T>(what: string, fn: () => T): { native: T; js: T } | null {
  const { native, js } = onEachBackend(() => outcomeOf(fn));
  if ('threw' in native || 'threw' in js) {
    if (JSON.stringify(native) !== JSON.stringify(js)) {
      throw new Error(`${what}: native ${JSON.stringify('threw' in native ? native : 'returned')} vs js ${JSON.stringify('threw' in js ? js : 'returned')}`);
    }
    return null;
  }
  return { native: native.value, js: js.value };
}

function expectSame(what: string, a: ArrayLike<number>, b: ArrayLike<number>, atol: number, rtol: number): void {
  const i = firstMismatch(a, b, atol, rtol);
  if (i !== -1) throw new Error(`${what}: native ${a[i]} vs js ${b[i]} at ${i} (lengths ${a.length}, ${b.length})`);
}

const r = rng(0x13f022);
const int = (lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));
const SPECIALS = [NaN, Infinity, -Infinity, -0, 0, 1e-40, -1e-40, 3e38, -3e38, 1e30, -1e30, 88, 100, -100];

/** A float: mostly ordinary (scale), sometimes one of SPECIALS (rate). */
function value(scale: number, rate: number): number {
  return r() < rate ? SPECIALS[int(0, SPECIALS.length - 1)]! : (r() - 0.5) * 2 * scale;
}

function floats(n: number, scale: number, rate: number, offset = 0): Float32Array {
  return new Float32Array(n).map(() => offset + value(scale, rate));
}

/** A mask with some all-zero rows. */
function mask(rows: number, cols: number, p: number): Uint8Array {
  const m = new Uint8Array(rows * cols).map(() => (r() < p ? 1 + int(0, 254) : 0));
  for (let row = 0; row < rows; row++) if (r() < 0.2) m.fill(0, row * cols, (row + 1) * cols);
  return m;
}

const shape = () => [r() < 0.1 ? 0 : int(1, 9), int(1, 41)] as const; // cols past 8: AVX2 blocks and tails
const rate = () => [0, 0.02, 0.2][int(0, 2)]!;

describe('native against the JS twin on hostile random inputs', () => {
  it('gatherLogProbs', () => {
    for (let k = 0; k < 300; k++) {
      const [R, V] = [shape()[0], int(1, 300)];
      const logits = floats(R * V, [1, 30, 1e4][int(0, 2)]!, rate());
      const targets = new Int32Array(R).map(() => int(0, V - 1));
      const out = both(`gather #${k}`, () => gatherLogProbs(logits, targets, R, V));
      if (out) expectSame(`gather #${k}`, out.native, out.js, 1e-4, 1e-5);
    }
  });

  it('answerProbability', () => {
    for (let k = 0; k < 300; k++) {
      const [R, A] = shape();
      const logp = floats(R * A, 3, rate(), -3);
      const m = mask(R, A, 0.7);
      const threshold = [Math.log(0.5), -Infinity, -0.1, 0, -1e30][int(0, 4)]!;
      const out = both(`answerProbability #${k}`, () => answerProbability(logp, m, R, A, { threshold }));
      if (out) expectSame(`answerProbability #${k}`, out.native, out.js, 1e-6, 1e-5);
    }
  });

  it('grpoOutcomeAdvantage and memoryAdvantage', () => {
    for (let k = 0; k < 300; k++) {
      const [B, T] = shape();
      const scale = [1, 1e6, 1e150, 1e300][int(0, 3)]!;
      const scores = Array.from({ length: B }, () => value(scale, rate() / 4));
      const groups = Array.from({ length: B }, () => int(0, 2));
      const normByStd = r() < 0.7;
      const eps = [1e-6, 0, 1][int(0, 2)]!;
      const m = mask(B, T, 0.8);
      const out = both(`grpo #${k}`, () => grpoOutcomeAdvantage(scores, groups, m, T, { normByStd, eps }));
      if (out) expectSame(`grpo #${k}`, out.native, out.js, 1e-6, 1e-6);

      const spans: number[] = [];
      for (let row = 0; row < B; row++) {
        for (let start = int(0, T); start < T; start = spans[spans.length - 1]! + int(0, 5)) {
          spans.push(row, start, int(start + 1, T));
        }
      }
      const M = spans.length / 3;
      const rewards = Array.from({ length: M }, () => value(scale, rate() / 4));
      const uids = Array.from({ length: M }, () => `q${int(0, 3)}`);
      const rounds = new Int32Array(M).map(() => int(0, 2));
      const memGrouping = r() < 0.5 ? 'question' : 'question-round';
      const adv = both(`memoryAdvantage #${k}`, () =>
        memoryAdvantage(rewards, uids, new Int32Array(spans), Math.max(B, 1), T, { normByStd, eps, memGrouping, rounds }),
      );
      if (adv) expectSame(`memoryAdvantage #${k}`, adv.native, adv.js, 1e-6, 1e-6);
    }
  });

  it('ppoPolicyLoss: NaN propagates to the loss on both, every other value agrees', () => {
    let nanLosses = 0;
    for (let k = 0; k < 400; k++) {
      const [rows, cols] = shape();
      const n = rows * cols;
      const rt = rate();
      const logp = floats(n, 3, rt, -3);
      const oldLogp = logp.map((x) => (r() < rt ? value(1, 1) : x + (r() - 0.5) * [0.5, 5, 60][int(0, 2)]!));
      const advantages = floats(n, [1, 1e4, 1e30][int(0, 2)]!, rt);
      const refLogp = r() < 0.5 ? floats(n, 3, rt, -3) : undefined;
      const m = mask(rows, cols, 0.85);
      const aggMode = AGG_MODES[int(0, 2)]!;
      const klType = KL_TYPES[int(0, 3)]!;
      const input = { logp, oldLogp, advantages, mask: m, rows, cols, aggMode, refLogp, klType, klCoef: 0.05, clipC: r() < 0.3 ? Infinity : 3 };
      const out = both(`ppo #${k}`, () => ppoPolicyLoss(input));
      if (!out) continue;
      const { native, js } = out;
      // float32 terms (the AVX2 body) against double: the tolerance scales with the terms' sizes.
      let size = 0;
      let kl = 0;
      for (let i = 0; i < n; i++) {
        if (m[i] === 0) continue;
        const d = Math.min(20, Math.max(-20, logp[i]! - oldLogp[i]!));
        const term = Math.abs(advantages[i]!) * Math.max(Math.exp(d), 1.2, input.clipC === Infinity ? 1 : 3);
        if (Number.isFinite(term)) size += term;
        if (Number.isFinite(d)) kl += Math.abs(d);
      }
      const tag = `ppo #${k} (${rows}x${cols}, ${aggMode}, ${refLogp ? klType : 'no KL'})`;
      expectSame(`${tag} loss`, [native.loss], [js.loss], 1e-6 * (1 + size), 1e-5);
      expectSame(`${tag} approxKl`, [native.approxKl], [js.approxKl], 1e-6 * (1 + kl), 1e-5);
      expectSame(`${tag} clipFrac`, [native.clipFrac], [js.clipFrac], 1e-9, 0);
      expectSame(`${tag} kl`, [native.kl ?? 0], [js.kl ?? 0], 1e-9, 1e-9);
      expectSame(`${tag} grad`, native.grad, js.grad, 1e-30, 1e-5);
      if (Number.isNaN(js.loss)) nanLosses++;
    }
    expect(nanLosses).toBeGreaterThan(10); // the NaN cases were exercised
  });
});
