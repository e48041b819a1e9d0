import { backend, ppoPolicyLoss, PpoPolicyLossInput, setBackend } from '../../src';
import { expectClose, rng } from '../helpers';

/**
 * Straight transcription of verl's compute_policy_loss + agg_loss + kl_penalty, per token. Kept so
 * that this suite needs no Python; test/python/test_peer_verl.py checks ppoPolicyLoss against verl
 * itself (verl 0.9.1's actor loss, requirements-peers.txt) on a real mempo batch.
 */
function reference(inp: PpoPolicyLossInput): { loss: number; clipFrac: number; approxKl: number; kl: number } {
  const { logp, oldLogp, advantages: A, mask, rows, cols } = inp;
  const cl = inp.clipLow ?? 0.2, ch = inp.clipHigh ?? 0.2, cc = inp.clipC ?? 3, beta = inp.klCoef ?? 0.001;
  const mode = inp.aggMode ?? 'token-mean';
  const pg: number[] = [], kld: number[] = [];
  let clipped = 0, tokens = 0, negKl = 0;
  for (let i = 0; i < rows * cols; i++) {
    const d = Math.min(20, Math.max(-20, logp[i]! - oldLogp[i]!));
    const ratio = Math.exp(d);
    const l1 = -A[i]! * ratio;
    const l2 = -A[i]! * Math.min(1 + ch, Math.max(1 - cl, ratio));
    const c1 = Math.max(l1, l2);
    const l3 = -A[i]! * cc;
    pg.push(A[i]! < 0 ? Math.min(l3, c1) : c1);
    if (mask[i]) {
      tokens++;
      negKl += d;
      if (l2 > l1) clipped++;
    }
    if (inp.refLogp) {
      const diff = logp[i]! - inp.refLogp[i]!;
      const t = inp.klType ?? 'low_var_kl';
      if (t === 'k1') kld.push(diff);
      else if (t === 'k2') kld.push(0.5 * diff * diff);
      else {
        const k = Math.min(20, Math.max(-20, -diff));
        kld.push(Math.min(10, Math.max(-10, Math.exp(k) - k - 1)));
      }
    }
  }
  const agg = (v: number[]) => {
    if (mode === 'token-mean') {
      let s = 0;
      for (let i = 0; i < v.length; i++) if (mask[i]) s += v[i]!;
      const n = inp.globalTokens ?? tokens;
      return n ? s / n : 0;
    }
    let total = 0, live = 0;
    for (let r = 0; r < rows; r++) {
      let s = 0, n = 0;
      for (let c = 0; c < cols; c++) {
        if (mask[r * cols + c]) {
          s += v[r * cols + c]!;
          n++;
        }
      }
      if (n === 0) continue;
      live++;
      total += mode === 'seq-mean-token-sum' ? s : s / n;
    }
    const n = inp.globalSequences ?? live;
    return n ? total / n : 0;
  };
  const kl = inp.refLogp ? agg(kld) : 0;
  return { loss: agg(pg) + (inp.refLogp ? beta * kl : 0), clipFrac: tokens ? clipped / tokens : 0, approxKl: tokens ? -negKl / tokens : 0, kl };
}

function randomInput(seed: number, rows: number, cols: number, withRef: boolean): PpoPolicyLossInput {
  const r = rng(seed);
  const n = rows * cols;
  const inp: PpoPolicyLossInput = {
    logp: new Float32Array(n).map(() => -r() * 3),
    oldLogp: new Float32Array(n),
    advantages: new Float32Array(n).map(() => (r() - 0.5) * 4),
    mask: new Uint8Array(n).map(() => (r() < 0.8 ? 1 : 0)),
    rows,
    cols,
  };
  inp.oldLogp = inp.logp.map((x) => x + (r() - 0.5) * 1.2);
  if (withRef) inp.refLogp = inp.logp.map((x) => x + (r() - 0.5) * 0.8);
  return inp;
}

