import { rangeError } from '../validate';

/**
 * Group normalisation shared by the outcome and memory advantages (docs/algorithm.md §5, verl
 * `compute_grpo_outcome_advantage`): per group, mean and unbiased (n−1) std; a group of one
 * has mean 0 and std 1; value = (x − mean)/(std + eps), or x − mean without std scaling.
 */
export function groupNormalize(
  values: Float64Array,
  groups: Int32Array,
  groupCount: number,
  eps: number,
  normByStd: boolean,
): Float64Array {
  const n = new Float64Array(groupCount);
  const sum = new Float64Array(groupCount);
  for (let i = 0; i < values.length; i++) {
    const g = groups[i]!;
    n[g]! += 1;
    sum[g]! += values[i]!;
  }
  const mean = new Float64Array(groupCount);
  for (let g = 0; g < groupCount; g++) mean[g] = n[g]! > 1 ? sum[g]! / n[g]! : 0;
  const sq = new Float64Array(groupCount);
  for (let i = 0; i < values.length; i++) {
    const g = groups[i]!;
    const d = values[i]! - mean[g]!;
    sq[g]! += d * d;
  }
  const out = new Float64Array(values.length);
  for (let i = 0; i < values.length; i++) {
    const g = groups[i]!;
    const centred = values[i]! - mean[g]!;
    if (!normByStd) {
      out[i] = centred;
    } else {
      const std = n[g]! > 1 ? Math.sqrt(sq[g]! / (n[g]! - 1)) : 1;
      out[i] = centred / (std + eps);
    }
  }
  return out;
}

const FLOAT32_OVERFLOW = 2 ** 128 - 2 ** 103; // FLT_MAX + half an ulp: a Float32Array store gives ±Infinity from here

/**
 * Throws, naming the value, where groupNormalize would overflow (docs/algorithm.md §5): a
 * group whose sum or squared deviations are infinite in double (scores [1e308, 1e308, 0]), or an
 * advantage beyond the float32 range. Otherwise those give NaN or ±Infinity advantages, or
 * silently wrong ones (an infinite std turns every advantage of the group into 0). Run before
 * either backend, on the M or B values only; eps = 0 with a zero spread stays NaN (0/0).
 */
export function checkGroupRange(values: Float64Array, groups: Int32Array, groupCount: number, eps: number, normByStd: boolean, argument: string): void {
  // A trainer calls this per micro-batch, so the common case is one pass: values that are 0 or of
  // magnitude in [1e-100, 1e19] (scores, probabilities) overflow nothing. Group sums stay below
  // 2^31 · 1e19 and squared deviations below 2^31 · 4e38; a non-zero deviation is at least
  // ~1e-126 (the values' rounding), so its square never underflows into a zero spread; and
  // |centred| / spread ≤ sqrt(n) keeps the advantage far inside float32.
  const n = new Float64Array(groupCount);
  const sum = new Float64Array(groupCount);
  let tame = true;
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    n[groups[i]!]! += 1;
    sum[groups[i]!]! += v;
    const a = Math.abs(v);
    if (a !== 0 && !(a >= 1e-100 && a <= 1e19)) tame = false;
  }
  if (tame) return;
  const mean = new Float64Array(groupCount);
  for (let g = 0; g < groupCount; g++) mean[g] = n[g]! > 1 ? sum[g]! / n[g]! : 0;
  const sq = new Float64Array(groupCount);
  for (let i = 0; i < values.length; i++) {
    const d = values[i]! - mean[groups[i]!]!;
    sq[groups[i]!]! += d * d;
  }
  const spread = new Float64Array(groupCount);
  for (let g = 0; g < groupCount; g++) spread[g] = n[g]! > 1 ? Math.sqrt(sq[g]! / (n[g]! - 1)) : 1;
  for (let i = 0; i < values.length; i++) {
    const g = groups[i]!;
    const centred = values[i]! - mean[g]!;
    const adv = normByStd ? centred / (spread[g]! + eps) : centred;
    if (Number.isFinite(sum[g]) && Number.isFinite(spread[g]) && Number.isFinite(centred) && !(Math.abs(adv) >= FLOAT32_OVERFLOW)) continue;
    let worst = i; // name the group's largest magnitude: the value that overflows
    for (let j = 0; j < values.length; j++) if (groups[j] === g && Math.abs(values[j]!) > Math.abs(values[worst]!)) worst = j;
    throw rangeError(
      'a value whose group sum, squared deviations and advantage stay finite (float32 range for the advantage)',
      `${argument}[${worst}]`,
      values[worst],
    );
  }
}
