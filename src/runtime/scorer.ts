/**
 * Teacher-forced target scoring (SPEC §4): for each item, log π(target_t | context, target_<t)
 * for every target token.
 *
 * All items of a call are sorted by length (longest first) and packed into micro-batches whose
 * padded size (rows × longest row) stays within a token budget. Rows are padded on one side,
 * consistently (right by default), with `attention_mask` 0 and `position_ids` counting real
 * tokens only, so a padded row computes exactly what the unpadded sequence would. Only the
 * `logits` output is fetched (no `present.*` copies).
 *
 * Gathering: an item's target positions are consecutive, so their logits rows form one
 * contiguous block of the `[batch, len, vocab]` output; that block is passed to the kernel's
 * `gatherLogProbs` as a `subarray` view (no copy), one call per item.
 */
import { gatherLogProbs } from '../scoring';
import type { CausalLM } from './causal-lm';
import { MempoRuntimeError, invalidArgument } from './errors';
import type { GatherFn } from './gather';
import { checkTokenIds } from './validate';

export interface ScoreItem {
  contextIds: ArrayLike<number>;
  targetIds: ArrayLike<number>;
}

export interface ScoreOptions {
  /** Most padded tokens (rows × longest row) per forward pass. Default 8192. */
  maxBatchTokens?: number;
  /** Bound on one forward pass's logits tensor, in bytes (default 256 MiB); lowers the token budget for large vocabularies. */
  maxLogitsBytes?: number;
  /** Which side padding goes (default 'right'). Models without position_ids allow only 'right'. */
  padding?: 'right' | 'left';
  /** Items longer than the model's maximum: 'error' (default) or drop the context's first tokens ('left'). */
  truncate?: 'error' | 'left';
  /** Replace the log-prob gathering kernel (default: `gatherLogProbs` of the current backend). */
  gather?: GatherFn;
}

export interface ScoreStats {
  items: number;
  microBatches: number;
  /** Real tokens run through the model. */
  tokens: number;
  /** Tokens including padding. */
  paddedTokens: number;
  targetTokens: number;
}

const DEFAULT_MAX_BATCH_TOKENS = 8192;
const DEFAULT_MAX_LOGITS_BYTES = 256 * 1024 * 1024;

interface Prepared {
  index: number;
  context: ArrayLike<number>;
  target: Int32Array;
  length: number;
}

export async function scoreTargets(model: CausalLM, items: readonly ScoreItem[], options: ScoreOptions = {}): Promise<Float32Array[]> {
  if (!Array.isArray(items)) throw invalidArgument('an array of { contextIds, targetIds }', 'items', items);
  if (options === null || typeof options !== 'object') throw invalidArgument('an options object', 'options', options);
  const V = model.config.vocabSize;
  const maxPos = model.config.maxPositions;
  const padding = options.padding ?? 'right';
  if (padding !== 'right' && padding !== 'left') throw invalidArgument("'right' or 'left'", 'options.padding', padding);
  if (padding === 'left' && !model.io.hasPositionIds) {
    throw new MempoRuntimeError('ERR_INVALID_ARGUMENT', `padding: 'left' needs position_ids, which ${model.modelPath} does not take`);
  }
  const truncate = options.truncate ?? 'error';
  if (truncate !== 'error' && truncate !== 'left') throw invalidArgument("'error' or 'left'", 'options.truncate', truncate);
  const maxBatchTokens = options.maxBatchTokens ?? DEFAULT_MAX_BATCH_TOKENS;
  if (!Number.isInteger(maxBatchTokens) || maxBatchTokens < 1) throw invalidArgument('a positive integer', 'options.maxBatchTokens', maxBatchTokens);
  const maxLogitsBytes = options.maxLogitsBytes ?? DEFAULT_MAX_LOGITS_BYTES;
  if (typeof maxLogitsBytes !== 'number' || !(maxLogitsBytes > 0)) throw invalidArgument('a positive number', 'options.maxLogitsBytes', maxLogitsBytes);
  const gather: GatherFn = options.gather ?? gatherLogProbs;
  if (typeof gather !== 'function') throw invalidArgument('a function', 'options.gather', gather);

  const prepared: Prepared[] = items.map((item, index) => {
    if (item === null || typeof item !== 'object') throw invalidArgument('{ contextIds, targetIds }', `items[${index}]`, item);
    let context = checkTokenIds(item.contextIds, V, `items[${index}].contextIds`);
    const targetIds = checkTokenIds(item.targetIds, V, `items[${index}].targetIds`);
    if (targetIds.length === 0) throw new MempoRuntimeError('ERR_EMPTY_TARGET', `items[${index}].targetIds is empty; there is nothing to score`);
    if (context.length === 0) {
      throw new MempoRuntimeError('ERR_EMPTY_CONTEXT', `items[${index}].contextIds is empty; the first target token needs at least one context token`);
    }
    const length = context.length + targetIds.length;
    if (length > maxPos) {
      const keep = maxPos - targetIds.length;
      if (truncate === 'error' || keep < 1) {
        throw new MempoRuntimeError(
          'ERR_CONTEXT_TOO_LONG',
          `items[${index}] has ${context.length} context + ${targetIds.length} target tokens = ${length}, more than the model's maximum length ${maxPos}` +
            (keep < 1 ? '' : " (pass truncate: 'left' to drop the oldest context tokens)"),
        );
      }
      context = Array.prototype.slice.call(context, context.length - keep) as number[];
    }
    return { index, context, target: Int32Array.from(targetIds), length: context.length + targetIds.length };
  });

  const results: Float32Array[] = new Array(items.length);
  const order = prepared.slice().sort((a, b) => b.length - a.length || a.index - b.index);
  const budget = Math.max(1, Math.min(maxBatchTokens, Math.floor(maxLogitsBytes / (V * 4))));
  const stats: ScoreStats = { items: items.length, microBatches: 0, tokens: 0, paddedTokens: 0, targetTokens: 0 };
  let i = 0;
  while (i < order.length) {
    const L = order[i]!.length;
    let j = i + 1;
    while (j < order.length && (j - i + 1) * L <= budget) j++;
    await runMicroBatch(model, order.slice(i, j), L, padding, gather, results);
    stats.microBatches++;
    stats.paddedTokens += (j - i) * L;
    for (let k = i; k < j; k++) {
      stats.tokens += order[k]!.length;
      stats.targetTokens += order[k]!.target.length;
    }
    i = j;
  }
  model.lastScoreStats = stats;
  return results;
}

async function runMicroBatch(
  model: CausalLM,
  batch: Prepared[],
  L: number,
  padding: 'right' | 'left',
  gather: GatherFn,
  results: Float32Array[],
): Promise<void> {
  const V = model.config.vocabSize;
  const b = batch.length;
  const padId = BigInt(model.padTokenId);
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
  const out = await model.forward({
    inputIds,
    batch: b,
    seqLen: L,
    attentionMask: mask,
    positionIds,
    past: model.emptyCache(b),
    fetchPresent: false,
  });
  const logits = out.logits;
  for (let r = 0; r < b; r++) {
    const it = batch[r]!;
    const t = it.target.length;
    // Row predicting target[0] is the last context position.
    const first = r * L + offsets[r]! + it.context.length - 1;
    results[it.index] = gather(logits.subarray(first * V, (first + t) * V), it.target, t, V);
  }
}
