/**
 * `mempo serve`: the subsets of the vLLM completions API and of SGLang's native API that the HTTP
 * backends use, over the embedded runtime (`LocalModel`), on loopback by default.
 *
 *   POST /v1/completions { model, prompt: number[] | number[][], n?, temperature?, top_p?, top_k?,
 *                          max_tokens?, stop?, logprobs?, seed?, return_tokens_as_token_ids?,
 *                          return_token_ids?, prompt_logprobs?, echo? }
 *   → { id, object: 'text_completion', model, choices: [{ index, text, token_ids, prompt_token_ids?,
 *       logprobs: { tokens, token_logprobs }, finish_reason, stop_reason, prompt_logprobs? }], usage }
 *     (vLLM's shapes: with several prompts, choice index = prompt index × n + sample; prompt_logprobs
 *     is on every choice, null first, then { [id]: { logprob } } per prompt token)
 *   POST /generate { input_ids: number[] | number[][], sampling_params?: { max_new_tokens, temperature,
 *                    top_p, top_k, stop, stop_token_ids, n, sampling_seed, skip_special_tokens,
 *                    no_stop_trim }, return_logprob?, logprob_start_len?: number | number[],
 *                    top_logprobs_num?: 0, return_text_in_logprobs? }
 *   → SGLang's answer (v0.5.3 shapes): { text, output_ids, meta_info: { id, finish_reason: { type:
 *     'stop', matched } | { type: 'length', length }, prompt_tokens, completion_tokens, cached_tokens,
 *     input_token_logprobs?, output_token_logprobs? } }, or an array of those (one per prompt and
 *     sample) for a batch of prompts or n > 1. input_token_logprobs cover the prompt from
 *     logprob_start_len (default: the last token) as [logprob, id, text | null], the first null.
 *   GET /v1/models → { object: 'list', data: [{ id, object: 'model', max_model_len }] }
 *   GET /get_model_info, GET /health
 *
 * repetition_penalty, frequency_penalty, presence_penalty and min_p are accepted (in either API)
 * only at their neutral values; other /generate fields and sampling_params are refused by name.
 *
 * Prompt log-probs are teacher-forced (the runtime scorer) log-probs of each prompt token given
 * the earlier ones. Sequence j of a request samples from stream j of its seed (vLLM `seed`,
 * SGLang `sampling_seed`; random when absent), as `LocalModel` samples request j of a call.
 * Requests beyond `maxConcurrency` wait in a queue of at most `maxQueue`; past that they get 429.
 */
import * as http from 'node:http';
import { listenOn, parseJsonObject, readBody, RequestError, sendJson } from './http';
import { randomBytes } from 'node:crypto';
import type { LocalModel } from '../engines/local/local-model';
import type { GenerationResult } from '../engines/local/generate';
import { EOS_TOKEN_ID, FALLBACK_STOP_TOKEN_IDS, STOP_TOKEN_IDS } from '../protocol/embedded-ids';

export interface CompletionsServerOptions {
  /** Name reported by /v1/models and checked against the request's `model` (default 'mempo-tiny'). */
  modelName?: string;
  /** Largest request body accepted, in bytes (default 4 MiB); larger ones get 413. */
  maxBodyBytes?: number;
  /** Requests run at once (default 1); the rest wait in the queue. */
  maxConcurrency?: number;
  /** Requests waiting at most (default 64); past that 429. */
  maxQueue?: number;
  /** Most sequences per request (prompts × n, default 64) and most new tokens (default: the model's maximum). */
  maxN?: number;
  maxTokens?: number;
}

export { RequestError };

export interface CompletionRequest {
  model: string | null;
  /** One or more prompts (token ids). */
  prompts: number[][];
  /** Whether `prompt` was a list of prompts. */
  batch: boolean;
  n: number;
  temperature: number;
  topP: number;
  /** vLLM's top_k extension; -1 or 0 is off. */
  topK: number;
  maxTokens: number;
  stop: string[];
  logprobs: number | null;
  seed: number | null;
  tokensAsIds: boolean;
  returnTokenIds: boolean;
  promptLogprobs: number | null;
  echo: boolean;
}

