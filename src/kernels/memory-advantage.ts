import { nativeAddon } from './backend';
import { denseGroups, pairGroups } from './groups';
import { checkFiniteVector, checkOptions, checkSize, checkTyped, optEnum, rangeError, Shown, typeError } from '../validate';
import { checkGroupRange, groupNormalize } from './group-normalize';
import { checkOut, checkResultSize, newResult, type ResultOptions } from './result';
import { GroupNormOptions, readGroupNorm } from './outcome-advantage';

export type MemGrouping = 'question' | 'question-round';

export interface MemoryAdvantageOptions extends GroupNormOptions, ResultOptions {
  /** 'question' (default): pool every memory reward of a uid; 'question-round': per round index. */
  memGrouping?: MemGrouping;
  /** Round index of each memory reward (Int32Array[M]); required for 'question-round'. */
  rounds?: Int32Array;
}

/** Throws unless every span lies inside its row and no two spans of one row overlap. */
export function checkSpans(spans: Int32Array, M: number, B: number, T: number): void {
  let ordered = true; // rollouts emit spans by row, then by start: then one pass suffices
  for (let m = 0; m < M; m++) {
    const row = spans[3 * m]!;
    const start = spans[3 * m + 1]!;
    const end = spans[3 * m + 2]!;
    if (row < 0 || row >= B) throw rangeError(`a row in [0, ${B})`, `spans[${m}] (row, start, end)`, new Shown(`row ${row}`));
    if (start < 0 || end > T || start >= end) {
      throw rangeError(`0 <= start < end <= seqLen = ${T}`, `spans[${m}] (row, start, end)`, new Shown(`(${row}, ${start}, ${end})`));
    }
    if (m > 0 && (spans[3 * m - 3]! > row || (spans[3 * m - 3] === row && spans[3 * m - 2]! > start))) ordered = false;
  }
  let order: number[] | null = null;
  if (!ordered) {
    order = Array.from({ length: M }, (_, m) => m);
    order.sort((a, b) => spans[3 * a]! - spans[3 * b]! || spans[3 * a + 1]! - spans[3 * b + 1]!);
  }
  const at = (k: number) => (order ? order[k]! : k);
  for (let k = 1; k < M; k++) {
    const p = at(k - 1);
    const q = at(k);
    if (spans[3 * p] === spans[3 * q] && spans[3 * q + 1]! < spans[3 * p + 2]!) {
      throw rangeError(
        `spans that do not overlap within a row`,
        `spans[${q}] (row, start, end)`,
        new Shown(`(${spans[3 * q]}, ${spans[3 * q + 1]}, ${spans[3 * q + 2]}), which overlaps spans[${p}] (${spans[3 * p]}, ${spans[3 * p + 1]}, ${spans[3 * p + 2]})`),
      );
    }
  }
}

/**
 * Memory advantage (docs/algorithm.md §5). memRewards[M], memGroups[M] (uids), spans Int32Array[M*3] of
 * (row, start, end exclusive) → Float32Array[B*T]: memory rewards normalised within their
 * uid (or uid × round), each written onto its own mem span; zero elsewhere. opts.out
 * (Float32Array[B*T]) receives the result, zeros included, and is returned.
 */
export function memoryAdvantage(
  memRewards: Float32Array | Float64Array | number[],
  memGroups: ArrayLike<number | string>,
  spans: Int32Array,
  batch: number,
  seqLen: number,
  opts?: MemoryAdvantageOptions,
): Float32Array {
  const B = checkSize(batch, 'batch');
  const T = checkSize(seqLen, 'seqLen');
  checkResultSize(B * T, 'batch*seqLen', `${B}*${T}`);
  const r = checkFiniteVector(memRewards, 'memRewards', null, 'M');
  const M = r.length;
  const g = denseGroups(memGroups, 'memGroups', M, `M = ${M}`);
  checkTyped(spans, Int32Array, 'spans', M * 3, `M*3 = ${M * 3}`);
  const o = checkOptions(opts, 'opts', ['eps', 'normByStd', 'memGrouping', 'rounds', 'out']);
  const { eps, normByStd } = readGroupNorm(o);
  const grouping = optEnum(o, 'memGrouping', 'opts', ['question', 'question-round'] as const, 'question');
  let groups = g;
  if (o.rounds !== undefined || grouping === 'question-round') {
    if (o.rounds === undefined) throw typeError(`Int32Array of length M = ${M} (memGrouping 'question-round' needs it)`, 'opts.rounds', undefined);
    const rounds = checkTyped(o.rounds, Int32Array, 'opts.rounds', M, `M = ${M}`);
    if (grouping === 'question-round') groups = pairGroups(g.ids, rounds);
  }
  checkSpans(spans, M, B, T);
  const given = o.out === undefined ? undefined : checkOut(o.out, 'opts.out', B * T, `batch*seqLen = ${B * T}`, { memRewards, memGroups, spans, 'opts.rounds': o.rounds });
  checkGroupRange(r, groups.ids, groups.count, eps, normByStd, 'memRewards');

  const addon = nativeAddon();
  if (addon) return addon.memoryAdvantage(r, groups.ids, groups.count, spans, B, T, eps, normByStd, given);

  const adv = groupNormalize(r, groups.ids, groups.count, eps, normByStd);
  const out = given?.fill(0) ?? newResult(B * T);
  for (let m = 0; m < M; m++) {
    const base = spans[3 * m]! * T;
    out.fill(adv[m]!, base + spans[3 * m + 1]!, base + spans[3 * m + 2]!);
  }
  return out;
}
