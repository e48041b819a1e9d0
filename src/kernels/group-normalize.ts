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
  const n = new Float64Array(groupCount);
  const sum = new Float64Array(groupCount);
  for (let i = 0; i < values.length; i++) {
    n[groups[i]!]! += 1;
    sum[groups[i]!]! += values[i]!;
  }
  const mean = sum.map((s, g) => (n[g]! > 1 ? s / n[g]! : 0));
  const sq = new Float64Array(groupCount);
  for (let i = 0; i < values.length; i++) sq[groups[i]!]! += (values[i]! - mean[groups[i]!]!) ** 2;
  for (let i = 0; i < values.length; i++) {
    const g = groups[i]!;
    const centred = values[i]! - mean[g]!;
    const spread = n[g]! > 1 ? Math.sqrt(sq[g]! / (n[g]! - 1)) : 1;
    const adv = normByStd ? centred / (spread + eps) : centred;
    if (Number.isFinite(sum[g]) && Number.isFinite(spread) && Number.isFinite(centred) && !(Math.abs(adv) >= FLOAT32_OVERFLOW)) continue;
    let worst = i; // name the group's largest magnitude: the value that overflows
    for (let j = 0; j < values.length; j++) if (groups[j] === g && Math.abs(values[j]!) > Math.abs(values[worst]!)) worst = j;
    throw rangeError(
      'a value whose group sum, squared deviations and advantage stay finite (float32 range for the advantage)',
      `${argument}[${worst}]`,
      values[worst],
    );
  }
}
