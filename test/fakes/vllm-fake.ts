/**
 * A strict vLLM-shaped fake of `POST /v1/completions` and `GET /v1/models`, on 127.0.0.1, written
 * from vLLM's protocol definitions (github.com/vllm-project/vllm at ec3b890c14b00f6670515d9df8d503b5270e95ca):
 *   vllm/entrypoints/openai/protocol.py: CompletionRequest (fields, defaults, check_logprobs),
 *     CompletionLogProbs { text_offset, token_logprobs, tokens, top_logprobs },
 *     CompletionResponseChoice { index, text, logprobs, finish_reason, stop_reason, token_ids,
 *     prompt_logprobs, prompt_token_ids }, CompletionResponse, ModelCard { max_model_len }
 *   vllm/entrypoints/openai/serving_completion.py (at 00463e627b4cbe549b5e9815a2bdb0100ae88ea9):
 *     request_output_to_completion_response (token_ids / prompt_token_ids only with
 *     return_token_ids, the choice's model = the first served name) and _create_completion_logprobs
 *     (tokens as "token_id:N" with return_tokens_as_token_ids, text_offset advancing by each
 *     token string's length, top_logprobs = the chosen token when logprobs = 0)
 *   vllm/logprobs.py: Logprob { logprob, rank, decoded_token } (the prompt_logprobs entries).
 * The answer is serialised as FastAPI does (`model_dump()`): every field present, null when not
 * asked for. stop_reason is the matched stop string, the stop_token_ids id that ended the
 * sequence, or null (eos, length).
 *
 * Stricter than vLLM on purpose: vLLM's OpenAIBaseModel has extra="allow" and only logs fields it
 * ignores; this fake answers 400 for them, so that a field mempo sends which vLLM would silently
 * drop fails the test. Types and ranges are checked as pydantic and check_logprobs do (400).
 *
 * Completions are canned: `complete(promptIds)` gives the ids the "model" would sample (and their
 * log-probs); the fake cuts them where vLLM would stop (stop strings on the decoded text, with
 * include_stop_str_in_output; stop_token_ids; eos unless ignore_eos; max_tokens). Prompt
 * log-probs come from `promptLogprob(prefix, id)`.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Canned {
  ids: number[];
  /** Per id; default -0.25 each. */
  logprobs?: number[];
}

export interface FakeModel {
  decode(ids: readonly number[]): string;
  vocabSize: number;
  eosTokenIds: readonly number[];
  complete(promptIds: readonly number[]): Canned;
  /** log π(id | prefix), for prompt_logprobs and SGLang's input_token_logprobs. */
  promptLogprob(prefix: readonly number[], id: number): number;
}

export interface FakeServer {
  url: string;
  /** Every request body received on the API path, parsed. */
  requests: Record<string, unknown>[];
  close(): Promise<void>;
}

export interface VllmFakeOptions {
  /** `--served-model-name` values; answers carry the first (default ['fake-model']). */
  servedModelNames?: string[];
  maxModelLen?: number;
}

/** CompletionRequest's fields (protocol.py) and the JSON types pydantic accepts for those mempo may send. */
const FIELDS: Record<string, (v: unknown) => boolean> = {
  model: (v) => typeof v === 'string',
  prompt: () => true, // checked below
  echo: isBool, frequency_penalty: isNum, logit_bias: isObj, logprobs: isInt, max_tokens: isInt, n: isInt,
  presence_penalty: isNum, seed: isInt, stop: (v) => typeof v === 'string' || (Array.isArray(v) && v.every((s) => typeof s === 'string')),
  stream: isBool, stream_options: isObj, suffix: isStr, temperature: isNum, top_p: isNum, user: isStr,
  use_beam_search: isBool, top_k: isInt, min_p: isNum, repetition_penalty: isNum, length_penalty: isNum,
  stop_token_ids: isIntList, include_stop_str_in_output: isBool, ignore_eos: isBool, min_tokens: isInt,
  skip_special_tokens: isBool, spaces_between_special_tokens: isBool, truncate_prompt_tokens: isInt,
  allowed_token_ids: isIntList, prompt_logprobs: isInt, prompt_embeds: () => true, add_special_tokens: isBool,
  response_format: isObj, structured_outputs: isObj, priority: isInt, request_id: isStr, logits_processors: Array.isArray,
  return_tokens_as_token_ids: isBool, return_token_ids: isBool, cache_salt: isStr, kv_transfer_params: isObj, vllm_xargs: isObj,
};

function isBool(v: unknown): boolean { return typeof v === 'boolean'; }
function isNum(v: unknown): boolean { return typeof v === 'number' && Number.isFinite(v); }
function isInt(v: unknown): boolean { return typeof v === 'number' && Number.isInteger(v); }
function isStr(v: unknown): boolean { return typeof v === 'string'; }
function isObj(v: unknown): boolean { return typeof v === 'object' && !Array.isArray(v); }
function isIntList(v: unknown): boolean { return Array.isArray(v) && v.every(isInt); }

