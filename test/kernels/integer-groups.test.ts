/**
 * Integer group ids (src/kernels/groups.ts): an Int32Array of ids in [0, length) is used as it is
 * (no per-label map), any other labels are numbered by first appearance. Only the partition into
 * groups reaches the results, so both must give the advantages of the same groups given as
 * string uids, bit for bit, on each backend; ids out of range take the map path.
 */
import { grpoOutcomeAdvantage, memoryAdvantage, mempoAdvantages } from '../../src';
import { denseGroups, pairGroups } from '../../src/kernels/groups';
import { mulberry32 } from '../../src/rng';

const B = 48, T = 40;
const r = mulberry32(5);
const scores = Float64Array.from({ length: B }, () => Math.round(r() * 4) / 4);
const mask = Uint8Array.from({ length: B * T }, () => (r() < 0.8 ? 1 : 0));
// Groups of uneven sizes, ids with gaps (2 and 5 unused), out of first-appearance order.
const ids = Int32Array.from({ length: B }, (_, i) => [4, 0, 3, 0, 6, 1][i % 6]!);
const uids = Array.from(ids, (g) => `question-${g}`);
const M = B * 2;
const spans = new Int32Array(M * 3);
for (let m = 0; m < M; m++) spans.set([m >> 1, (m & 1) * 20 + 2, (m & 1) * 20 + 9], 3 * m);
const rewards = Float64Array.from({ length: M }, () => r() - 0.5);
const memIds = Int32Array.from({ length: M }, (_, m) => ids[m >> 1]!);
const memUids = Array.from(memIds, (g) => `question-${g}`);
const rounds = Int32Array.from({ length: M }, (_, m) => m & 1);

describe('integer group ids', () => {
  it('takes an Int32Array of ids in range as it is, copied', () => {
    const g = denseGroups(ids, 'groups', B, 'B');
    expect(Array.from(g.ids)).toEqual(Array.from(ids));
    expect(g.count).toBe(7);
    expect(g.ids).not.toBe(ids);
  });

  it('numbers labels by first appearance otherwise (strings, out-of-range ids)', () => {
    expect(Array.from(denseGroups(['b', 'a', 'b'], 'g', 3, '3').ids)).toEqual([0, 1, 0]);
    expect(denseGroups(Int32Array.of(9, -1, 9), 'g', 3, '3')).toEqual({ ids: Int32Array.of(0, 1, 0), count: 2 });
  });

  it('pairs (group, round) by first appearance, negative rounds included', () => {
    expect(pairGroups(Int32Array.of(0, 1, 0, 0, 1), Int32Array.of(2, 2, -3, 2, -3))).toEqual({ ids: Int32Array.of(0, 1, 2, 0, 3), count: 4 });
  });

  it('gives the outcome advantage of the same groups as string uids, bit for bit', () => {
    expect(grpoOutcomeAdvantage(scores, ids, mask, T)).toEqual(grpoOutcomeAdvantage(scores, uids, mask, T));
    const outOfRange = Int32Array.from(ids, (g) => g * 1000 - 7);
    expect(grpoOutcomeAdvantage(scores, outOfRange, mask, T)).toEqual(grpoOutcomeAdvantage(scores, uids, mask, T));
  });

  it('gives the memory advantage and the fused stage of the same groups as string uids, bit for bit', () => {
    for (const memGrouping of ['question', 'question-round'] as const) {
      expect(memoryAdvantage(rewards, memIds, spans, B, T, { memGrouping, rounds })).toEqual(
        memoryAdvantage(rewards, memUids, spans, B, T, { memGrouping, rounds }),
      );
      const base = { scores, responseMask: mask, seqLen: T, memRewards: rewards, spans, memGrouping, rounds, alpha: 0.5 };
      expect(mempoAdvantages({ ...base, groups: ids, memGroups: memIds })).toEqual(mempoAdvantages({ ...base, groups: uids, memGroups: memUids }));
    }
  });
});
