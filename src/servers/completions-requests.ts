/**
 * Request parsing of `mempo serve`: the vLLM `/v1/completions` and SGLang `/generate` request
 * shapes (see src/servers/completions-server.ts), checked against the model's limits; every
 * message names the field at fault, and the error carries it as OpenAI's `param`.
 */
import { parseJsonObject, RequestError } from './http';

/** Defaults of the upstream servers when a request leaves them out: vLLM's max_tokens 16, SGLang's max_new_tokens 128. */
const VLLM_DEFAULT_MAX_TOKENS = 16;
const SGLANG_DEFAULT_MAX_NEW_TOKENS = 128;
/** Most log-probs per position a request may ask for (vLLM `logprobs`, `prompt_logprobs`). */
export const MAX_LOGPROBS = 20;

/** What both dialects ask of sampling: prompts (token ids), n samples each, and how to sample them. */
export interface SamplingRequest {
  /** One or more prompts (token ids). */
  prompts: number[][];
  /** Whether `prompt` was a list of prompts. */
  batch: boolean;
  n: number;
  temperature: number;
  topP: number;
  /** vLLM's top_k extension / SGLang's top_k; -1 or 0 is off. */
  topK: number;
  maxTokens: number;
  stop: string[];
  seed: number | null;
}

/** `stream` and `stream_options` (OpenAI's): server-sent events, and a last chunk with the usage. */
export interface StreamRequest {
  stream: boolean;
  includeUsage: boolean;
}

export interface CompletionRequest extends SamplingRequest, StreamRequest {
  model: string | null;
  logprobs: number | null;
  tokensAsIds: boolean;
  returnTokenIds: boolean;
  promptLogprobs: number | null;
  echo: boolean;
}

export interface GenerateRequest extends SamplingRequest {
  stopTokenIds: number[];
  skipSpecialTokens: boolean;
  noStopTrim: boolean;
  returnLogprob: boolean;
  /** Per prompt; -1 = only the last prompt token. */
  logprobStart: number[];
  textInLogprobs: boolean;
}

/** What the served model allows: vocabulary, sequences per request, new tokens, positions. */
export interface Limits {
  vocabSize: number;
  maxN: number;
  maxTokens: number;
  maxPositions: number;
  /** Token ids of a text prompt (with the tokenizer's special tokens, as vLLM's completions add them). */
  encode?: (text: string) => number[];
}

/** A refused request whose fault is one field: `param` is that field's path (OpenAI's error `param`). */
export class FieldError extends RequestError {
  constructor(status: number, readonly param: string, message: string) {
    super(status, message);
  }
}

/** A 400 naming the field at fault. */
export const bad = (field: string, msg: string) => new FieldError(400, field, `field "${field}": ${msg}`);

export function optInt(b: Record<string, unknown>, field: string, def: number | null, min: number, max: number, name = field): number | null {
  const v = b[field];
  if (v === undefined || v === null) return def;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) throw bad(name, `expected an integer in [${min}, ${max}], received ${JSON.stringify(v)}`);
  return v;
}

export function optNum(b: Record<string, unknown>, field: string, def: number, min: number, max: number, openMin = false, name = field): number {
  const v = b[field];
  if (v === undefined || v === null) return def;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || (openMin && v === min) || v > max) {
    throw bad(name, `expected a number in ${openMin ? '(' : '['}${min}, ${max}], received ${JSON.stringify(v)}`);
  }
  return v;
}

export function optBool(b: Record<string, unknown>, field: string, def = false, name = field): boolean {
  const v = b[field];
  if (v === undefined || v === null) return def;
  if (typeof v !== 'boolean') throw bad(name, 'expected a boolean');
  return v;
}

export function stopStrings(v: unknown, name: string): string[] {
  const stops = v === undefined || v === null ? [] : typeof v === 'string' ? [v] : v;
  if (!Array.isArray(stops) || stops.some((s) => typeof s !== 'string' || s.length === 0)) throw bad(name, 'expected a non-empty string or an array of them');
  return stops as string[];
}

/** Checks a prompt's ids against the vocabulary and the model's length. */
export function checkPromptIds(p: unknown, at: string, o: Limits): number[] {
  if (!Array.isArray(p) || p.length === 0) throw bad(at, 'expected a non-empty array of token ids');
  p.forEach((id, i) => {
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id >= o.vocabSize) throw bad(`${at}[${i}]`, `expected a token id in [0, ${o.vocabSize}), received ${JSON.stringify(id)}`);
  });
  if (p.length >= o.maxPositions) throw bad(at, `${p.length} tokens; the model attends to at most ${o.maxPositions}`);
  return p as number[];
}