export class BadRequest extends Error {}

/** A handler's answer with a status other than 200 (SGLang's 400 { success: false }, FastAPI's 422). */
export class Answer {
  constructor(readonly status: number, readonly payload: unknown) {}
}

function checkRequest(b: Record<string, unknown>, m: FakeModel, maxModelLen: number): number[][] {
  for (const [k, v] of Object.entries(b)) {
    const check = FIELDS[k];
    if (check === undefined) throw new BadRequest(`unknown field "${k}" (vLLM would ignore it)`);
    if (v !== null && !check(v)) throw new BadRequest(`field "${k}": invalid type ${JSON.stringify(v)}`);
  }
  const p = b['prompt'];
  const prompts = Array.isArray(p) && p.length > 0 && p.every(isInt) ? [p as number[]] : Array.isArray(p) && p.length > 0 && p.every(isIntList) ? (p as number[][]) : null;
  if (prompts === null) throw new BadRequest('prompt: expected token ids or a list of them');
  for (const q of prompts) {
    if (q.length === 0 || q.some((id) => id < 0 || id >= m.vocabSize)) throw new BadRequest('prompt: token id out of vocabulary');
    if (q.length + ((b['max_tokens'] as number | undefined) ?? 16) > maxModelLen) throw new BadRequest(`This model's maximum context length is ${maxModelLen} tokens`);
  }
  // check_logprobs
  const pl = b['prompt_logprobs'] as number | null | undefined;
  if (pl !== undefined && pl !== null && pl < 0 && pl !== -1) throw new BadRequest('`prompt_logprobs` must be a positive value or -1.');
  const lp = b['logprobs'] as number | null | undefined;
  if (lp !== undefined && lp !== null && lp < 0) throw new BadRequest('`logprobs` must be a positive value.');
  if (b['stream'] === true) throw new BadRequest('the fake does not stream');
  const n = (b['n'] as number | undefined) ?? 1;
  if (n < 1) throw new BadRequest('n must be at least 1');
  const t = b['temperature'] as number | null | undefined;
  if (t !== undefined && t !== null && t < 0) throw new BadRequest('temperature must be non-negative');
  const tp = b['top_p'] as number | null | undefined;
  if (tp !== undefined && tp !== null && (tp <= 0 || tp > 1)) throw new BadRequest('top_p must be in (0, 1]');
  const tk = b['top_k'] as number | null | undefined;
  if (tk !== undefined && tk !== null && tk < -1) throw new BadRequest('top_k must be -1 (disable), or at least 1');
  return prompts;
}

export interface Cut {
  ids: number[];
  logprobs: number[];
  finish: 'stop' | 'length';
  /** The stop string or stop token id that ended it; null for eos and length. */
  stopReason: string | number | null;
}

/** Where vLLM stops a canned sequence: eos, stop_token_ids, stop strings on the decoded text, max_tokens. */
export function cutCanned(c: Canned, m: FakeModel, o: { maxTokens: number; stop: string[]; stopTokenIds: number[]; ignoreEos: boolean }): Cut {
  const lps = c.logprobs ?? c.ids.map(() => -0.25);
  for (let k = 0; k < c.ids.length && k < o.maxTokens; k++) {
    const id = c.ids[k]!;
    const done = (stopReason: string | number | null): Cut => ({ ids: c.ids.slice(0, k + 1), logprobs: lps.slice(0, k + 1), finish: 'stop', stopReason });
    if (!o.ignoreEos && m.eosTokenIds.includes(id)) return done(null);
    if (o.stopTokenIds.includes(id)) return done(id);
    const text = m.decode(c.ids.slice(0, k + 1));
    const hit = o.stop.find((s) => text.includes(s));
    if (hit !== undefined) return done(hit);
  }
  const n = Math.min(c.ids.length, o.maxTokens);
  return { ids: c.ids.slice(0, n), logprobs: lps.slice(0, n), finish: 'length', stopReason: null };
}

/** vLLM's prompt_logprobs of one prompt: null first, then { [id]: { logprob, rank, decoded_token } }. */
function promptLogprobs(p: readonly number[], m: FakeModel): unknown[] {
  return [null, ...p.slice(1).map((id, i) => ({ [String(id)]: { logprob: m.promptLogprob(p.slice(0, i + 1), id), rank: 1, decoded_token: m.decode([id]) } }))];
}

