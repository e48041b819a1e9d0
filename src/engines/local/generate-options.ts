/**
 * Request checks of `generate`: the options resolved to their defaults, and each prompt turned
 * into a sequence (ids checked, truncated if asked, its own token budget and sampling stream).
 */
import { DEFAULTS } from '../../options';
import { MempoError } from '../../errors';
import { invalidArgument } from './errors';
import { createRng, type Rng } from '../../rng';
import type { SamplingParams } from './sampler';
import { StopMatcher } from './stop';
import type { ForwardModel, GenerateOptions, PromptInput } from './types';
import { checkTokenIds } from './validate';

/** The options of one call with every default applied. */
export interface ResolvedGenerate {
  maxNewTokens: number;
  params: SamplingParams;
  maxBatch: number;
  maxLogitsBytes: number;
  seed: number;
  truncate: 'error' | 'left';
  matcher: StopMatcher;
  decode: boolean;
  processor: GenerateOptions['logitsProcessor'];
  onResult: GenerateOptions['onResult'];
  signal: AbortSignal | undefined;
  /** The prefill fetches only each row's last position (selected logits in the graph and the option on). */
  select: boolean;
}

/** One prompt's sequence while it is generated. */
export interface Seq {
  index: number;
  prompt: ArrayLike<number>;
  maxNew: number;
  rng: Rng;
  out: number[];
  lps: number[];
  /** Left padding of its row in the current wave. */
  pad: number;
}

const DEFAULT_MAX_LOGITS_BYTES = 256 * 1024 * 1024;

function optNumber(v: unknown, name: string, def: number, ok: (x: number) => boolean, what: string): number {
  if (v === undefined) return def;
  if (typeof v !== 'number' || !ok(v)) throw invalidArgument(what, name, v);
  return v;
}

const nonNegInt = (x: number) => Number.isInteger(x) && x >= 0;

function samplingParams(options: GenerateOptions): SamplingParams {
  const params: SamplingParams = {
    temperature: optNumber(options.temperature, 'options.temperature', 1, (x) => Number.isFinite(x) && x >= 0, 'a finite number >= 0'),
    topP: optNumber(options.topP, 'options.topP', 1, (x) => x > 0 && x <= 1, 'a number in (0, 1]'),
    topK: optNumber(options.topK, 'options.topK', 0, nonNegInt, 'a non-negative integer'),
    logprobs: options.logprobs ?? 'temperature',
  };
  if (!['temperature', 'raw', 'sampling'].includes(params.logprobs)) {
    throw invalidArgument("'temperature', 'raw' or 'sampling'", 'options.logprobs', options.logprobs);
  }
  return params;
}

function stopMatcher(model: ForwardModel, options: GenerateOptions): StopMatcher {
  const V = model.config.vocabSize;
  const stops = options.stop ?? [];
  if (!Array.isArray(stops) || stops.some((s) => typeof s !== 'string' || s.length === 0)) {
    throw invalidArgument('an array of non-empty strings', 'options.stop', stops);
  }
  if (stops.length > 0 && model.tokenizer === undefined) {
    throw new MempoError('ERR_INVALID_ARGUMENT', 'Stop strings need a tokenizer but the model was loaded without one');
  }
  const stopIds = options.stopTokenIds === undefined ? [] : Array.from(checkTokenIds(options.stopTokenIds, V, 'options.stopTokenIds'));
  const eosIds = options.eosTokenIds === undefined ? model.eosTokenIds : Array.from(checkTokenIds(options.eosTokenIds, V, 'options.eosTokenIds'));
  return new StopMatcher(model.tokenizer, stops, eosIds, stopIds);
}

function optSignal(s: AbortSignal | undefined): AbortSignal | undefined {
  if (s !== undefined && (s === null || typeof s !== 'object' || typeof s.throwIfAborted !== 'function')) throw invalidArgument('an AbortSignal', 'options.signal', s);
  return s;
}

function optFunction<F>(f: F, name: string): F {
  if (f !== undefined && typeof f !== 'function') throw invalidArgument('a function', name, f);
  return f;
}

