/**
 * One wave of `generate`: the prompts are left-padded to a common length and prefilled together
 * (in column chunks that bound the logits tensor of full logits, also with selected logits,
 * which fetch only each row's last position from the last chunk and nothing from the others, so
 * no pass is larger than before; identical prompts, such as the samples of one group, only once,
 * their cache rows copied), then decoded one token per step for every live
 * sequence. Sampling and stop checks read only the last position's logits row of each sequence,
 * as a view. A sequence that finishes leaves the batch at once: the cache is compacted (one copy,
 * only on steps where a sequence finished), and columns that became padding for every remaining
 * row are dropped at the same time.
 */
import type { KVCache } from './kv-cache';
import { sampleRow, type SamplerScratch, type SamplingParams } from './sampler';
import type { StopMatcher } from './stop';
import type { Seq } from './generate-options';
import type { FinishReason, ForwardModel, GenerateOptions, GenerationStats } from './types';

/** What every wave of one `generate` call shares. */
export interface WaveContext {
  model: ForwardModel;
  params: SamplingParams;
  matcher: StopMatcher;
  scratch: SamplerScratch;
  maxLogitsBytes: number;
  /** Prefill with selected logits: only the last position of each row. */
  select: boolean;
  /** This call's statistics (never shared between calls). */
  stats: GenerationStats;
  finish: (s: Seq, reason: FinishReason, stop?: string) => void;
  processor: GenerateOptions['logitsProcessor'];
  /** A caller that went away (e.g. `mempo serve`'s client): checked before every forward pass. */
  signal: AbortSignal | undefined;
}

/** The cache and logits after the prefill, and which prefilled row each sequence reads. */
interface Prefilled {
  cache: KVCache;
  logits: Float32Array;
  /** Floats between two rows' last-position logits, and where row 0's starts. */
  rowStride: number;
  rowOffset: number;
  /** Unique-prompt row of each sequence of the wave. */
  rowOf: number[];
  unique: number;
}

/** Identical prompts (the samples of a group) are prefilled once: one row per distinct prompt. */
function uniquePrompts(wave: readonly Seq[]): { uniq: Seq[]; rowOf: number[] } {
  const uniq: Seq[] = [];
  const rowOf: number[] = [];
  const seen = new Map<string, number>();
  for (const s of wave) {
    const key = Array.prototype.join.call(s.prompt, ',');
    let u = seen.get(key);
    if (u === undefined) {
      u = uniq.length;
      seen.set(key, u);
      uniq.push(s);
    }
    rowOf.push(u);
  }
  return { uniq, rowOf };
}

/**
 * Prefills the wave in column chunks so that one call's full logits would stay under
 * maxLogitsBytes; with selected logits only the last chunk returns any: `[rows, V]`.
 */
async function prefill(ctx: WaveContext, wave: readonly Seq[]): Promise<Prefilled> {
  const { model, stats } = ctx;
  const V = model.config.vocabSize;
  const padId = BigInt(model.padTokenId);
  const P = wave.reduce((m, s) => Math.max(m, s.prompt.length), 0);
  for (const s of wave) s.pad = P - s.prompt.length;
  const { uniq, rowOf } = uniquePrompts(wave);
  const bu = uniq.length;
  const chunk = Math.max(1, Math.min(P, Math.floor(ctx.maxLogitsBytes / (bu * V * 4))));
  let cache: KVCache = model.emptyCache(bu);
  let logits: Float32Array = new Float32Array(0);
  let lastCols = 0;
  for (let c0 = 0; c0 < P; c0 += chunk) {
    ctx.signal?.throwIfAborted();
    const c1 = Math.min(P, c0 + chunk);
    const n = c1 - c0;
    const inputIds = new BigInt64Array(bu * n);
    const positionIds = new BigInt64Array(bu * n);
    const mask = new BigInt64Array(bu * c1);
    for (let r = 0; r < bu; r++) {
      const s = uniq[r]!;
      for (let c = c0; c < c1; c++) {
        const k = c - s.pad;
        inputIds[r * n + (c - c0)] = k >= 0 ? BigInt(s.prompt[k]!) : padId;
        positionIds[r * n + (c - c0)] = k >= 0 ? BigInt(k) : 1n;
      }
      mask.fill(1n, r * c1 + Math.min(s.pad, c1), (r + 1) * c1);
    }
    const logitsAt = !ctx.select ? undefined : c1 < P ? [] : Int32Array.from({ length: bu }, (_, r) => r * n + n - 1);
    const out = await model.forward({ inputIds, batch: bu, seqLen: n, attentionMask: mask, positionIds, past: cache, logitsAt });
    cache = out.present!;
    logits = out.logits;
    lastCols = n;
  }
  if (bu < wave.length) cache = cache.compact(rowOf, 0);
  stats.prefillTokens += uniq.reduce((acc, s) => acc + s.prompt.length, 0);
  stats.paddedPrefillTokens += bu * P;
  const rowStride = ctx.select ? V : lastCols * V;
  return { cache, logits, rowStride, rowOffset: rowStride - V, rowOf, unique: bu };
}

