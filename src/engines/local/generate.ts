/**
 * Batched sampling with a KV cache. All prompts of a wave (up to `maxBatchSize`) are left-padded
 * to a common length and prefilled together (in chunks that bound the logits tensor; identical
 * prompts, such as the samples of one group, only once, their cache rows copied), then decoded
 * one token per step for every live sequence. Sampling and stop checks read only the last
 * position's logits row of each sequence, as a view. A sequence that finishes leaves the batch at
 * once: the cache is compacted (one copy, only on steps where a sequence finished), and columns
 * that became padding for every remaining row are dropped at the same time.
 */
import type { CausalLM } from './causal-lm';
import { MempoRuntimeError, invalidArgument } from './errors';
import type { KVCache } from './kv-cache';
import { createRng, type Rng } from '../../rng';
import { SamplerScratch, sampleRow, type SamplingParams } from './sampler';
import { StopMatcher } from './stop';
import { checkTokenIds } from './validate';

/** A prompt: its token ids, optionally with its own token budget. */
export type PromptInput = ArrayLike<number> | { ids: ArrayLike<number>; maxNewTokens?: number };

export interface GenerateOptions {
  /** Most tokens to generate per sequence (a prompt's own `maxNewTokens` overrides it). */
  maxNewTokens: number;
  /** Default 1; 0 is greedy. */
  temperature?: number;
  /** Default 1 (off). */
  topP?: number;
  /** Default 0 (off). */
  topK?: number;
  /** Seed of the sampling streams; sequence i uses stream i. Default: random. */
  seed?: number;
  /** Stop strings, e.g. `['</search>', '</answer>']`; the stop text stays in the output. */
  stop?: readonly string[];
  /** Extra ids that stop a sequence (kept in the output). */
  stopTokenIds?: readonly number[];
  /** Ids that end a sequence (kept in the output). Default: the model's eos ids. */
  eosTokenIds?: readonly number[];
  /** Log-prob reported per sampled token (see `SamplingParams.logprobs`). Default 'temperature'. */
  logprobs?: SamplingParams['logprobs'];
  /** Most sequences decoded together (default 64); more prompts run in waves of similar length. */
  maxBatchSize?: number;
  /** Bound on the logits tensor of one prefill call, in bytes (default 256 MiB). */
  maxLogitsBytes?: number;
  /** Prompts too long for the model: 'error' (default) or keep the last tokens ('left'). */
  truncate?: 'error' | 'left';
  /** Decode the generated ids to `text` (default true when the model has a tokenizer). */
  decode?: boolean;
  /**
   * Called before each sampling with the sequence's last-position logits row (a view into the
   * model output that may be modified in place, e.g. to ban or force tokens), the prompt index
   * and the number of tokens generated so far.
   */
  logitsProcessor?: (row: Float32Array, promptIndex: number, generated: readonly number[]) => void;
  /**
   * Called as soon as a sequence finishes, between decode steps, with its prompt index and
   * result (the same object the returned array holds), so a caller can start tool calls or
   * scoring while the other sequences keep generating.
   */
  onResult?: (promptIndex: number, result: GenerationResult) => void;
}

export type FinishReason = 'stop' | 'eos' | 'length' | 'context';

export interface GenerationResult {
  /** Generated ids (stop token / eos included). */
  tokenIds: number[];
  /** Log-prob of each generated id (see `GenerateOptions.logprobs`). */
  logprobs: Float32Array;
  /** 'stop': a stop string or stop id; 'eos'; 'length': maxNewTokens; 'context': the model's maximum length. */
  finishReason: FinishReason;
  /** The stop string matched when finishReason is 'stop'. */
  stop?: string;
  /** Decoded `tokenIds` when decoding is on. */
  text?: string;
  /** Prompt tokens the model saw (after truncation). */
  promptLength: number;
}

export interface GenerationStats {
  waves: number;
  prefillTokens: number;
  paddedPrefillTokens: number;
  decodeSteps: number;
  generatedTokens: number;
  compactions: number;
}

interface Seq {
  index: number;
  prompt: ArrayLike<number>;
  maxNew: number;
  rng: Rng;
  out: number[];
  lps: number[];
  pad: number;
}

const DEFAULT_MAX_LOGITS_BYTES = 256 * 1024 * 1024;

function optNumber(v: unknown, name: string, def: number, ok: (x: number) => boolean, what: string): number {
  if (v === undefined) return def;
  if (typeof v !== 'number' || !ok(v)) throw invalidArgument(what, name, v);
  return v;
}

