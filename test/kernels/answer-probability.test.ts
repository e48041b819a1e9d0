import { answerProbability, gatherLogProbs, memoryRewards } from '../../src';
import { expectClose } from '../helpers';

function refLogSoftmax(row: number[], t: number): number {
  const m = Math.max(...row);
  const s = row.reduce((acc, x) => acc + Math.exp(x - m), 0);
  return row[t]! - m - Math.log(s);
}

describe('gatherLogProbs', () => {
  it('equals log_softmax at the target for each row', () => {
    const rows = [
      [1, 2, 3, 4],
      [-5, 0, 5, 0.5],
      [1000, 999, -1000, 1000],
    ];
    const out = gatherLogProbs(new Float32Array(rows.flat()), new Int32Array([3, 0, 1]), 3, 4);
    expectClose(out, [refLogSoftmax(rows[0]!, 3), refLogSoftmax(rows[1]!, 0), refLogSoftmax(rows[2]!, 1)], 1e-6, 1e-6);
  });

  it('handles a vocabulary that is not a multiple of the SIMD width', () => {
    const V = 2053;
    const row = Array.from({ length: V }, (_, i) => Math.sin(i) * 30);
    expectClose(gatherLogProbs(new Float32Array(row), new Int32Array([2052]), 1, V), [refLogSoftmax(row, 2052)], 1e-5, 1e-5);
  });

  it('follows torch.log_softmax on non-finite logits', () => {
    const inf = Infinity;
    const logits = new Float32Array([
      0, NaN, 1, 2, // NaN anywhere → NaN
      0, inf, 1, 2, // +inf anywhere → NaN
      -inf, -inf, -inf, -inf, // all −inf → NaN
      -inf, 0, 0, -inf, // −inf elsewhere: ignored
      -inf, 0, 0, 1, // −inf target → −inf
    ]);
    const out = gatherLogProbs(logits, new Int32Array([2, 2, 0, 1, 0]), 5, 4);
    expect(Number.isNaN(out[0])).toBe(true);
    expect(Number.isNaN(out[1])).toBe(true);
    expect(Number.isNaN(out[2])).toBe(true);
    expect(out[3]).toBeCloseTo(Math.log(0.5), 6);
    expect(out[4]).toBe(-Infinity);
  });

  it('returns an empty result for zero rows', () => {
    expect(gatherLogProbs(new Float32Array(0), new Int32Array(0), 0, 10)).toHaveLength(0);
  });

  describe('bad input', () => {
    it.each([
      [() => gatherLogProbs(new Float32Array(6), new Int32Array([0, 3]), 2, 3), RangeError, 'Expected a token id in [0, vocab = 3) for targets[1] but received 3'],
      [() => gatherLogProbs(new Float32Array(6), new Int32Array([-1, 0]), 2, 3), RangeError, 'Expected a token id in [0, vocab = 3) for targets[0] but received -1'],
      [() => gatherLogProbs(new Float32Array(5), new Int32Array([0, 0]), 2, 3), RangeError, 'Expected Float32Array of length rows*vocab = 6 for logits but received Float32Array of length 5'],
      [() => gatherLogProbs(new Float64Array(6) as never, new Int32Array([0, 0]), 2, 3), TypeError, 'Expected Float32Array of length rows*vocab = 6 for logits but received Float64Array of length 6'],
      [() => gatherLogProbs(new Float32Array(6), [0, 0] as never, 2, 3), TypeError, 'Expected Int32Array of length rows = 2 for targets but received Array of length 2'],
      [() => gatherLogProbs(new Float32Array(6), new Int32Array(2), 2, 0), RangeError, 'Expected a positive integer below 2^31 for vocab but received 0'],
      [() => gatherLogProbs(null as never, new Int32Array(2), 2, 3), TypeError, 'Expected Float32Array of length rows*vocab = 6 for logits but received null'],
    ])('%#: throws the same error on every backend', (fn, cls, msg) => {
      expect(fn).toThrow(cls);
      expect(fn).toThrow(msg);
    });
  });
});

describe('answerProbability', () => {
  it('is the geometric mean of kept answer-token probabilities', () => {
    const lp = [Math.log(0.9), Math.log(0.8), Math.log(0.4), Math.log(0.7)];
    const mask = new Uint8Array([0, 1, 1, 1]); // token 0 is a template tag
    const out = answerProbability(new Float32Array(lp), mask, 1, 4); // 0.4 < 0.5 is dropped
    expectClose(out, [Math.sqrt(0.8 * 0.7)], 1e-6, 1e-6);
  });

  it('keeps every answer token with threshold = -Infinity', () => {
    const lp = [Math.log(0.8), Math.log(0.4), Math.log(0.7)];
    const out = answerProbability(new Float32Array(lp), new Uint8Array([1, 1, 1]), 1, 3, { threshold: -Infinity });
    expectClose(out, [Math.cbrt(0.8 * 0.4 * 0.7)], 1e-6, 1e-6);
  });

  it('gives 0 when nothing is kept (all filtered, empty mask, NaN)', () => {
    const out = answerProbability(
      new Float32Array([Math.log(0.1), Math.log(0.2), 0, 0, NaN, NaN]),
      new Uint8Array([1, 1, 0, 0, 1, 1]),
      3,
      2,
    );
    expect(Array.from(out)).toEqual([0, 0, 0]);
  });

  it('rejects a threshold of +Infinity or NaN', () => {
    const f = (t: number) => () => answerProbability(new Float32Array(1), new Uint8Array(1), 1, 1, { threshold: t });
    expect(f(Infinity)).toThrow('Expected a number below Infinity (−Infinity allowed) for opts.threshold but received Infinity');
    expect(f(NaN)).toThrow(TypeError);
  });

  it('rejects a mask of the wrong type', () => {
    expect(() => answerProbability(new Float32Array(2), new Int8Array(2) as never, 1, 2)).toThrow(
      'Expected Uint8Array of length rows*cols = 2 for ansMask but received Int8Array of length 2',
    );
  });
});

describe('memoryRewards', () => {
  it("reproduces the example of docs/algorithm.md §4: P_full 0.72, P_mem 0.68 → −0.04", () => {
    // One snapshot, one answer token per item: rows [full, mem].
    const logp = new Float32Array([Math.log(0.72), Math.log(0.68)]);
    const r = memoryRewards(logp, new Uint8Array([1, 1]), 1, 1);
    expectClose(r.pFull, [0.72], 1e-6, 1e-6);
    expectClose(r.pMem, [0.68], 1e-6, 1e-6);
    expectClose(r.memRewards, [-0.04], 1e-6, 1e-6);
  });

  it('pairs row m with row M + m', () => {
    const p = [0.9, 0.6, 0.7, 0.95];
    const r = memoryRewards(new Float32Array(p.map(Math.log)), new Uint8Array(4).fill(1), 2, 1);
    expectClose(r.memRewards, [0.7 - 0.9, 0.95 - 0.6], 1e-6, 1e-6);
  });
});
