/**
 * Tail passes of prefix sharing (see prefix.ts): a member is scored from a slice of its host's
 * cache plus a pass over the rest of its context and its target, never over the shared prefix.
 */
import { KVCache } from './kv-cache';
import { getOrt, type OrtTensor } from './ort';
import { gatherRows, targetRows } from './score-batch';
import type { PassLimits, Prepared, ResolvedScore } from './score-options';
import type { ForwardModel } from './types';

export interface TailRow {
  item: Prepared;
  hostRow: number;
  /** Cached positions taken from the host (at most context - 1). */
  past: number;
}

export interface TailStats {
  passes: number;
  tokens: number;
  padded: number;
}

const tailLen = (r: TailRow) => r.item.length - 1 - r.past;

/** The past of a tail pass: row m holds its host row's first p positions, right-aligned in pMax. */
function slicePast(present: KVCache, hostOffsets: Int32Array, rows: readonly TailRow[], pMax: number): KVCache {
  const ort = getOrt();
  const H = present.heads;
  const D = present.headDim;
  const Lh = present.length;
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
  return new KVCache(keys, values, bm, pMax, H, D);
}

/** Runs one tail pass of `rows` (tails padded to T) and writes their target log-probs. */
async function tailPass(
  model: ForwardModel,
  past: KVCache,
  rows: readonly TailRow[],
  T: number,
  opts: Pick<ResolvedScore, 'gather' | 'select'>,
  results: Float32Array[],
): Promise<number> {
  const V = model.config.vocabSize;
  const bm = rows.length;
  const pMax = past.length;
  const inputIds = new BigInt64Array(bm * T).fill(BigInt(model.padTokenId));
  const positionIds = new BigInt64Array(bm * T);
  const mask = new BigInt64Array(bm * (pMax + T));
  let tokens = 0;
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
  const items = rows.map((r) => r.item);
  const first = rows.map(({ item, past: p }, m) => m * T + (item.context.length - 1 - p));
  const logitsAt = opts.select ? targetRows(first, items.map((it) => it.target.length)) : undefined;
  const out = await model.forward({ inputIds, batch: bm, seqLen: T, attentionMask: mask, positionIds, past, fetchPresent: false, logitsAt });
  gatherRows(out.logits, items, first, opts, V, results);
  return tokens;
}

/**
 * Scores members from their hosts' cache: row m gets the first p cached positions of its host
 * row (right-aligned in a [rows, heads, pMax, headDim] past, masked on the left) and runs the
 * rest of its sequence, context[p ..] + target[0 .. t-2], at positions p, p+1, ...; the logits
 * rows from its last context token on are its target log-probs. Tail passes are packed longest
 * past first under the same limits as the full passes (tokens, and targets with selected logits).
 */
export async function runTails(
  model: ForwardModel,
  present: KVCache,
  hostOffsets: Int32Array,
  members: readonly TailRow[],
  limits: PassLimits,
  opts: Pick<ResolvedScore, 'gather' | 'select'>,
  results: Float32Array[],
): Promise<TailStats> {
  const sorted = members.slice().sort((a, b) => b.past - a.past || a.item.index - b.item.index);
  const stats: TailStats = { passes: 0, tokens: 0, padded: 0 };
  let i = 0;
  while (i < sorted.length) {
    const pMax = sorted[i]!.past;
    let T = tailLen(sorted[i]!);
    let targets = sorted[i]!.item.target.length;
    let j = i + 1;
    while (j < sorted.length) {
      const t2 = Math.max(T, tailLen(sorted[j]!));
      const n = sorted[j]!.item.target.length;
      if ((j - i + 1) * (pMax + t2) > limits.tokens || targets + n > limits.targets) break;
      T = t2;
      targets += n;
      j++;
    }
    const rows = sorted.slice(i, j);
    stats.tokens += await tailPass(model, slicePast(present, hostOffsets, rows, pMax), rows, T, opts, results);
    stats.passes++;
    stats.padded += rows.length * T;
    i = j;
  }
  return stats;
}