describe('ppoPolicyLoss', () => {
  it('is −A when ratio = 1, with zero clip fraction and approx KL', () => {
    const n = 4;
    const lp = new Float32Array([-1, -2, -3, -4]);
    const res = ppoPolicyLoss({ logp: lp, oldLogp: lp.slice(), advantages: new Float32Array([1, -1, 2, 0]), mask: new Uint8Array(n).fill(1), rows: 1, cols: n });
    expect(res.loss).toBeCloseTo(-0.5, 6);
    expect(res.clipFrac).toBe(0);
    expect(res.approxKl).toBe(0);
    expectClose(res.grad, [-0.25, 0.25, -0.5, 0], 1e-6, 1e-6);
    expect(res.kl).toBeUndefined();
  });

  it('clips a positive advantage above 1 + clipHigh and a negative one below 1 − clipLow (zero gradient)', () => {
    const res = ppoPolicyLoss({
      logp: new Float32Array([Math.log(1.5), Math.log(0.5)]),
      oldLogp: new Float32Array([0, 0]),
      advantages: new Float32Array([1, -1]),
      mask: new Uint8Array([1, 1]),
      rows: 1,
      cols: 2,
    });
    expect(res.loss).toBeCloseTo((-1.2 + 0.8) / 2, 6);
    expect(res.clipFrac).toBe(1);
    expect(Array.from(res.grad)).toEqual([0, 0]);
  });

  it('applies the dual clip to negative advantages with large ratios', () => {
    const inp = { logp: new Float32Array([Math.log(5)]), oldLogp: new Float32Array([0]), advantages: new Float32Array([-1]), mask: new Uint8Array([1]), rows: 1, cols: 1 };
    expect(ppoPolicyLoss(inp).loss).toBeCloseTo(3, 5);
    expect(ppoPolicyLoss(inp).grad[0]).toBe(0);
    expect(ppoPolicyLoss({ ...inp, clipC: Infinity }).loss).toBeCloseTo(5, 5);
    expect(ppoPolicyLoss({ ...inp, clipC: Infinity }).grad[0]).toBeCloseTo(5, 5);
  });

  it.each(['token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean'] as const)('matches verl semantics in %s mode', (aggMode) => {
    const inp = { ...randomInput(11, 7, 13, false), aggMode, clipLow: 0.1, clipHigh: 0.28 };
    inp.mask.fill(0, 13, 26); // an empty row
    const res = ppoPolicyLoss(inp);
    const ref = reference(inp);
    expect(res.loss).toBeCloseTo(ref.loss, 5);
    expect(res.clipFrac).toBeCloseTo(ref.clipFrac, 10);
    expect(res.approxKl).toBeCloseTo(ref.approxKl, 5);
  });

  it.each(['k1', 'k2', 'k3', 'low_var_kl'] as const)('adds klCoef × the %s KL to the reference', (klType) => {
    const inp = { ...randomInput(5, 4, 9, true), klType, klCoef: 0.3 };
    const res = ppoPolicyLoss(inp);
    const ref = reference(inp);
    expect(res.kl).toBeCloseTo(ref.kl, 5);
    expect(res.loss).toBeCloseTo(ref.loss, 5);
  });

  it.each([
    ['token-mean', false, {}],
    ['seq-mean-token-sum', true, {}],
    ['seq-mean-token-mean', true, {}],
    ['token-mean', true, { globalTokens: 41 }],
    ['seq-mean-token-sum', false, { globalSequences: 7 }],
    ['seq-mean-token-mean', true, { globalSequences: 5 }],
  ] as const)('returns d(loss)/d(logp) that matches finite differences (%s, ref=%s, %j)', (aggMode, withRef, global) => {
    const inp = { ...randomInput(3, 3, 6, withRef), aggMode, klCoef: 0.5, ...global };
    const res = ppoPolicyLoss(inp);
    const h = 1e-3;
    for (let i = 0; i < inp.logp.length; i++) {
      const plus = inp.logp.slice(), minus = inp.logp.slice();
      plus[i]! += h;
      minus[i]! -= h;
      const fd = (reference({ ...inp, logp: plus }).loss - reference({ ...inp, logp: minus }).loss) / (plus[i]! - minus[i]!);
      // Where a clip boundary falls inside ±h the difference quotient straddles a kink: skip those.
      const d = inp.logp[i]! - inp.oldLogp[i]!;
      const nearKink = [Math.log(0.8), Math.log(1.2), Math.log(3)].some((k) => Math.abs(d - k) < 2 * h);
      if (!nearKink) expect(Math.abs(res.grad[i]! - fd)).toBeLessThan(2e-3);
    }
  });

  // docs/algorithm.md §6, across micro-batches: verl's agg_loss with global normalisers.
  describe('micro-batches with a global normaliser', () => {
    const R = 9, T = 11;
    const splits = [[0, 2, 6, 9], [0, 5, 9]]; // unequal micro-batches (row bounds)
    const sliceRows = (inp: PpoPolicyLossInput, r0: number, r1: number): PpoPolicyLossInput => {
      const part = <A extends Float32Array | Uint8Array>(a: A): A => a.slice(r0 * T, r1 * T) as A;
      const out: PpoPolicyLossInput = { ...inp, rows: r1 - r0, logp: part(inp.logp), oldLogp: part(inp.oldLogp), advantages: part(inp.advantages), mask: part(inp.mask) };
      if (inp.refLogp) out.refLogp = part(inp.refLogp);
      return out;
    };
    const counts = (mask: Uint8Array) => {
      let tokens = 0, sequences = 0;
      for (let r = 0; r < R; r++) {
        const c = mask.subarray(r * T, (r + 1) * T).reduce((s, m) => s + (m ? 1 : 0), 0);
        tokens += c;
        if (c > 0) sequences++;
      }
      return { tokens, sequences };
    };
    const whole = (aggMode: PpoPolicyLossInput['aggMode']) => {
      const inp: PpoPolicyLossInput = { ...randomInput(21, R, T, true), aggMode, klCoef: 0.2 };
      inp.mask.fill(0, 3 * T, 4 * T); // an empty row, inside a micro-batch
      for (let c = 0; c < T; c++) inp.mask[7 * T + c] = c < 2 ? 1 : 0; // a short row
      return inp;
    };
    // Sums of the micro-batches' losses and gradients (scattered back to their rows).
    const summed = (inp: PpoPolicyLossInput, bounds: number[], global: Partial<PpoPolicyLossInput>) => {
      const grad = new Float32Array(R * T);
      let loss = 0;
      for (let k = 0; k + 1 < bounds.length; k++) {
        const res = ppoPolicyLoss({ ...sliceRows(inp, bounds[k]!, bounds[k + 1]!), ...global });
        loss += res.loss;
        grad.set(res.grad, bounds[k]! * T);
      }
      return { loss, grad };
    };
    const maxDiff = (a: Float32Array, b: Float32Array) => a.reduce((m, v, i) => Math.max(m, Math.abs(v - b[i]!)), 0);

    it.each(['token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean'] as const)('%s: the micro-batch gradients sum to the whole mini-batch gradient', (aggMode) => {
      const inp = whole(aggMode);
      const full = ppoPolicyLoss(inp);
      const { tokens, sequences } = counts(inp.mask);
      const global = aggMode === 'token-mean' ? { globalTokens: tokens } : { globalSequences: sequences };
      for (const bounds of splits) {
        const sum = summed(inp, bounds, global);
        expect(maxDiff(sum.grad, full.grad)).toBeLessThan(1e-6);
        expect(Math.abs(sum.loss - full.loss)).toBeLessThan(1e-6);
        // Without the normaliser each call divides by its own count: the sum is not the whole's.
        const local = summed(inp, bounds, {});
        expect(maxDiff(local.grad, full.grad)).toBeGreaterThan(1e-3);
      }
    });

    it('keeps clipFrac and approxKl per call (the trainer averages metrics)', () => {
      const inp = sliceRows(whole('token-mean'), 0, 4);
      const own = ppoPolicyLoss(inp);
      const res = ppoPolicyLoss({ ...inp, globalTokens: 500 });
      expect(res.clipFrac).toBe(own.clipFrac);
      expect(res.approxKl).toBe(own.approxKl);
      expect(res.loss).toBeCloseTo((own.loss * counts(inp.mask).tokens) / 500, 9);
    });

    it('is today\'s result when the global count equals the call\'s own', () => {
      const inp = whole('seq-mean-token-mean');
      const own = ppoPolicyLoss(inp);
      const res = ppoPolicyLoss({ ...inp, globalSequences: counts(inp.mask).sequences });
      expect(res.loss).toBe(own.loss);
      expect(Array.from(res.grad)).toEqual(Array.from(own.grad));
    });

    it('agrees between the native and JS backends', () => {
      const before = backend();
      try {
        for (const aggMode of ['token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean'] as const) {
          const inp = { ...whole(aggMode), ...(aggMode === 'token-mean' ? { globalTokens: 1234 } : { globalSequences: 31 }) };
          setBackend('native');
          const native = ppoPolicyLoss(inp);
          setBackend('js');
          const js = ppoPolicyLoss(inp);
          expectClose(native.grad, js.grad, 1e-6, 1e-6);
          expect(native.loss).toBeCloseTo(js.loss, 6);
          expect(native.kl).toBeCloseTo(js.kl!, 9);
          expect(native.clipFrac).toBe(js.clipFrac);
        }
      } finally {
        setBackend(before);
      }
    });
  });

  it('returns zeros for an empty mask', () => {
    const inp = { ...randomInput(1, 2, 3, true) };
    inp.mask.fill(0);
    const res = ppoPolicyLoss(inp);
    expect(res).toMatchObject({ loss: 0, clipFrac: 0, approxKl: 0, kl: 0 });
    expect(Array.from(res.grad)).toEqual([0, 0, 0, 0, 0, 0]);
  });

  describe('bad input', () => {
    const base = () => randomInput(2, 2, 2, false);
    it.each([
      [() => ppoPolicyLoss({ ...base(), mask: new Uint8Array(3) }), RangeError, 'Expected Uint8Array of length rows*cols = 4 for mask but received Uint8Array of length 3'],
      [() => ppoPolicyLoss({ ...base(), oldLogp: [0, 0, 0, 0] as never }), TypeError, 'Expected Float32Array of length rows*cols = 4 for oldLogp but received Array of length 4'],
      [() => ppoPolicyLoss({ ...base(), aggMode: 'mean' as never }), RangeError, "Expected one of 'token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean' for input.aggMode but received \"mean\""],
      [() => ppoPolicyLoss({ ...base(), klType: 'kl' as never, refLogp: new Float32Array(4) }), RangeError, "Expected one of 'k1', 'k2', 'k3', 'low_var_kl' for input.klType"],
      [() => ppoPolicyLoss({ ...base(), clipC: 1 }), RangeError, 'Expected a number > 1 (Infinity disables the dual clip) for input.clipC but received 1'],
      [() => ppoPolicyLoss({ ...base(), clipLow: 1.5 }), RangeError, 'Expected a number in [0, 1] for input.clipLow but received 1.5'],
      [() => ppoPolicyLoss({ ...base(), refLogp: new Float32Array(2) }), RangeError, 'Expected Float32Array of length rows*cols = 4 for refLogp but received Float32Array of length 2'],
      [() => ppoPolicyLoss({ ...base(), cliprange: 0.2 } as never), TypeError, 'Unknown option "cliprange" in input'],
      [() => ppoPolicyLoss(undefined as never), TypeError, 'for input but received undefined'],
      [() => ppoPolicyLoss({ ...base(), globalTokens: 0 }), RangeError, 'Expected a positive integer for input.globalTokens but received 0'],
      [() => ppoPolicyLoss({ ...base(), globalTokens: 2.5 }), RangeError, 'Expected a positive integer for input.globalTokens but received 2.5'],
      [() => ppoPolicyLoss({ ...base(), globalTokens: '8' as never }), TypeError, 'Expected a positive integer for input.globalTokens but received "8"'],
      [() => ppoPolicyLoss({ ...base(), aggMode: 'seq-mean-token-sum', globalSequences: -1 }), RangeError, 'Expected a positive integer for input.globalSequences but received -1'],
      [() => ppoPolicyLoss({ ...base(), globalSequences: 4 }), RangeError, "input.globalSequences does not apply to aggMode 'token-mean'; it takes input.globalTokens"],
      [() => ppoPolicyLoss({ ...base(), aggMode: 'seq-mean-token-mean', globalTokens: 4 }), RangeError, "input.globalTokens does not apply to aggMode 'seq-mean-token-mean'; it takes input.globalSequences"],
      [() => ppoPolicyLoss({ ...base(), mask: new Uint8Array(4).fill(1), globalTokens: 3 }), RangeError, "Expected a positive integer >= this call's own count (4) for input.globalTokens but received 3"],
      [() => ppoPolicyLoss({ ...base(), aggMode: 'seq-mean-token-sum', mask: new Uint8Array(4).fill(1), globalSequences: 1 }), RangeError, "this call's own count (2) for input.globalSequences"],
    ])('%#: throws the same error on every backend', (fn, cls, msg) => {
      expect(fn).toThrow(cls);
      expect(fn).toThrow(msg);
    });
  });
});