/**
 * A prompt or a list of them: token ids, or (with `allowText`, vLLM's and OpenAI's
 * /v1/completions) text, tokenized here. Checks ids and length.
 */
function parsePrompts(v: unknown, name: string, o: Limits, allowText = false): { prompts: number[][]; batch: boolean } {
  const text = (s: unknown, at: string): number[] => {
    if (typeof s !== 'string' || s.length === 0) throw bad(at, 'expected a non-empty string');
    if (o.encode === undefined) throw bad(at, 'this model was loaded without a tokenizer: send token ids');
    return checkPromptIds(o.encode(s), at, o);
  };
  if (allowText && typeof v === 'string') return { prompts: [text(v, name)], batch: false };
  const what = allowText ? 'a string, an array of strings, an array of token ids or an array of such arrays' : 'a non-empty array of token ids, or an array of such arrays';
  if (!Array.isArray(v) || v.length === 0) throw bad(name, `expected ${what}`);
  if (allowText && typeof v[0] === 'string') return { prompts: v.map((s, k) => text(s, `${name}[${k}]`)), batch: true };
  const batch = Array.isArray(v[0]);
  const prompts = (batch ? v : [v]) as unknown[];
  return { prompts: prompts.map((p, k) => checkPromptIds(p, batch ? `${name}[${k}]` : name, o)), batch };
}

/** `stream` and `stream_options: { include_usage }` (usage only with a stream, as OpenAI refuses it otherwise). */
export function parseStream(b: Record<string, unknown>): StreamRequest {
  const stream = optBool(b, 'stream');
  const so = b['stream_options'];
  if (so === undefined || so === null) return { stream, includeUsage: false };
  if (typeof so !== 'object' || Array.isArray(so)) throw bad('stream_options', 'expected an object { include_usage?: boolean }');
  if (!stream) throw bad('stream_options', 'only allowed with "stream": true');
  const o = so as Record<string, unknown>;
  for (const k of Object.keys(o)) if (k !== 'include_usage' && k !== 'continuous_usage_stats') throw bad(`stream_options.${k}`, 'not supported by mempo serve');
  if (o['continuous_usage_stats'] === true) throw bad('stream_options.continuous_usage_stats', 'not supported by mempo serve');
  return { stream, includeUsage: optBool(o, 'include_usage', false, 'stream_options.include_usage') };
}

/** Sampling knobs mempo serve does not implement: accepted only at their neutral value. */
const NEUTRAL: Record<string, number> = { repetition_penalty: 1, frequency_penalty: 0, presence_penalty: 0, min_p: 0 };
export function unsupportedUnlessNeutral(b: Record<string, unknown>, prefix: string): void {
  for (const [k, v] of Object.entries(NEUTRAL)) {
    if (b[k] !== undefined && b[k] !== null && b[k] !== v) throw bad(`${prefix}${k}`, `only ${v} is supported by mempo serve, received ${JSON.stringify(b[k])}`);
  }
}

/** Seeds up to 2^53 - 1 (mempo's sampler mixes in the high part). */
export const MAX_SEED = Number.MAX_SAFE_INTEGER;

/** Checks a /v1/completions body; every message names the field at fault. */
export function parseCompletionRequest(text: string, o: Limits): CompletionRequest {
  const b = parseJsonObject(text);
  const model = b['model'];
  if (model !== undefined && model !== null && typeof model !== 'string') throw bad('model', 'expected a string');
  const { prompts, batch } = parsePrompts(b['prompt'], 'prompt', o, true);
  unsupportedUnlessNeutral(b, '');
  const n = optInt(b, 'n', 1, 1, o.maxN) as number;
  if (prompts.length * n > o.maxN) throw bad('n', `${prompts.length} prompts × n ${n} sequences; at most ${o.maxN} per request`);
  return {
    model: (model as string | undefined) ?? null,
    prompts,
    batch,
    n,
    ...parseStream(b),
    temperature: optNum(b, 'temperature', 1, 0, 100),
    topP: optNum(b, 'top_p', 1, 0, 1, true),
    topK: Math.max(0, optInt(b, 'top_k', 0, -1, o.vocabSize) as number),
    maxTokens: optInt(b, 'max_tokens', VLLM_DEFAULT_MAX_TOKENS, 0, o.maxTokens) as number,
    stop: stopStrings(b['stop'], 'stop'),
    logprobs: optInt(b, 'logprobs', null, 0, MAX_LOGPROBS),
    seed: optInt(b, 'seed', null, 0, MAX_SEED),
    tokensAsIds: optBool(b, 'return_tokens_as_token_ids'),
    returnTokenIds: optBool(b, 'return_token_ids'),
    promptLogprobs: optInt(b, 'prompt_logprobs', null, 0, MAX_LOGPROBS),
    echo: optBool(b, 'echo'),
  };
}

