import { nativeAddon } from './backend';
import { denseGroups } from './groups';
import { checkFiniteVector, checkOptions, checkSize, checkTyped, optBoolean, optNumber } from '../validate';
import { checkGroupRange, groupNormalize } from './group-normalize';
import { checkOut, checkResultSize, newResult, type ResultOptions } from './result';

export interface GroupNormOptions {
  /** Added to the std before dividing (default 1e-6). */
  eps?: number;
  /** Divide by the group's std (default true); false gives score − mean. */
  normByStd?: boolean;
}

/** grpoOutcomeAdvantage's options: the group normalisation and an optional caller-owned result. */
export interface OutcomeAdvantageOptions extends GroupNormOptions, ResultOptions {}

export function readGroupNorm(opts: Record<string, unknown>): { eps: number; normByStd: boolean } {
  return {
    eps: optNumber(opts, 'eps', 'opts', 1e-6, (v) => v >= 0 && Number.isFinite(v), 'a finite number >= 0'),
    normByStd: optBoolean(opts, 'normByStd', 'opts', true),
  };
}

/**
 * GRPO outcome advantage (docs/algorithm.md §5).
 * scores[B], groups[B] (uids), responseMask[B*T] → Float32Array[B*T] holding each trajectory's
 * group-normalised score on its response tokens (mask ≠ 0) and 0 elsewhere. Group ids given as an
 * Int32Array in [0, B) are used as they are (no per-call uid mapping); the results are the same.
 * opts.out (Float32Array[B*T]) receives the result, every element overwritten, and is returned.
 */
export function grpoOutcomeAdvantage(
  scores: Float32Array | Float64Array | number[],
  groups: ArrayLike<number | string>,
  responseMask: Uint8Array,
  seqLen: number,
  opts?: OutcomeAdvantageOptions,
): Float32Array {
  const T = checkSize(seqLen, 'seqLen');
  const s = checkFiniteVector(scores, 'scores', null, 'B');
  const B = s.length;
  checkResultSize(B * T, 'B*seqLen', `${B}*${T}`);
  const g = denseGroups(groups, 'groups', B, `B = ${B}`);
  const mask = checkTyped(responseMask, Uint8Array, 'responseMask', B * T, `B*T = ${B * T}`);
  const o = checkOptions(opts, 'opts', ['eps', 'normByStd', 'out']);
  const { eps, normByStd } = readGroupNorm(o);
  const given = o.out === undefined ? undefined : checkOut(o.out, 'opts.out', B * T, `B*T = ${B * T}`, { scores, groups, responseMask: mask });
  checkGroupRange(s, g.ids, g.count, eps, normByStd, 'scores');

  const addon = nativeAddon();
  if (addon) return addon.grpoOutcomeAdvantage(s, g.ids, g.count, mask, B, T, eps, normByStd, given);

  const adv = groupNormalize(s, g.ids, g.count, eps, normByStd);
  const out = given ?? newResult(B * T);
  for (let b = 0; b < B; b++) {
    const a = adv[b]!;
    const base = b * T;
    for (let t = 0; t < T; t++) out[base + t] = mask[base + t] !== 0 ? a : 0;
  }
  return out;
}