function completionLogprobs(ids: readonly number[], lps: readonly number[], m: FakeModel, asIds: boolean): unknown {
  const tokens = ids.map((id) => (asIds ? `token_id:${id}` : m.decode([id])));
  const textOffset: number[] = [];
  tokens.forEach((_, k) => textOffset.push(k === 0 ? 0 : textOffset[k - 1]! + [...tokens[k - 1]!].length));
  return {
    text_offset: textOffset,
    token_logprobs: lps.map((x) => Math.max(x, -9999)),
    tokens,
    top_logprobs: tokens.map((t, k) => ({ [t]: Math.max(lps[k]!, -9999) })),
  };
}

function complete(b: Record<string, unknown>, prompts: number[][], m: FakeModel, name: string): unknown {
  const n = (b['n'] as number | undefined) ?? 1;
  const stop = b['stop'] === undefined || b['stop'] === null ? [] : typeof b['stop'] === 'string' ? [b['stop']] : (b['stop'] as string[]);
  const settings = { maxTokens: (b['max_tokens'] as number | undefined) ?? 16, stop, stopTokenIds: (b['stop_token_ids'] as number[] | undefined) ?? [], ignoreEos: b['ignore_eos'] === true };
  const withIds = b['return_token_ids'] === true;
  const lpAsked = b['logprobs'] !== undefined && b['logprobs'] !== null;
  const plpAsked = b['prompt_logprobs'] !== undefined && b['prompt_logprobs'] !== null;
  const choices: unknown[] = [];
  let generated = 0;
  for (const p of prompts) {
    for (let j = 0; j < n; j++) {
      const cut = cutCanned(m.complete(p), m, settings);
      let text = m.decode(cut.ids);
      // Without include_stop_str_in_output vLLM drops the matched stop string from the text.
      if (typeof cut.stopReason === 'string' && b['include_stop_str_in_output'] !== true) text = text.slice(0, text.lastIndexOf(cut.stopReason));
      generated += cut.ids.length;
      choices.push({
        index: choices.length,
        text,
        logprobs: lpAsked ? completionLogprobs(cut.ids, cut.logprobs, m, b['return_tokens_as_token_ids'] === true) : null,
        finish_reason: cut.finish,
        stop_reason: cut.stopReason,
        token_ids: withIds ? cut.ids : null,
        prompt_logprobs: plpAsked ? promptLogprobs(p, m) : null,
        prompt_token_ids: withIds ? p : null,
      });
    }
  }
  const promptTokens = prompts.reduce((a, p) => a + p.length, 0);
  return {
    id: `cmpl-${Math.random().toString(16).slice(2)}`, object: 'text_completion', created: Math.floor(Date.now() / 1000), model: name, choices,
    service_tier: null, system_fingerprint: null,
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens + generated, completion_tokens: generated, prompt_tokens_details: null },
    kv_transfer_params: null,
  };
}

/** Reads a JSON body; answers JSON; 400 { error: { message, type, param, code } } as vLLM's ErrorResponse. */
export function serveJson(handle: (path: string, method: string, body: Record<string, unknown> | null) => unknown, requests: Record<string, unknown>[], apiPaths: string[]): Promise<FakeServer> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0]!;
      const send = (status: number, payload: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(payload));
      };
      try {
        let body: Record<string, unknown> | null = null;
        if (req.method === 'POST') {
          const parsed: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new BadRequest('body must be a JSON object');
          body = parsed as Record<string, unknown>;
          if (apiPaths.includes(path)) requests.push(body);
        }
        const out = handle(path, req.method ?? 'GET', body);
        if (out instanceof Answer) send(out.status, out.payload);
        else send(200, out);
      } catch (e) {
        const bad = e instanceof BadRequest || e instanceof SyntaxError;
        send(bad ? 400 : 500, { error: { message: (e as Error).message, type: bad ? 'BadRequestError' : 'InternalServerError', param: null, code: bad ? 400 : 500 } });
      }
    });
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      resolve({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        requests,
        close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
      });
    });
  });
}

export function startVllmFake(m: FakeModel, options: VllmFakeOptions = {}): Promise<FakeServer> {
  const names = options.servedModelNames ?? ['fake-model'];
  const maxModelLen = options.maxModelLen ?? 4096;
  return serveJson((path, method, body) => {
    if (path === '/v1/models' && method === 'GET') {
      return { object: 'list', data: names.map((id) => ({ id, object: 'model', created: 0, owned_by: 'vllm', root: names[0], parent: null, max_model_len: maxModelLen, permission: [] })) };
    }
    if (path === '/v1/completions' && method === 'POST') {
      const prompts = checkRequest(body!, m, maxModelLen);
      const model = body!['model'];
      if (model !== undefined && model !== null && !names.includes(model as string)) throw new BadRequest(`The model \`${String(model)}\` does not exist.`);
      return complete(body!, prompts, m, names[0]!);
    }
    throw new BadRequest(`no route ${method} ${path}`);
  }, [], ['/v1/completions']);
}
