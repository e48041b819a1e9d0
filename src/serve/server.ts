/**
 * `mempo serve`: the subset of the OpenAI / vLLM completions API that the HTTP backends use,
 * over the embedded runtime (`LocalModel`), on loopback by default.
 *
 *   POST /v1/completions { model, prompt: number[], n?, temperature?, top_p?, top_k?, max_tokens?, stop?,
 *                          logprobs?, seed?, return_tokens_as_token_ids?, prompt_logprobs?, echo? }
 *   → { id, object: 'text_completion', model, choices: [{ index, text, token_ids, logprobs: { tokens,
 *       token_logprobs }, finish_reason }], prompt_logprobs?: (null | { [id]: { logprob } })[] }
 *   GET /v1/models → { object: 'list', data: [{ id, object: 'model' }] }
 *
 * prompt_logprobs are teacher-forced log-probs (the runtime scorer) of each prompt token given the
 * earlier ones; the first is null. Requests beyond `maxConcurrency` wait in a queue of at most
 * `maxQueue`; past that they get 429.
 */
import * as http from 'node:http';
import { listenOn, parseJsonObject, readBody, RequestError, sendJson } from '../core/http-server';
import { randomBytes } from 'node:crypto';
import type { LocalModel } from '../rollout/generator';
import { EOS_TOKEN_ID, FALLBACK_STOP_TOKEN_IDS, STOP_TOKEN_IDS } from '../agent/protocol';

export interface CompletionsServerOptions {
  /** Name reported by /v1/models and checked against the request's `model` (default 'mempo-tiny'). */
  modelName?: string;
  /** Largest request body accepted, in bytes (default 4 MiB); larger ones get 413. */
  maxBodyBytes?: number;
  /** Requests run at once (default 1); the rest wait in the queue. */
  maxConcurrency?: number;
  /** Requests waiting at most (default 64); past that 429. */
  maxQueue?: number;
  /** Most sequences per request (default 64) and most new tokens (default: the model's maximum). */
  maxN?: number;
  maxTokens?: number;
}

export { RequestError };

export interface CompletionRequest {
  model: string | null;
  prompt: number[];
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
  promptLogprobs: number | null;
  echo: boolean;
}

const bad = (field: string, msg: string) => new RequestError(400, `field "${field}": ${msg}`);

function optInt(b: Record<string, unknown>, field: string, def: number | null, min: number, max: number): number | null {
  const v = b[field];
  if (v === undefined || v === null) return def;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) throw bad(field, `expected an integer in [${min}, ${max}], received ${JSON.stringify(v)}`);
  return v;
}

function optNum(b: Record<string, unknown>, field: string, def: number, min: number, max: number, openMin = false): number {
  const v = b[field];
  if (v === undefined || v === null) return def;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || (openMin && v === min) || v > max) {
    throw bad(field, `expected a number in ${openMin ? '(' : '['}${min}, ${max}], received ${JSON.stringify(v)}`);
  }
  return v;
}

function optBool(b: Record<string, unknown>, field: string): boolean {
  const v = b[field];
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') throw bad(field, 'expected a boolean');
  return v;
}