const SAMPLING_KEYS = new Set([
  'max_new_tokens', 'temperature', 'top_p', 'top_k', 'stop', 'stop_token_ids', 'n', 'sampling_seed', 'skip_special_tokens', 'no_stop_trim',
  ...Object.keys(NEUTRAL),
]);
const GENERATE_KEYS = new Set([
  'input_ids', 'text', 'sampling_params', 'return_logprob', 'logprob_start_len', 'top_logprobs_num', 'return_text_in_logprobs', 'stream', 'rid', 'model',
]);

/** `logprob_start_len`: one value for every prompt or one per prompt; absent = -1 (only the last prompt token). */
function logprobStarts(ls: unknown, prompts: readonly number[][]): number[] {
  if (ls === undefined || ls === null) return prompts.map(() => -1);
  const list = Array.isArray(ls) ? (ls as unknown[]) : prompts.map(() => ls);
  if (list.length !== prompts.length) throw bad('logprob_start_len', `${list.length} values for ${prompts.length} prompts`);
  return list.map((v, k) => {
    const len = prompts[k]!.length;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < -1 || v >= len) throw bad(Array.isArray(ls) ? `logprob_start_len[${k}]` : 'logprob_start_len', `expected an integer in [-1, ${len - 1}] (prompt of ${len} tokens), received ${JSON.stringify(v)}`);
    return v;
  });
}

/** Checks a SGLang /generate body; every message names the field at fault. */
export function parseGenerateRequest(text: string, o: Limits): GenerateRequest {
  const b = parseJsonObject(text);
  for (const k of Object.keys(b)) if (!GENERATE_KEYS.has(k)) throw bad(k, 'not supported by mempo serve');
  if (b['text'] !== undefined && b['text'] !== null) throw bad('text', 'mempo serve takes token ids only: send "input_ids"');
  if (b['stream'] === true) throw bad('stream', 'streaming is not supported by mempo serve');
  const { prompts, batch } = parsePrompts(b['input_ids'], 'input_ids', o);
  const spv = b['sampling_params'] ?? {};
  if (typeof spv !== 'object' || spv === null || Array.isArray(spv)) throw bad('sampling_params', 'expected one object (per-prompt lists are not supported by mempo serve)');
  const sp = spv as Record<string, unknown>;
  for (const k of Object.keys(sp)) if (!SAMPLING_KEYS.has(k)) throw bad(`sampling_params.${k}`, 'not supported by mempo serve');
  unsupportedUnlessNeutral(sp, 'sampling_params.');
  const n = optInt(sp, 'n', 1, 1, o.maxN, 'sampling_params.n') as number;
  if (prompts.length * n > o.maxN) throw bad('sampling_params.n', `${prompts.length} prompts × n ${n} sequences; at most ${o.maxN} per request`);
  const stopIds = sp['stop_token_ids'] ?? [];
  if (!Array.isArray(stopIds) || stopIds.some((id) => typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id >= o.vocabSize)) {
    throw bad('sampling_params.stop_token_ids', `expected an array of token ids in [0, ${o.vocabSize})`);
  }
  const top = b['top_logprobs_num'];
  if (top !== undefined && top !== null && top !== 0) throw bad('top_logprobs_num', `only 0 is supported by mempo serve (the chosen tokens' log-probs), received ${JSON.stringify(top)}`);
  const logprobStart = logprobStarts(b['logprob_start_len'], prompts);
  return {
    prompts,
    batch,
    n,
    temperature: optNum(sp, 'temperature', 1, 0, 100, false, 'sampling_params.temperature'),
    topP: optNum(sp, 'top_p', 1, 0, 1, true, 'sampling_params.top_p'),
    topK: Math.max(0, optInt(sp, 'top_k', -1, -1, o.vocabSize, 'sampling_params.top_k') as number),
    maxTokens: optInt(sp, 'max_new_tokens', SGLANG_DEFAULT_MAX_NEW_TOKENS, 0, o.maxTokens, 'sampling_params.max_new_tokens') as number,
    stop: stopStrings(sp['stop'], 'sampling_params.stop'),
    stopTokenIds: stopIds as number[],
    seed: optInt(sp, 'sampling_seed', null, 0, MAX_SEED, 'sampling_params.sampling_seed'),
    skipSpecialTokens: optBool(sp, 'skip_special_tokens', true, 'sampling_params.skip_special_tokens'),
    noStopTrim: optBool(sp, 'no_stop_trim', false, 'sampling_params.no_stop_trim'),
    returnLogprob: optBool(b, 'return_logprob'),
    logprobStart,
    textInLogprobs: optBool(b, 'return_text_in_logprobs'),
  };
}

