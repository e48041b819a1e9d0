/**
 * What one step trains on (docs/algorithm.md §9): each kept full-context trajectory of the batch
 * is one learner sample, prompt + response with the response as targets; the loss (§6) sees the
 * response mask (generated tokens only) and the per-token final advantages (§5).
 */
import type { BatchRecord, LearnerSample } from '../contracts';
import { MempoError } from '../errors';

export interface TrainRow {
  sample: LearnerSample;
  /** Response positions: 1 on generated tokens. */
  mask: Uint8Array;
  advantages: Float32Array;
  /** The sampler's log-probs (option `oldLogp: 'sampler'`), null when the generator returned none. */
  samplerLogp: Float32Array | null;
  /** Mask tokens. */
  tokens: number;
}

/**
 * Kept trajectories with at least one generated token; excluded ones (tool / server failures)
 * carry no signal. `maxContext` (the learner's, LearnerInfo.maxContext): a tool observation may
 * run past the context after the last generated token (§2 trims it to the response budget only);
 * those trailing tokens are out of the loss and, the model being causal, change no log-prob
 * before them, so they are cut. A generated token past it is an error naming the trajectory.
 */
export function trainRows(records: readonly BatchRecord[], maxContext?: number): TrainRow[] {
  const rows: TrainRow[] = [];
  for (const r of records) {
    if (r.excluded || r.responseIds.length === 0 || r.promptIds.length === 0) continue;
    let n = r.responseIds.length;
    if (maxContext !== undefined && r.promptIds.length + n > maxContext) {
      n = Math.max(0, maxContext - r.promptIds.length);
      const generated = r.responseMask.indexOf(1, n);
      if (generated >= 0) {
        throw new MempoError('ERR_INVALID_INPUT', `trajectory ${r.uid}: generated token ${generated} of the response sits at position ${r.promptIds.length + generated}, past the learner's context of ${maxContext}; serve the learner's model with the rollout model's context`);
      }
    }
    const mask = Uint8Array.from(r.responseMask.slice(0, n));
    const tokens = mask.reduce((a, m) => a + (m !== 0 ? 1 : 0), 0);
    if (tokens === 0) continue;
    rows.push({
      sample: { ids: [...r.promptIds, ...r.responseIds.slice(0, n)], targetStart: r.promptIds.length },
      mask,
      advantages: Float32Array.from(r.advantages.slice(0, n)),
      samplerLogp: r.oldLogp === null ? null : Float32Array.from(r.oldLogp.slice(0, n)),
      tokens,
    });
  }
  return rows;
}

/** Consecutive groups of rows whose padded size (rows × longest sample) stays within `maxTokens` (a longer row goes alone). */
export function microBatches<T extends { sample: LearnerSample }>(rows: readonly T[], maxTokens: number): T[][] {
  const out: T[][] = [];
  let cur: T[] = [];
  let longest = 0;
  for (const r of rows) {
    const len = r.sample.ids.length;
    const next = Math.max(longest, len);
    if (cur.length > 0 && next * (cur.length + 1) > maxTokens) {
      out.push(cur);
      cur = [];
      longest = 0;
    }
    cur.push(r);
    longest = Math.max(longest, len);
  }
  if (cur.length > 0) out.push(cur);
  return out;
}

/** Row-major [rows × cols] copy of per-row arrays, zero-padded on the right. */
export function padRows<A extends Float32Array | Uint8Array>(parts: readonly A[], cols: number, make: (n: number) => A): A {
  const out = make(parts.length * cols);
  parts.forEach((p, i) => out.set(p, i * cols));
  return out;
}
