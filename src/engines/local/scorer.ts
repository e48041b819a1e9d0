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
 *
 * Prefix sharing (default on, see prefix.ts): an item whose context is a prefix of another
 * item's context (MemPO full contexts of rounds 2..R of one trajectory) is not run over its
 * context again; its host's micro-batch also fetches `present.*`, and the member is scored by a
 * pass over its target only, on a slice of the host's cache.
 */
import { gatherLogProbs } from '../../kernels/gather-log-probs';
import type { CausalLM } from './causal-lm';
import { MempoRuntimeError, invalidArgument } from './errors';
import type { GatherFn } from './gather';
import { KVCache } from './kv-cache';
import { getOrt, type OrtTensor } from './ort';
import { findSharing, type PrefixMember } from './prefix';
import { checkTokenIds } from './validate';

export interface ScoreItem {
  contextIds: ArrayLike<number>;
  targetIds: ArrayLike<number>;
}

export interface ScoreOptions {
  /**
   * Most padded tokens (rows × longest row) per forward pass. Default 8192. An item longer than
   * the budget runs alone (items are never split).
   */
  maxBatchTokens?: number;
  /** Bound on one forward pass's logits tensor, in bytes (default 256 MiB); lowers the token budget for large vocabularies. */
  maxLogitsBytes?: number;
  /** Which side padding goes (default 'right'). Models without position_ids allow only 'right'. */
  padding?: 'right' | 'left';
  /** Items longer than the model's maximum: 'error' (default) or drop the context's first tokens ('left'). */
  truncate?: 'error' | 'left';
  /** Replace the log-prob gathering kernel (default: `gatherLogProbs` of the current backend). */
  gather?: GatherFn;
  /**
   * Score an item whose context is a prefix of another item's context from that item's cache
   * (a slice of its keys/values plus a pass over the target only) instead of running its
   * context again. Default true; needs a model that takes position_ids. Costs memory: a
   * micro-batch holding hosts also fetches its `present.*` cache (its padded tokens × layers ×
   * 2 × kv heads × head_dim floats), and each tail pass copies the slices it uses.
   */
  sharePrefixes?: boolean;
  /**
   * With prefix sharing, an item that is not a prefix of another context still joins the host
   * with which it shares the longest prefix when that prefix has at least this many tokens
   * (MemPO memory contexts share the prompt with the full contexts). Default 16; Infinity
   * turns this off.
   */
  minSharedPrefix?: number;
}