/** Checks the options in a fixed order (the first bad one is reported) and applies defaults. */
export function resolveGenerateOptions(model: ForwardModel, options: GenerateOptions): ResolvedGenerate {
  if (options === null || typeof options !== 'object') throw invalidArgument('an options object', 'options', options);
  if (typeof options.maxNewTokens !== 'number' || !nonNegInt(options.maxNewTokens)) {
    throw invalidArgument('a non-negative integer', 'options.maxNewTokens', options.maxNewTokens);
  }
  const params = samplingParams(options);
  const maxBatch = optNumber(options.maxBatchSize, 'options.maxBatchSize', DEFAULTS.maxGenerateBatch, (x) => Number.isInteger(x) && x >= 1, 'a positive integer');
  const maxLogitsBytes = optNumber(options.maxLogitsBytes, 'options.maxLogitsBytes', DEFAULT_MAX_LOGITS_BYTES, (x) => x > 0, 'a positive number');
  const seed = optNumber(options.seed, 'options.seed', Math.floor(Math.random() * 2 ** 32), Number.isFinite, 'a finite number');
  const truncate = options.truncate ?? 'error';
  if (truncate !== 'error' && truncate !== 'left') throw invalidArgument("'error' or 'left'", 'options.truncate', truncate);
  const matcher = stopMatcher(model, options);
  const select = options.selectLogits ?? true;
  if (typeof select !== 'boolean') throw invalidArgument('a boolean', 'options.selectLogits', select);
  return {
    maxNewTokens: options.maxNewTokens,
    params,
    maxBatch,
    maxLogitsBytes,
    seed,
    truncate,
    matcher,
    decode: (options.decode ?? true) && model.tokenizer !== undefined,
    processor: optFunction(options.logitsProcessor, 'options.logitsProcessor'),
    onResult: optFunction(options.onResult, 'options.onResult'),
    signal: optSignal(options.signal),
    select: select && model.io.selectLogits,
  };
}

/** Checks prompt `index` and makes its sequence (sampling stream `index` of the seed, or stream 0 of its own seed). */
export function preparePrompt(model: ForwardModel, p: PromptInput, index: number, opts: ResolvedGenerate): Seq {
  const V = model.config.vocabSize;
  const maxPos = model.config.maxPositions;
  const isObj = p !== null && typeof p === 'object' && !Array.isArray(p) && !ArrayBuffer.isView(p) && 'ids' in p;
  const rawIds = isObj ? (p as { ids: ArrayLike<number> }).ids : (p as ArrayLike<number>);
  let ids = checkTokenIds(rawIds, V, `prompts[${index}]`);
  if (ids.length === 0) throw new MempoError('ERR_EMPTY_CONTEXT', `prompts[${index}] is empty; a prompt needs at least one token`);
  if (ids.length >= maxPos) {
    if (opts.truncate === 'error') {
      throw new MempoError(
        'ERR_CONTEXT_TOO_LONG',
        `prompts[${index}] has ${ids.length} tokens but the model's maximum length is ${maxPos} (room for at least one new token is needed; pass truncate: 'left' to keep the last tokens)`,
      );
    }
    ids = Array.prototype.slice.call(ids, ids.length - (maxPos - 1)) as number[];
  }
  const own = isObj ? (p as { maxNewTokens?: number }).maxNewTokens : undefined;
  const maxNew = own === undefined ? opts.maxNewTokens : optNumber(own, `prompts[${index}].maxNewTokens`, 0, nonNegInt, 'a non-negative integer');
  const ownSeed = isObj ? (p as { seed?: number }).seed : undefined;
  // A prompt's own seed: its stream does not depend on its place in the call.
  const rng = ownSeed === undefined ? createRng(opts.seed, index) : createRng(optNumber(ownSeed, `prompts[${index}].seed`, 0, Number.isFinite, 'a finite number'), 0);
  return { index, prompt: ids, maxNew, rng, out: [], lps: [], pad: 0 };
}