export interface GenerateRequest {
  prompts: number[][];
  batch: boolean;
  n: number;
  temperature: number;
  topP: number;
  topK: number;
  maxTokens: number;
  stop: string[];
  stopTokenIds: number[];
  seed: number | null;
  skipSpecialTokens: boolean;
  noStopTrim: boolean;
  returnLogprob: boolean;
  /** Per prompt; -1 = only the last prompt token. */
  logprobStart: number[];
  textInLogprobs: boolean;
}

interface Limits {
  vocabSize: number;
  maxN: number;
  maxTokens: number;
  maxPositions: number;
}

const bad = (field: string, msg: string) => new RequestError(400, `field "${field}": ${msg}`);

function optInt(b: Record<string, unknown>, field: string, def: number | null, min: number, max: number, name = field): number | null {
  const v = b[field];
  if (v === undefined || v === null) return def;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) throw bad(name, `expected an integer in [${min}, ${max}], received ${JSON.stringify(v)}`);
  return v;
}

function optNum(b: Record<string, unknown>, field: string, def: number, min: number, max: number, openMin = false, name = field): number {
  const v = b[field];
  if (v === undefined || v === null) return def;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || (openMin && v === min) || v > max) {
    throw bad(name, `expected a number in ${openMin ? '(' : '['}${min}, ${max}], received ${JSON.stringify(v)}`);
  }
  return v;
}

function optBool(b: Record<string, unknown>, field: string, def = false, name = field): boolean {
  const v = b[field];
  if (v === undefined || v === null) return def;
  if (typeof v !== 'boolean') throw bad(name, 'expected a boolean');
  return v;
}

function stopStrings(v: unknown, name: string): string[] {
  const stops = v === undefined || v === null ? [] : typeof v === 'string' ? [v] : v;
  if (!Array.isArray(stops) || stops.some((s) => typeof s !== 'string' || s.length === 0)) throw bad(name, 'expected a non-empty string or an array of them');
  return stops as string[];
}

/** A prompt (token ids) or a list of them; checks ids and length. */
function parsePrompts(v: unknown, name: string, o: Limits): { prompts: number[][]; batch: boolean } {
  if (!Array.isArray(v) || v.length === 0) throw bad(name, 'expected a non-empty array of token ids, or an array of such arrays');
  const batch = Array.isArray(v[0]);
  const prompts = (batch ? v : [v]) as unknown[];
  prompts.forEach((p, k) => {
    const at = batch ? `${name}[${k}]` : name;
    if (!Array.isArray(p) || p.length === 0) throw bad(at, 'expected a non-empty array of token ids');
    p.forEach((id, i) => {
      if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id >= o.vocabSize) throw bad(`${at}[${i}]`, `expected a token id in [0, ${o.vocabSize}), received ${JSON.stringify(id)}`);
    });
    if (p.length >= o.maxPositions) throw bad(at, `${p.length} tokens; the model attends to at most ${o.maxPositions}`);
  });
  return { prompts: prompts as number[][], batch };
}

/** Sampling knobs mempo serve does not implement: accepted only at their neutral value. */
const NEUTRAL: Record<string, number> = { repetition_penalty: 1, frequency_penalty: 0, presence_penalty: 0, min_p: 0 };
function unsupportedUnlessNeutral(b: Record<string, unknown>, prefix: string): void {
  for (const [k, v] of Object.entries(NEUTRAL)) {
    if (b[k] !== undefined && b[k] !== null && b[k] !== v) throw bad(`${prefix}${k}`, `only ${v} is supported by mempo serve, received ${JSON.stringify(b[k])}`);
  }
}

/** Seeds up to 2^53 - 1 (mempo's sampler mixes in the high part). */
const MAX_SEED = Number.MAX_SAFE_INTEGER;

