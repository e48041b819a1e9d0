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