export interface ScoreStats {
  items: number;
  microBatches: number;
  /** Real tokens of the items run in full passes (hosts and items without a host). */
  tokens: number;
  /** Tokens of all passes including padding (full and tail passes). */
  paddedTokens: number;
  targetTokens: number;
  /** Items scored from another item's cache (prefix sharing). */
  sharedItems: number;
  /** Tokens run in the tail passes of shared items. */
  tailTokens: number;
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
  const sharePrefixes = options.sharePrefixes ?? true;
  if (typeof sharePrefixes !== 'boolean') throw invalidArgument('a boolean', 'options.sharePrefixes', sharePrefixes);
  const minShared = options.minSharedPrefix ?? 16;
  if (typeof minShared !== 'number' || !(minShared >= 1)) throw invalidArgument('a number >= 1', 'options.minSharedPrefix', minShared);

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
  const chains = sharePrefixes && model.io.hasPositionIds ? findSharing(prepared, minShared) : new Map<number, PrefixMember[]>();
  const isMember = new Uint8Array(prepared.length);
  for (const members of chains.values()) for (const m of members) isMember[m.pos] = 1;
  const order = prepared.filter((_, pos) => !isMember[pos]).sort((a, b) => b.length - a.length || a.index - b.index);
  const budget = Math.max(1, Math.min(maxBatchTokens, Math.floor(maxLogitsBytes / (V * 4))));
  const stats: ScoreStats = { items: items.length, microBatches: 0, tokens: 0, paddedTokens: 0, targetTokens: 0, sharedItems: 0, tailTokens: 0 };
  for (const it of prepared) stats.targetTokens += it.target.length;
  let i = 0;
  while (i < order.length) {
    const L = order[i]!.length;
    let j = i + 1;
    while (j < order.length && (j - i + 1) * L <= budget) j++;
    const batch = order.slice(i, j);
    const members: TailRow[] = [];
    batch.forEach((host, row) => {
      for (const m of chains.get(host.index) ?? []) {
        const item = prepared[m.pos]!;
        members.push({ item, hostRow: row, past: Math.min(m.shared, item.context.length - 1) });
      }
    });
    const run = await runMicroBatch(model, batch, L, padding, gather, results, members.length > 0);
    stats.microBatches++;
    stats.paddedTokens += (j - i) * L;
    for (const it of batch) stats.tokens += it.length;
    if (run.present !== undefined) {
      const tail = await runTails(model, run.present, run.offsets, members, budget, gather, results);
      stats.microBatches += tail.passes;
      stats.tailTokens += tail.tokens;
      stats.paddedTokens += tail.padded;
      stats.sharedItems += members.length;
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
  fetchPresent: boolean,
): Promise<{ present: KVCache | undefined; offsets: Int32Array }> {
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

interface TailRow {
  item: Prepared;
  hostRow: number;
  /** Cached positions taken from the host (at most context - 1). */
  past: number;
}

/**
 * Scores members from their hosts' cache: row m gets the first p cached positions of its host
 * row (right-aligned in a [rows, heads, pMax, headDim] past, masked on the left) and runs the
 * rest of its sequence, context[p ..] + target[0 .. t-2], at positions p, p+1, ...; the logits
 * rows from its last context token on are its target log-probs. Tail passes are packed longest
 * past first under the same token budget as the full passes.
 */
async function runTails(
  model: CausalLM,
  present: KVCache,
  hostOffsets: Int32Array,
  members: TailRow[],
  budget: number,
  gather: GatherFn,
  results: Float32Array[],
): Promise<{ passes: number; tokens: number; padded: number }> {
  const V = model.config.vocabSize;
  const H = present.heads;
  const D = present.headDim;
  const Lh = present.length;
  const padId = BigInt(model.padTokenId);
  const ort = getOrt();
  const tailLen = (r: TailRow) => r.item.length - 1 - r.past;
  const sorted = members.slice().sort((a, b) => b.past - a.past || a.item.index - b.item.index);
  let passes = 0;
  let tokens = 0;
  let padded = 0;
  let i = 0;
  while (i < sorted.length) {
    const pMax = sorted[i]!.past;
    let T = tailLen(sorted[i]!);
    let j = i + 1;
    while (j < sorted.length) {
      const t2 = Math.max(T, tailLen(sorted[j]!));
      if ((j - i + 1) * (pMax + t2) > budget) break;
      T = t2;
      j++;
    }
    const rows = sorted.slice(i, j);
    const bm = rows.length;
    const copyLayer = (src: Float32Array): OrtTensor => {
      const dst = new Float32Array(bm * H * pMax * D);
      rows.forEach(({ hostRow, past: p }, m) => {
        const off = hostOffsets[hostRow]!;
        for (let h = 0; h < H; h++) {
          const from = ((hostRow * H + h) * Lh + off) * D;
          dst.set(src.subarray(from, from + p * D), ((m * H + h) * pMax + (pMax - p)) * D);
        }
      });
      return new ort.Tensor('float32', dst, [bm, H, pMax, D]);
    };
    const keys = present.keys.map((t) => copyLayer(t.data as Float32Array));
    const values = present.values.map((t) => copyLayer(t.data as Float32Array));
    const past = new KVCache(keys, values, bm, pMax, H, D);
    const inputIds = new BigInt64Array(bm * T).fill(padId);
    const positionIds = new BigInt64Array(bm * T);
    const mask = new BigInt64Array(bm * (pMax + T));
    rows.forEach((row, m) => {
      const { item, past: p } = row;
      const n = tailLen(row);
      const c = item.context.length;
      for (let k = 0; k < n; k++) {
        const at = p + k;
        inputIds[m * T + k] = BigInt(at < c ? item.context[at]! : item.target[at - c]!);
      }
      for (let k = 0; k < T; k++) positionIds[m * T + k] = BigInt(p + k);
      mask.fill(1n, m * (pMax + T) + pMax - p, m * (pMax + T) + pMax + n);
      tokens += n;
    });
    const out = await model.forward({ inputIds, batch: bm, seqLen: T, attentionMask: mask, positionIds, past, fetchPresent: false });
    rows.forEach(({ item, past: p }, m) => {
      const t = item.target.length;
      const first = m * T + (item.context.length - 1 - p);
      results[item.index] = gather(out.logits.subarray(first * V, (first + t) * V), item.target, t, V);
    });
    passes++;
    padded += bm * T;
    i = j;
  }
  return { passes, tokens, padded };
}
