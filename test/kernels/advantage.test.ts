import { finalAdvantage, grpoOutcomeAdvantage, memoryAdvantage } from '../../src';
import { expectClose } from '../helpers';

const ones = (n: number) => new Uint8Array(n).fill(1);

describe('grpoOutcomeAdvantage', () => {
  it("reproduces the worked example of docs/algorithm.md §5: scores [1,0,1,1,0]", () => {
    const T = 3;
    const adv = grpoOutcomeAdvantage(new Float32Array([1, 0, 1, 1, 0]), [7, 7, 7, 7, 7], ones(5 * T), T);
    const std = Math.sqrt(0.3); // unbiased: (3·0.16 + 2·0.36) / 4
    const up = 0.4 / (std + 1e-6);
    const down = -0.6 / (std + 1e-6);
    expectClose(adv, [up, up, up, down, down, down, up, up, up, up, up, up, down, down, down], 1e-6, 1e-6);
  });

  it('normalises each group on its own and broadcasts onto mask tokens only', () => {
    const mask = new Uint8Array([1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 1, 1]);
    const adv = grpoOutcomeAdvantage([2, 4, 10, 0], ['a', 'b', 'a', 'b'], mask, 3);
    const sa = Math.sqrt(32); // group a: 2, 10 → mean 6, std sqrt(32)
    const sb = Math.sqrt(8); // group b: 4, 0 → mean 2, std sqrt(8)
    const a0 = -4 / (sa + 1e-6), a2 = 4 / (sa + 1e-6), b1 = 2 / (sb + 1e-6), b3 = -2 / (sb + 1e-6);
    expectClose(adv, [a0, a0, 0, b1, 0, 0, a2, a2, a2, 0, b3, b3], 1e-6, 1e-6);
  });

  it('gives a singleton group mean 0 and std 1', () => {
    expectClose(grpoOutcomeAdvantage([0.5], [1], ones(2), 2), [0.5 / (1 + 1e-6), 0.5 / (1 + 1e-6)], 1e-7, 1e-7);
    expectClose(grpoOutcomeAdvantage([0.5], [1], ones(2), 2, { normByStd: false }), [0.5, 0.5], 1e-7, 1e-7);
  });

  it('gives zeros when all scores of a group are equal', () => {
    expect(Array.from(grpoOutcomeAdvantage([1, 1, 1], [0, 0, 0], ones(6), 2))).toEqual([0, 0, 0, 0, 0, 0]);
  });

  it('honours eps and normByStd', () => {
    const s = [1, 0];
    const std = Math.SQRT1_2;
    expectClose(grpoOutcomeAdvantage(s, [0, 0], ones(2), 1, { eps: 0.5 }), [0.5 / (std + 0.5), -0.5 / (std + 0.5)], 1e-6, 1e-6);
    expectClose(grpoOutcomeAdvantage(s, [0, 0], ones(2), 1, { normByStd: false }), [0.5, -0.5], 1e-7, 1e-7);
  });

  it('returns zeros for an empty mask', () => {
    expect(Array.from(grpoOutcomeAdvantage([1, 0], [0, 0], new Uint8Array(4), 2))).toEqual([0, 0, 0, 0]);
  });

  it('handles an empty batch', () => {
    expect(grpoOutcomeAdvantage([], [], new Uint8Array(0), 4)).toHaveLength(0);
  });

  describe('bad input', () => {
    it.each([
      [() => grpoOutcomeAdvantage('x' as never, [0], ones(1), 1), TypeError, 'Expected Float32Array, Float64Array or number[] of length B for scores but received "x"'],
      [() => grpoOutcomeAdvantage([1, 2], [0], ones(2), 1), RangeError, 'Expected an array of numbers or strings of length B = 2 for groups but received Array of length 1'],
      [() => grpoOutcomeAdvantage([1], [0], ones(3), 2), RangeError, 'Expected Uint8Array of length B*T = 2 for responseMask but received Uint8Array of length 3'],
      [() => grpoOutcomeAdvantage([1], [0], [1, 1] as never, 2), TypeError, 'Expected Uint8Array of length B*T = 2 for responseMask but received Array of length 2'],
      [() => grpoOutcomeAdvantage([1], [0], ones(1), 0), RangeError, 'Expected a positive integer below 2^31 for seqLen but received 0'],
      [() => grpoOutcomeAdvantage([1], [0], ones(1), 1.5), TypeError, 'Expected a positive integer for seqLen but received 1.5'],
      [() => grpoOutcomeAdvantage([NaN], [0], ones(1), 1), RangeError, 'Expected a finite number for scores[0] but received NaN'],
      [() => grpoOutcomeAdvantage([1], [{}] as never, ones(1), 1), TypeError, 'Expected a finite number or a string for groups[0] but received an object'],
      [() => grpoOutcomeAdvantage([1], [0], ones(1), 1, { eps: -1 }), RangeError, 'Expected a finite number >= 0 for opts.eps but received -1'],
      [() => grpoOutcomeAdvantage([1], [0], ones(1), 1, { normByStd: 1 } as never), TypeError, 'Expected a boolean for opts.normByStd but received 1'],
      [() => grpoOutcomeAdvantage([1], [0], ones(1), 1, { epsilon: 1 } as never), TypeError, 'Unknown option "epsilon" in opts; valid options are eps, normByStd'],
    ])('%#: throws the same error on every backend', (fn, cls, msg) => {
      expect(fn).toThrow(cls);
      expect(fn).toThrow(msg);
    });
  });
});