export async function generate(model: CausalLM, prompts: readonly PromptInput[], options: GenerateOptions): Promise<GenerationResult[]> {
  if (!Array.isArray(prompts)) throw invalidArgument('an array of prompts', 'prompts', prompts);
  if (options === null || typeof options !== 'object') throw invalidArgument('an options object', 'options', options);
  const V = model.config.vocabSize;
  const maxPos = model.config.maxPositions;
  const maxNewTokens = optNumber(options.maxNewTokens, 'options.maxNewTokens', NaN, (x) => Number.isInteger(x) && x >= 0, 'a non-negative integer');
  if (Number.isNaN(maxNewTokens)) throw invalidArgument('a non-negative integer', 'options.maxNewTokens', options.maxNewTokens);
  const params: SamplingParams = {
    temperature: optNumber(options.temperature, 'options.temperature', 1, (x) => Number.isFinite(x) && x >= 0, 'a finite number >= 0'),
    topP: optNumber(options.topP, 'options.topP', 1, (x) => x > 0 && x <= 1, 'a number in (0, 1]'),
    topK: optNumber(options.topK, 'options.topK', 0, (x) => Number.isInteger(x) && x >= 0, 'a non-negative integer'),
    logprobs: options.logprobs ?? 'temperature',
  };
  if (!['temperature', 'raw', 'sampling'].includes(params.logprobs)) {
    throw invalidArgument("'temperature', 'raw' or 'sampling'", 'options.logprobs', options.logprobs);
  }
  const maxBatch = optNumber(options.maxBatchSize, 'options.maxBatchSize', 64, (x) => Number.isInteger(x) && x >= 1, 'a positive integer');
  const maxLogitsBytes = optNumber(options.maxLogitsBytes, 'options.maxLogitsBytes', DEFAULT_MAX_LOGITS_BYTES, (x) => x > 0, 'a positive number');
  const seed = optNumber(options.seed, 'options.seed', Math.floor(Math.random() * 2 ** 32), Number.isFinite, 'a finite number');
  const truncate = options.truncate ?? 'error';
  if (truncate !== 'error' && truncate !== 'left') throw invalidArgument("'error' or 'left'", 'options.truncate', truncate);
  const stops = options.stop ?? [];
  if (!Array.isArray(stops) || stops.some((s) => typeof s !== 'string' || s.length === 0)) {
    throw invalidArgument('an array of non-empty strings', 'options.stop', stops);
  }
  if (stops.length > 0 && model.tokenizer === undefined) {
    throw new MempoRuntimeError('ERR_INVALID_ARGUMENT', 'Stop strings need a tokenizer but the model was loaded without one');
  }
  const stopIds = options.stopTokenIds === undefined ? [] : Array.from(checkTokenIds(options.stopTokenIds, V, 'options.stopTokenIds'));
  const eosIds = options.eosTokenIds === undefined ? model.eosTokenIds : Array.from(checkTokenIds(options.eosTokenIds, V, 'options.eosTokenIds'));
  const matcher = new StopMatcher(model.tokenizer, stops, eosIds, stopIds);
  const decode = (options.decode ?? true) && model.tokenizer !== undefined;
  const processor = options.logitsProcessor;
  if (processor !== undefined && typeof processor !== 'function') throw invalidArgument('a function', 'options.logitsProcessor', processor);
  const onResult = options.onResult;
  if (onResult !== undefined && typeof onResult !== 'function') throw invalidArgument('a function', 'options.onResult', onResult);

  const seqs: Seq[] = prompts.map((p, index) => {
    const isObj = p !== null && typeof p === 'object' && !Array.isArray(p) && !ArrayBuffer.isView(p) && 'ids' in p;
    const rawIds = isObj ? (p as { ids: ArrayLike<number> }).ids : (p as ArrayLike<number>);
    let ids = checkTokenIds(rawIds, V, `prompts[${index}]`);
    if (ids.length === 0) throw new MempoRuntimeError('ERR_EMPTY_CONTEXT', `prompts[${index}] is empty; a prompt needs at least one token`);
    if (ids.length >= maxPos) {
      if (truncate === 'error') {
        throw new MempoRuntimeError(
          'ERR_CONTEXT_TOO_LONG',
          `prompts[${index}] has ${ids.length} tokens but the model's maximum length is ${maxPos} (room for at least one new token is needed; pass truncate: 'left' to keep the last tokens)`,
        );
      }
      ids = Array.prototype.slice.call(ids, ids.length - (maxPos - 1)) as number[];
    }
    const own = isObj ? (p as { maxNewTokens?: number }).maxNewTokens : undefined;
    const maxNew = own === undefined ? maxNewTokens : optNumber(own, `prompts[${index}].maxNewTokens`, 0, (x) => Number.isInteger(x) && x >= 0, 'a non-negative integer');
    return { index, prompt: ids, maxNew, rng: createRng(seed, index), out: [], lps: [], pad: 0 };
  });

  const results: GenerationResult[] = new Array(seqs.length);
  const stats: GenerationStats = { waves: 0, prefillTokens: 0, paddedPrefillTokens: 0, decodeSteps: 0, generatedTokens: 0, compactions: 0 };
  const finish = (s: Seq, reason: FinishReason, stop?: string) => {
    const r: GenerationResult = { tokenIds: s.out, logprobs: Float32Array.from(s.lps), finishReason: reason, promptLength: s.prompt.length };
    if (stop !== undefined) r.stop = stop;
    if (decode) r.text = model.tokenizer!.decode(s.out);
    results[s.index] = r;
    stats.generatedTokens += s.out.length;
    if (onResult !== undefined) onResult(s.index, r);
  };

  const pending: Seq[] = [];
  for (const s of seqs) {
    if (s.maxNew === 0) finish(s, 'length');
    else pending.push(s);
  }
  // Longest first; without position_ids a wave holds only equal lengths (no padding needed).
  pending.sort((a, b) => b.prompt.length - a.prompt.length || a.index - b.index);
  const scratch = new SamplerScratch(V);
  let i = 0;
  while (i < pending.length) {
    let j = i + 1;
    const firstLen = pending[i]!.prompt.length;
    while (j < pending.length && j - i < maxBatch && (model.io.hasPositionIds || pending[j]!.prompt.length === firstLen)) j++;
    stats.waves++;
    await runWave(model, pending.slice(i, j), params, matcher, scratch, maxLogitsBytes, stats, finish, processor);
    i = j;
  }
  model.lastGenerationStats = stats;
  return results;
}

