/**
 * One full pass of the scorer over a micro-batch. Rows are padded on one side, consistently
 * (right by default), with `attention_mask` 0 and `position_ids` counting real tokens only, so a
 * padded row computes exactly what the unpadded sequence would. Only `logits` is fetched unless
 * the batch holds prefix hosts, whose `present.*` cache their members are scored from.
 *
 * Gathering: an item's target positions are consecutive, so their logits rows form one
 * contiguous block of the `[batch, len, vocab]` output; that block is passed to the gather
 * kernel as a `subarray` view (no copy), one call per item.
 */
import type { KVCache } from './kv-cache';
import type { Prepared } from './score-options';
import type { ForwardModel, GatherFn } from './types';

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
  padding: 'right' | 'left',
  gather: GatherFn,
  results: Float32Array[],
  fetchPresent: boolean,
): Promise<{ present: KVCache | undefined; offsets: Int32Array }> {
  const V = model.config.vocabSize;
  const b = batch.length;
  const { inputIds, positionIds, mask, offsets } = padRows(batch, L, padding, BigInt(model.padTokenId));
  const out = await model.forward({
    inputIds,
    batch: b,
    seqLen: L,
    attentionMask: mask,
    positionIds,
    past: model.emptyCache(b),
    fetchPresent,
  });
  const logits = out.logits;
  for (let r = 0; r < b; r++) {
    const it = batch[r]!;
    const t = it.target.length;
    // Row predicting target[0] is the last context position.
    const first = r * L + offsets[r]! + it.context.length - 1;
    results[it.index] = gather(logits.subarray(first * V, (first + t) * V), it.target, t, V);
  }
  return { present: out.present, offsets };
}