/** Checks a /v1/completions body; every message names the field at fault. */
export function parseCompletionRequest(text: string, o: Limits): CompletionRequest {
  const b = parseJsonObject(text);
  const model = b['model'];
  if (model !== undefined && model !== null && typeof model !== 'string') throw bad('model', 'expected a string');
  if (b['stream'] === true) throw bad('stream', 'streaming is not supported by mempo serve');
  const { prompts, batch } = parsePrompts(b['prompt'], 'prompt', o);
  unsupportedUnlessNeutral(b, '');
  const n = optInt(b, 'n', 1, 1, o.maxN) as number;
  if (prompts.length * n > o.maxN) throw bad('n', `${prompts.length} prompts × n ${n} sequences; at most ${o.maxN} per request`);
  return {
    model: (model as string | undefined) ?? null,
    prompts,
    batch,
    n,
    temperature: optNum(b, 'temperature', 1, 0, 100),
    topP: optNum(b, 'top_p', 1, 0, 1, true),
    topK: Math.max(0, optInt(b, 'top_k', 0, -1, o.vocabSize) as number),
    maxTokens: optInt(b, 'max_tokens', 16, 0, o.maxTokens) as number,
    stop: stopStrings(b['stop'], 'stop'),
    logprobs: optInt(b, 'logprobs', null, 0, 20),
    seed: optInt(b, 'seed', null, 0, MAX_SEED),
    tokensAsIds: optBool(b, 'return_tokens_as_token_ids'),
    returnTokenIds: optBool(b, 'return_token_ids'),
    promptLogprobs: optInt(b, 'prompt_logprobs', null, 0, 20),
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
  const ls = b['logprob_start_len'];
  let logprobStart: number[];
  if (ls === undefined || ls === null) logprobStart = prompts.map(() => -1);
  else {
    const list = Array.isArray(ls) ? ls : prompts.map(() => ls);
    if (list.length !== prompts.length) throw bad('logprob_start_len', `${list.length} values for ${prompts.length} prompts`);
    logprobStart = list.map((v, k) => {
      const len = prompts[k]!.length;
      if (typeof v !== 'number' || !Number.isInteger(v) || v < -1 || v >= len) throw bad(Array.isArray(ls) ? `logprob_start_len[${k}]` : 'logprob_start_len', `expected an integer in [-1, ${len - 1}] (prompt of ${len} tokens), received ${JSON.stringify(v)}`);
      return v;
    });
  }
  return {
    prompts,
    batch,
    n,
    temperature: optNum(sp, 'temperature', 1, 0, 100, false, 'sampling_params.temperature'),
    topP: optNum(sp, 'top_p', 1, 0, 1, true, 'sampling_params.top_p'),
    topK: Math.max(0, optInt(sp, 'top_k', -1, -1, o.vocabSize, 'sampling_params.top_k') as number),
    maxTokens: optInt(sp, 'max_new_tokens', 128, 0, o.maxTokens, 'sampling_params.max_new_tokens') as number,
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

/** A counting semaphore with a bounded wait queue. */
class Limiter {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(private readonly max: number, private readonly maxQueue: number) {}
  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.max) {
      if (this.waiting.length >= this.maxQueue) throw new RequestError(429, `server busy: ${this.active} requests running and ${this.waiting.length} queued`);
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else this.active++;
    try {
      return await fn();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    }
  }
}

/** The stop ids LocalModel samples with (the protocol's stop tokens and `<|im_end|>`; eos stops as eos). */
const DEFAULT_STOP_IDS = [...STOP_TOKEN_IDS, ...FALLBACK_STOP_TOKEN_IDS.filter((id) => id !== EOS_TOKEN_ID)];

export function createCompletionsServer(model: LocalModel, options: CompletionsServerOptions = {}): http.Server {
  const lm = model.model;
  const modelName = options.modelName ?? 'mempo-tiny';
  const maxBody = options.maxBodyBytes ?? 4 << 20;
  const limits: Limits = {
    vocabSize: lm.config.vocabSize,
    maxN: options.maxN ?? 64,
    maxTokens: options.maxTokens ?? lm.config.maxPositions,
    maxPositions: lm.config.maxPositions,
  };
  const limiter = new Limiter(Math.max(1, options.maxConcurrency ?? 1), Math.max(0, options.maxQueue ?? 64));
  const codec = model.codec;
  const piece = (id: number) => (codec.piece ? codec.piece(id) : codec.decode([id]));
  const decode = (ids: number[], skipSpecial: boolean) => (lm.tokenizer ? lm.tokenizer.decode(ids, { skipSpecialTokens: skipSpecial }) : codec.decode(ids));

  /** Per prompt: lp[i] = log π(prompt[i + 1] | prompt[..i]), all prompts in one scorer call. */
  async function promptLogprobs(prompts: number[][]): Promise<Float32Array[]> {
    const idx = prompts.map((p, k) => (p.length > 1 ? k : -1)).filter((k) => k >= 0);
    const out: Float32Array[] = prompts.map(() => new Float32Array(0));
    if (idx.length === 0) return out;
    const lps = await lm.scoreTargets(idx.map((k) => ({ contextIds: prompts[k]!.slice(0, 1), targetIds: prompts[k]!.slice(1) })), { sharePrefixes: false });
    idx.forEach((k, i) => { out[k] = lps[i]!; });
    return out;
  }

  /** results[p][j]: sample j of prompt p, from stream p·n + j of the seed. */
  async function sample(prompts: number[][], n: number, s: { temperature: number; topP: number; topK: number; maxTokens: number; stop: string[]; stopTokenIds: number[]; seed: number | null }): Promise<GenerationResult[][]> {
    if (s.maxTokens === 0) return prompts.map((p) => Array.from({ length: n }, () => ({ tokenIds: [], logprobs: new Float32Array(0), finishReason: 'length' as const, promptLength: p.length })));
    const flat = await lm.generate(
      prompts.flatMap((p) => Array.from({ length: n }, () => ({ ids: p }))),
      {
        maxNewTokens: s.maxTokens,
        temperature: s.temperature,
        topP: s.topP,
        topK: s.topK,
        seed: s.seed ?? randomBytes(4).readUInt32LE(0),
        stop: s.stop,
        stopTokenIds: [...DEFAULT_STOP_IDS, ...s.stopTokenIds],
        decode: false,
      },
    );
    return prompts.map((_, p) => flat.slice(p * n, (p + 1) * n));
  }

  async function complete(r: CompletionRequest): Promise<unknown> {
    if (r.model !== null && r.model !== modelName) throw bad('model', `this server serves "${modelName}", not ${JSON.stringify(r.model)}`);
    let plp: (null | Record<string, { logprob: number }>)[][] | undefined;
    if (r.promptLogprobs !== null) {
      const lps = await promptLogprobs(r.prompts);
      plp = r.prompts.map((p, k) => [null, ...p.slice(1).map((id, i) => ({ [String(id)]: { logprob: lps[k]![i]! } }))]);
    }
    const results = await sample(r.prompts, r.n, { ...r, stopTokenIds: [] });
    const choices: unknown[] = [];
    let generated = 0;
    results.forEach((rs, p) => rs.forEach((g, j) => {
      const ids = g.tokenIds;
      generated += ids.length;
      choices.push({
        index: p * r.n + j,
        text: (r.echo ? codec.decode(r.prompts[p]!) : '') + codec.decode(ids),
        token_ids: ids,
        ...(r.returnTokenIds ? { prompt_token_ids: r.prompts[p] } : {}),
        logprobs: r.logprobs === null ? null : {
          tokens: ids.map((id) => (r.tokensAsIds ? `token_id:${id}` : piece(id))),
          token_logprobs: Array.from(g.logprobs),
        },
        finish_reason: g.finishReason === 'length' || g.finishReason === 'context' ? 'length' : 'stop',
        stop_reason: g.stop ?? null,
        ...(plp ? { prompt_logprobs: plp[p] } : {}),
      });
    }));
    const promptTokens = r.prompts.reduce((a, p) => a + p.length, 0);
    return {
      id: `cmpl-${randomBytes(8).toString('hex')}`,
      object: 'text_completion',
      created: Math.floor(Date.now() / 1000),
      model: modelName,
      choices,
      usage: { prompt_tokens: promptTokens, completion_tokens: generated, total_tokens: promptTokens + generated },
    };
  }

  async function generateNative(r: GenerateRequest): Promise<unknown> {
    const lps = r.returnLogprob ? await promptLogprobs(r.prompts) : null;
    const results = await sample(r.prompts, r.n, r);
    const tuple = (lp: number | null, id: number) => [lp, id, r.textInLogprobs ? piece(id) : null];
    const out: unknown[] = [];
    results.forEach((rs, p) => rs.forEach((g) => {
      const prompt = r.prompts[p]!;
      const ids = g.tokenIds;
      const last = ids[ids.length - 1];
      let finish: Record<string, unknown>;
      if (g.finishReason === 'length' || g.finishReason === 'context') finish = { type: 'length', length: ids.length };
      else finish = { type: 'stop', matched: g.finishReason === 'eos' ? (last ?? null) : (g.stop ?? null) };
      let text = decode(ids, r.skipSpecialTokens);
      if (!r.noStopTrim && g.finishReason === 'stop' && g.stop !== undefined && text.endsWith(g.stop)) text = text.slice(0, text.length - g.stop.length);
      const meta: Record<string, unknown> = {
        id: randomBytes(16).toString('hex'),
        finish_reason: finish,
        prompt_tokens: prompt.length,
        completion_tokens: ids.length,
        cached_tokens: 0,
      };
      if (lps) {
        const start = r.logprobStart[p] === -1 ? prompt.length - 1 : r.logprobStart[p]!;
        // SGLang pads the first entry with null even when start > 0.
        meta['input_token_logprobs'] = prompt.slice(start).map((id, i) => tuple(i === 0 ? null : lps[p]![start + i - 1]!, id));
        meta['output_token_logprobs'] = ids.map((id, i) => tuple(g.logprobs[i]!, id));
      }
      out.push({ text, output_ids: ids, meta_info: meta });
    }));
    return r.batch || r.n > 1 ? out : out[0];
  }

  return http.createServer((req, res) => {
    const send = (status: number, payload: unknown) => sendJson(res, status, payload);
    const err = (status: number, message: string) => send(status, { error: { message, type: status === 429 ? 'rate_limit' : status >= 500 ? 'server_error' : 'invalid_request_error', code: status } });
    const path = (req.url ?? '/').split('?')[0];
    const get = (payload: unknown) => (req.method === 'GET' ? send(200, payload) : err(405, `method ${req.method} not allowed; use GET ${path}`));
    if (path === '/v1/models') return get({ object: 'list', data: [{ id: modelName, object: 'model', owned_by: 'mempo', max_model_len: lm.config.maxPositions }] });
    if (path === '/get_model_info') return get({ model_path: modelName, tokenizer_path: modelName, is_generation: true });
    if (path === '/health') return get({});
    if (path !== '/v1/completions' && path !== '/generate') return err(404, `no such endpoint ${path}; use POST /v1/completions, POST /generate or GET /v1/models`);
    if (req.method !== 'POST') return err(405, `method ${req.method} not allowed; use POST ${path}`);
    readBody(req, maxBody)
      .then((text) => {
        if (path === '/generate') {
          const r = parseGenerateRequest(text, limits);
          return limiter.run(() => generateNative(r));
        }
        const r = parseCompletionRequest(text, limits);
        return limiter.run(() => complete(r));
      })
      .then((payload) => send(200, payload))
      .catch((e: unknown) => {
        if (res.headersSent || res.destroyed) return;
        if (e instanceof RequestError) err(e.status, e.message);
        else err(500, `model failed: ${(e as Error).message}`);
      });
  });
}

/** Listens on host:port (port 0 picks a free one); resolves to the base URL (http://host:port). */
export function listen(server: http.Server, port: number, host = '127.0.0.1'): Promise<string> {
  return listenOn(server, port, host);
}
