/**
 * One full pass of the scorer over a micro-batch. Rows are padded on one side, consistently
 * (right by default), with `attention_mask` 0 and `position_ids` counting real tokens only, so a
 * padded row computes exactly what the unpadded sequence would. Only `logits` is fetched unless
 * the batch holds prefix hosts, whose `present.*` cache their members are scored from.
 *
 * Gathering: an item's target positions are consecutive, so their logits rows form one
 * contiguous block of the `[batch, len, vocab]` output; that block is passed to the gather
 * kernel as a `subarray` view (no copy), one call per item. With selected logits the pass asks
 * for exactly those rows (`logitsAt`, row by row) and each item's block lies in the compact
 * `[targets, vocab]` output instead.
 */
import type { KVCache } from './kv-cache';
import type { Prepared, ResolvedScore } from './score-options';
import type { ForwardModel } from './types';

/** Flat positions of the target rows (`first[r]`, `count[r]` rows each), row after row. */
export function targetRows(first: ArrayLike<number>, count: ArrayLike<number>): Int32Array {
  let n = 0;
  for (let r = 0; r < count.length; r++) n += count[r]!;
  const at = new Int32Array(n);
  let k = 0;
  for (let r = 0; r < count.length; r++) for (let i = 0; i < count[r]!; i++) at[k++] = first[r]! + i;
  return at;
}

/** `[b, L]` inputs of a padded micro-batch, and each row's offset (its left padding). */
function padRows(batch: readonly Prepared[], L: number, padding: 'right' | 'left', padId: bigint) {
  const b = batch.length;
  const inputIds = new BigInt64Array(b * L).fill(padId);
  const positionIds = new BigInt64Array(b * L);
  const mask = new BigInt64Array(b * L);
  const offsets = new Int32Array(b);
  for (let r = 0; r < b; r++) {
    const it = batch[r]!;
    const off = padding === 'left' ? L - it.length : 0;
    offsets[r] = off;
    const base = r * L + off;
    const c = it.context.length;
    for (let k = 0; k < c; k++) inputIds[base + k] = BigInt(it.context[k]!);
    for (let k = 0; k < it.target.length; k++) inputIds[base + c + k] = BigInt(it.target[k]!);
    for (let k = 0; k < it.length; k++) positionIds[base + k] = BigInt(k);
    // Padding positions: 1 before real tokens (as HF's left padding does), continuing after them.
    for (let k = 0; k < off; k++) positionIds[r * L + k] = 1n;
    for (let k = off + it.length; k < L; k++) positionIds[r * L + k] = BigInt(k - off);
    mask.fill(1n, base, base + it.length);
  }
  return { inputIds, positionIds, mask, offsets };
}

/**
 * Runs `batch` (rows padded to `L`) and writes each item's target log-probs to
 * `results[item.index]`; returns the cache when `fetchPresent` and the rows' offsets.
 */
export async function runMicroBatch(
  model: ForwardModel,
  batch: readonly Prepared[],
  L: number,
  opts: Pick<ResolvedScore, 'padding' | 'gather' | 'select'>,
  results: Float32Array[],
  fetchPresent: boolean,
): Promise<{ present: KVCache | undefined; offsets: Int32Array }> {
  const V = model.config.vocabSize;
  const b = batch.length;
  const { inputIds, positionIds, mask, offsets } = padRows(batch, L, opts.padding, BigInt(model.padTokenId));
  // Row predicting target[0] is the last context position.
  const first = batch.map((it, r) => r * L + offsets[r]! + it.context.length - 1);
  const count = batch.map((it) => it.target.length);
  const out = await model.forward({
    inputIds,
    batch: b,
    seqLen: L,
    attentionMask: mask,
    positionIds,
    past: model.emptyCache(b),
    fetchPresent,
    logitsAt: opts.select ? targetRows(first, count) : undefined,
  });
  gatherRows(out.logits, batch, first, opts, V, results);
  return { present: out.present, offsets };
}

/** Each item's target log-probs, from its rows of the full logits (at `first`) or of the compact block. */
export function gatherRows(
  logits: Float32Array,
  items: readonly Prepared[],
  first: readonly number[],
  opts: Pick<ResolvedScore, 'gather' | 'select'>,
  V: number,
  results: Float32Array[],
): void {
  let k = 0;
  items.forEach((it, r) => {
    const t = it.target.length;
    const at = opts.select ? k : first[r]!;
    results[it.index] = opts.gather(logits.subarray(at * V, (at + t) * V), it.target, t, V);
    k += t;
  });
}