/** Checks a /v1/completions body; every message names the field at fault. */
export function parseCompletionRequest(text: string, o: { vocabSize: number; maxN: number; maxTokens: number; maxPositions: number }): CompletionRequest {
  const b = parseJsonObject(text);
  const model = b['model'];
  if (model !== undefined && model !== null && typeof model !== 'string') throw bad('model', 'expected a string');
  const prompt = b['prompt'];
  if (!Array.isArray(prompt) || prompt.length === 0) throw bad('prompt', 'expected a non-empty array of token ids');
  prompt.forEach((id, i) => {
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id >= o.vocabSize) throw bad(`prompt[${i}]`, `expected a token id in [0, ${o.vocabSize}), received ${JSON.stringify(id)}`);
  });
  if (prompt.length >= o.maxPositions) throw bad('prompt', `${prompt.length} tokens; the model attends to at most ${o.maxPositions}`);
  const stop = b['stop'] ?? [];
  const stops = typeof stop === 'string' ? [stop] : stop;
  if (!Array.isArray(stops) || stops.some((s) => typeof s !== 'string' || s.length === 0)) throw bad('stop', 'expected a non-empty string or an array of them');
  return {
    model: (model as string | undefined) ?? null,
    prompt: prompt as number[],
    n: optInt(b, 'n', 1, 1, o.maxN) as number,
    temperature: optNum(b, 'temperature', 1, 0, 100),
    topP: optNum(b, 'top_p', 1, 0, 1, true),
    topK: Math.max(0, optInt(b, 'top_k', 0, -1, o.vocabSize) as number),
    maxTokens: optInt(b, 'max_tokens', 16, 0, o.maxTokens) as number,
    stop: stops as string[],
    logprobs: optInt(b, 'logprobs', null, 0, 20),
    seed: optInt(b, 'seed', null, 0, 2 ** 31 - 1),
    tokensAsIds: optBool(b, 'return_tokens_as_token_ids'),
    promptLogprobs: optInt(b, 'prompt_logprobs', null, 0, 20),
    echo: optBool(b, 'echo'),
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

export function createCompletionsServer(model: LocalModel, options: CompletionsServerOptions = {}): http.Server {
  const lm = model.model;
  const modelName = options.modelName ?? 'mempo-tiny';
  const maxBody = options.maxBodyBytes ?? 4 << 20;
  const limits = {
    vocabSize: lm.config.vocabSize,
    maxN: options.maxN ?? 64,
    maxTokens: options.maxTokens ?? lm.config.maxPositions,
    maxPositions: lm.config.maxPositions,
  };
  const limiter = new Limiter(Math.max(1, options.maxConcurrency ?? 1), Math.max(0, options.maxQueue ?? 64));
  const codec = model.codec;
  const piece = (id: number) => (codec.piece ? codec.piece(id) : codec.decode([id]));

  async function complete(r: CompletionRequest): Promise<unknown> {
    if (r.model !== null && r.model !== modelName) throw bad('model', `this server serves "${modelName}", not ${JSON.stringify(r.model)}`);
    let promptLogprobs: (null | Record<string, { logprob: number }>)[] | undefined;
    if (r.promptLogprobs !== null) {
      promptLogprobs = [null];
      if (r.prompt.length > 1) {
        const [lp] = await lm.scoreTargets([{ contextIds: r.prompt.slice(0, 1), targetIds: r.prompt.slice(1) }], { sharePrefixes: false });
        for (let i = 1; i < r.prompt.length; i++) promptLogprobs.push({ [String(r.prompt[i])]: { logprob: (lp as Float32Array)[i - 1] as number } });
      }
    }
    const choices: unknown[] = [];
    if (r.maxTokens > 0) {
      const results = await lm.generate(
        Array.from({ length: r.n }, () => ({ ids: r.prompt })),
        {
          maxNewTokens: r.maxTokens,
          temperature: r.temperature,
          topP: r.topP,
          topK: r.topK,
          seed: r.seed ?? randomBytes(4).readUInt32LE(0) >>> 1,
          stop: r.stop,
          stopTokenIds: [...STOP_TOKEN_IDS, ...FALLBACK_STOP_TOKEN_IDS.filter((id) => id !== EOS_TOKEN_ID)],
          decode: false,
        },
      );
      results.forEach((g, index) => {
        const ids = g.tokenIds;
        const text = (r.echo ? codec.decode(r.prompt) : '') + codec.decode(ids);
        choices.push({
          index,
          text,
          token_ids: ids,
          logprobs: r.logprobs === null ? null : {
            tokens: ids.map((id) => (r.tokensAsIds ? `token_id:${id}` : piece(id))),
            token_logprobs: Array.from(g.logprobs),
          },
          finish_reason: g.finishReason === 'length' || g.finishReason === 'context' ? 'length' : 'stop',
          stop_reason: g.stop ?? null,
        });
      });
    } else {
      for (let index = 0; index < r.n; index++) {
        choices.push({ index, text: r.echo ? codec.decode(r.prompt) : '', token_ids: [], logprobs: r.logprobs === null ? null : { tokens: [], token_logprobs: [] }, finish_reason: 'length' });
      }
    }
    const generated = choices.reduce<number>((a, c) => a + (c as { token_ids: number[] }).token_ids.length, 0);
    return {
      id: `cmpl-${randomBytes(8).toString('hex')}`,
      object: 'text_completion',
      created: Math.floor(Date.now() / 1000),
      model: modelName,
      choices,
      ...(promptLogprobs ? { prompt_logprobs: promptLogprobs } : {}),
      usage: { prompt_tokens: r.prompt.length, completion_tokens: generated, total_tokens: r.prompt.length + generated },
    };
  }

  return http.createServer((req, res) => {
    const send = (status: number, payload: unknown) => sendJson(res, status, payload);
    const err = (status: number, message: string) => send(status, { error: { message, type: status === 429 ? 'rate_limit' : status >= 500 ? 'server_error' : 'invalid_request_error', code: status } });
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/v1/models') {
      if (req.method !== 'GET') return err(405, `method ${req.method} not allowed; use GET /v1/models`);
      return send(200, { object: 'list', data: [{ id: modelName, object: 'model', owned_by: 'mempo', max_model_len: lm.config.maxPositions }] });
    }
    if (path !== '/v1/completions') return err(404, `no such endpoint ${path}; use POST /v1/completions or GET /v1/models`);
    if (req.method !== 'POST') return err(405, `method ${req.method} not allowed; use POST /v1/completions`);
    readBody(req, maxBody)
      .then((text) => {
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
