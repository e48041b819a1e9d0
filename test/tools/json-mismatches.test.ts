/** The comparator that checks files recorded on one CPU against a recomputation on another (test/helpers.ts). */
import { jsonMismatches } from '../helpers';

describe('jsonMismatches', () => {
  it('passes floats within the tolerance, names every other difference by its path', () => {
    expect(jsonMismatches({ p: 0.1413711905, n: 258 }, { p: 0.1413710614, n: 258 }, 1e-6, 1e-4)).toEqual([]);
    expect(jsonMismatches({ p: 0.15 }, { p: 0.1413710614 }, 1e-6, 1e-4)).toEqual(['$.p: 0.15 ≠ 0.1413710614']);
    expect(jsonMismatches({ n: 259 }, { n: 258 }, 1e-6, 1e-1)).toEqual(['$.n: 259 ≠ 258']);
    expect(jsonMismatches([{ a: null }], [{ a: 0 }], 1, 1)).toEqual(['$[0].a: null ≠ 0']);
    expect(jsonMismatches({ a: 1 }, { b: 1 }, 0, 0)).toEqual(['$.a: unexpected', '$.b: missing']);
    expect(jsonMismatches([1, 2], [1], 0, 0)).toEqual(['$: length 2 ≠ 1']);
    expect(jsonMismatches({ s: 'x', t: true }, { s: 'y', t: false }, 1, 1)).toEqual(['$.s: "x" ≠ "y"', '$.t: true ≠ false']);
  });
});