/** Where each live sequence's last-position logits row is in the current logits tensor. */
interface RowView {
  logits: Float32Array;
  rowStride: number;
  rowOffset: number;
  /** Logits row of each live sequence: after the prefill, its unique prompt's row. */
  rowOf: readonly number[];
  /** Set while rows are shared (identical prompts, before the first decode step) and a processor may modify them. */
  ownRow: Float32Array | undefined;
}

/** Samples one token per live sequence and finishes those that stop; returns the rows that go on. */
function sampleStep(ctx: WaveContext, live: readonly Seq[], view: RowView): number[] {
  const V = ctx.model.config.vocabSize;
  const maxPos = ctx.model.config.maxPositions;
  const { processor, params, scratch, matcher, finish } = ctx;
  const keep: number[] = [];
  for (let r = 0; r < live.length; r++) {
    const s = live[r]!;
    const at = view.rowOf[r]! * view.rowStride + view.rowOffset;
    let row = view.logits.subarray(at, at + V);
    if (processor !== undefined) {
      // A row shared by identical prompts is copied before a processor may modify it.
      if (view.ownRow !== undefined) row = (view.ownRow.set(row), view.ownRow);
      processor(row, s.index, s.out);
    }
    const { token, logprob } = sampleRow(row, params, s.rng, scratch);
    s.out.push(token);
    s.lps.push(logprob);
    const hit = matcher.check(s.out);
    if (hit !== null) finish(s, hit.kind, hit.stop);
    else if (s.out.length >= s.maxNew) finish(s, 'length');
    else if (s.prompt.length + s.out.length >= maxPos) finish(s, 'context');
    else keep.push(r);
  }
  return keep;
}

/** Feeds each live sequence's last token at its own position, on top of the cache. */
async function decodeStep(model: ForwardModel, live: readonly Seq[], cache: KVCache) {
  const b = live.length;
  const past = cache.length;
  const inputIds = new BigInt64Array(b);
  const positionIds = new BigInt64Array(b);
  const mask = new BigInt64Array(b * (past + 1));
  for (let r = 0; r < b; r++) {
    const s = live[r]!;
    inputIds[r] = BigInt(s.out[s.out.length - 1]!);
    positionIds[r] = BigInt(past - s.pad);
    mask.fill(1n, r * (past + 1) + s.pad, (r + 1) * (past + 1));
  }
  return model.forward({ inputIds, batch: b, seqLen: 1, attentionMask: mask, positionIds, past: cache });
}

/** Generates every sequence of the wave to its end (each is passed to `ctx.finish`). */
export async function runWave(ctx: WaveContext, wave: Seq[]): Promise<void> {
  const V = ctx.model.config.vocabSize;
  const pre = await prefill(ctx, wave);
  let cache = pre.cache;
  let live = wave;
  const view: RowView = {
    logits: pre.logits,
    rowStride: pre.rowStride,
    rowOffset: pre.rowOffset,
    rowOf: pre.rowOf,
    ownRow: ctx.processor !== undefined && pre.unique < wave.length ? new Float32Array(V) : undefined,
  };
  for (;;) {
    const keep = sampleStep(ctx, live, view);
    if (keep.length === 0) return;
    if (keep.length < live.length) {
      const next = keep.map((r) => live[r]!);
      const trim = next.reduce((m, s) => Math.min(m, s.pad), Infinity);
      cache = cache.compact(keep, trim);
      for (const s of next) s.pad -= trim;
      live = next;
      ctx.stats.compactions++;
    }
    ctx.signal?.throwIfAborted();
    const out = await decodeStep(ctx.model, live, cache);
    cache = out.present!;
    view.logits = out.logits;
    view.rowStride = V;
    view.rowOffset = 0;
    view.rowOf = identity(live.length);
    view.ownRow = undefined;
    ctx.stats.decodeSteps++;
  }
}

const identities: number[][] = [];
function identity(n: number): readonly number[] {
  let a = identities[n];
  if (a === undefined) {
    a = Array.from({ length: n }, (_, i) => i);
    identities[n] = a;
  }
  return a;
}