describe('memoryAdvantage', () => {
  it('pools every memory reward of a question across trajectories and rounds', () => {
    // uid q: rewards 0.1, -0.1, 0.3 on three spans in two trajectories; uid r: a singleton.
    const spans = new Int32Array([0, 1, 3, 0, 5, 7, 1, 2, 4, 2, 0, 1]);
    const adv = memoryAdvantage([0.1, -0.1, 0.3, 0.2], ['q', 'q', 'q', 'r'], spans, 3, 8);
    const mean = 0.1;
    const std = Math.sqrt((0 + 0.04 + 0.04) / 2);
    const n = (x: number) => (x - mean) / (std + 1e-6);
    const expected = new Float32Array(24);
    expected.fill(n(0.1), 1, 3);
    expected.fill(n(-0.1), 5, 7);
    expected.fill(n(0.3), 8 + 2, 8 + 4);
    expected.fill(0.2 / (1 + 1e-6), 16, 17);
    expectClose(adv, expected, 1e-6, 1e-6);
  });

  it("normalises each round index apart with memGrouping 'question-round'", () => {
    const spans = new Int32Array([0, 0, 1, 0, 1, 2, 1, 0, 1, 1, 1, 2]);
    const rounds = new Int32Array([2, 3, 2, 3]);
    const adv = memoryAdvantage([1, 5, 3, 5], [0, 0, 0, 0], spans, 2, 2, { memGrouping: 'question-round', normByStd: false, rounds });
    expectClose(adv, [-1, 0, 1, 0], 1e-7, 1e-7);
    const pooled = memoryAdvantage([1, 5, 3, 5], [0, 0, 0, 0], spans, 2, 2, { normByStd: false, rounds });
    expectClose(pooled, [-2.5, 1.5, -0.5, 1.5], 1e-7, 1e-7);
  });

  it('is all zeros without snapshots', () => {
    expect(Array.from(memoryAdvantage([], [], new Int32Array(0), 2, 2))).toEqual([0, 0, 0, 0]);
  });

  describe('bad input', () => {
    const spans = new Int32Array([0, 0, 2, 0, 1, 3]);
    it.each([
      [() => memoryAdvantage([1, 2], [0, 0], spans, 1, 2), RangeError, 'Expected 0 <= start < end <= seqLen = 2 for spans[1] (row, start, end) but received (0, 1, 3)'],
      [() => memoryAdvantage([1, 2], [0, 0], spans, 1, 4), RangeError, 'Expected spans that do not overlap within a row for spans[1] (row, start, end) but received (0, 1, 3), which overlaps spans[0] (0, 0, 2)'],
      [() => memoryAdvantage([1], [0], new Int32Array([1, 0, 1]), 1, 4), RangeError, 'Expected a row in [0, 1) for spans[0] (row, start, end) but received row 1'],
      [() => memoryAdvantage([1], [0], new Int32Array([0, 2, 2]), 1, 4), RangeError, 'Expected 0 <= start < end <= seqLen = 4 for spans[0] (row, start, end) but received (0, 2, 2)'],
      [() => memoryAdvantage([1], [0], new Int32Array([0, 0]), 1, 4), RangeError, 'Expected Int32Array of length M*3 = 3 for spans but received Int32Array of length 2'],
      [() => memoryAdvantage([1], [0], [0, 0, 1] as never, 1, 4), TypeError, 'Expected Int32Array of length M*3 = 3 for spans but received Array of length 3'],
      [() => memoryAdvantage([1], [0], new Int32Array([0, 0, 1]), 1, 4, { memGrouping: 'round' as never }), RangeError, "Expected one of 'question', 'question-round' for opts.memGrouping but received \"round\""],
      [() => memoryAdvantage([1], [0], new Int32Array([0, 0, 1]), 1, 4, { memGrouping: 'question-round' }), TypeError, "for opts.rounds but received undefined"],
      [() => memoryAdvantage([1], [0], new Int32Array([0, 0, 1]), 1, 4, { rounds: new Int32Array(2) }), RangeError, 'Expected Int32Array of length M = 1 for opts.rounds but received Int32Array of length 2'],
      [() => memoryAdvantage([Infinity], [0], new Int32Array([0, 0, 1]), 1, 4), RangeError, 'Expected a finite number for memRewards[0] but received Infinity'],
    ])('%#: throws the same error on every backend', (fn, cls, msg) => {
      expect(fn).toThrow(cls);
      expect(fn).toThrow(msg);
    });
  });
});

describe('finalAdvantage', () => {
  it('adds alpha times the memory advantage on mask tokens', () => {
    const out = finalAdvantage(new Float32Array([1, 1, 1, 1]), new Float32Array([0, 2, 2, 0]), new Uint8Array([1, 1, 1, 0]), { alpha: 0.5 });
    expect(Array.from(out)).toEqual([1, 2, 2, 0]);
    expect(Array.from(finalAdvantage(new Float32Array([1]), new Float32Array([2]), new Uint8Array([1])))).toEqual([3]);
  });
  it('checks lengths against outcome', () => {
    expect(() => finalAdvantage(new Float32Array(2), new Float32Array(3), new Uint8Array(2))).toThrow(
      'Expected Float32Array of length B*T = 2 (the length of outcome) for memory but received Float32Array of length 3',
    );
  });
});