async function runWave(
  model: CausalLM,
  wave: Seq[],
  params: SamplingParams,
  matcher: StopMatcher,
  scratch: SamplerScratch,
  maxLogitsBytes: number,
  stats: GenerationStats,
  finish: (s: Seq, reason: FinishReason, stop?: string) => void,
  processor: GenerateOptions['logitsProcessor'],
): Promise<void> {
  const V = model.config.vocabSize;
  const maxPos = model.config.maxPositions;
  const padId = BigInt(model.padTokenId);
  let b = wave.length;
  const P = wave.reduce((m, s) => Math.max(m, s.prompt.length), 0);
  for (const s of wave) s.pad = P - s.prompt.length;

  // Identical prompts (the samples of a group) are prefilled once; their cache rows are
  // duplicated afterwards.
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
  const bu = uniq.length;

  // Prefill in column chunks so that one call's logits stay under maxLogitsBytes.
  const chunk = Math.max(1, Math.min(P, Math.floor(maxLogitsBytes / (bu * V * 4))));
  let cache: KVCache = model.emptyCache(bu);
  let logits: Float32Array = new Float32Array(0);
  let lastCols = 0;
  for (let c0 = 0; c0 < P; c0 += chunk) {
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
    const out = await model.forward({ inputIds, batch: bu, seqLen: n, attentionMask: mask, positionIds, past: cache });
    cache = out.present!;
    logits = out.logits;
    lastCols = n;
  }
  if (bu < b) cache = cache.compact(rowOf, 0);
  stats.prefillTokens += uniq.reduce((acc, s) => acc + s.prompt.length, 0);
  stats.paddedPrefillTokens += bu * P;

  let live = wave;
  let rowStride = lastCols * V;
  let rowOffset = (lastCols - 1) * V;
  // Logits row of each live sequence: after the prefill, its unique prompt's row.
  let logitsRow: readonly number[] = rowOf;
  const ownRow = processor !== undefined && bu < b ? new Float32Array(V) : undefined;
  for (;;) {
    const keep: number[] = [];
    for (let r = 0; r < b; r++) {
      const s = live[r]!;
      const lr = logitsRow[r]!;
      let row = logits.subarray(lr * rowStride + rowOffset, lr * rowStride + rowOffset + V);
      if (processor !== undefined) {
        // A row shared by identical prompts is copied before a processor may modify it.
        if (ownRow !== undefined && logitsRow === rowOf) row = (ownRow.set(row), ownRow);
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
    if (keep.length === 0) return;
    if (keep.length < b) {
      const next = keep.map((r) => live[r]!);
      const trim = next.reduce((m, s) => Math.min(m, s.pad), Infinity);
      cache = cache.compact(keep, trim);
      for (const s of next) s.pad -= trim;
      live = next;
      b = live.length;
      stats.compactions++;
    }
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
    const out = await model.forward({ inputIds, batch: b, seqLen: 1, attentionMask: mask, positionIds, past: cache });
    cache = out.present!;
    logits = out.logits;
    rowStride = V;
    rowOffset = 0;
    logitsRow = identity(b);
    stats.decodeSteps++;
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
