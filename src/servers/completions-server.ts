/**
 * `mempo serve`: the OpenAI API as the `openai` SDK and the Vercel AI SDK use it (chat and text
 * completions, streamed or not), the subsets of the vLLM completions API and of SGLang's native
 * API that the HTTP backends use, over the embedded runtime (`LocalModel`), on loopback by default.
 *
 *   POST /v1/chat/completions { model, messages, tools?, tool_choice?: 'auto' | 'none', n?,
 *                          temperature?, top_p?, top_k?, max_tokens? | max_completion_tokens?, stop?,
 *                          seed?, logprobs?, top_logprobs?, return_token_ids?, stream?,
 *                          stream_options?: { include_usage } }
 *   → { id, object: 'chat.completion', model, choices: [{ index, message: { role, content,
 *       tool_calls? }, logprobs: { content: [{ token, logprob, bytes, top_logprobs }] } | null,
 *       finish_reason: 'stop' | 'length' | 'tool_calls', stop_reason, token_ids? }], usage,
 *       prompt_token_ids? } (src/servers/chat-handlers.ts; the prompt is the model's chat template
 *     applied to messages and tools, src/servers/chat-template.ts)
 *   POST /v1/completions { model, prompt: string | string[] | number[] | number[][], n?, temperature?,
 *                          top_p?, top_k?, max_tokens?, stop?, logprobs?, seed?, return_tokens_as_token_ids?,
 *                          return_token_ids?, prompt_logprobs?, echo?, stream?, stream_options? }
 *   → { id, object: 'text_completion', model, choices: [{ index, text, logprobs: { text_offset,
 *       token_logprobs, tokens, top_logprobs } | null, finish_reason, stop_reason, token_ids,
 *       prompt_logprobs, prompt_token_ids }], usage }
 *     (vLLM's shapes: every field there, null unless asked for — token_ids / prompt_token_ids with
 *     return_token_ids, logprobs with logprobs, prompt_logprobs with prompt_logprobs; with several
 *     prompts, choice index = prompt index × n + sample; prompt_logprobs is null first, then
 *     { [id]: { logprob, rank, decoded_token } } per prompt token; stop_reason is the stop string
 *     or the stop token id, null on eos and length)
 *   POST /generate { input_ids: number[] | number[][], sampling_params?: { max_new_tokens, temperature,
 *                    top_p, top_k, stop, stop_token_ids, n, sampling_seed, skip_special_tokens,
 *                    no_stop_trim }, return_logprob?, logprob_start_len?: number | number[],
 *                    top_logprobs_num?: 0, return_text_in_logprobs? }
 *   → SGLang's answer (v0.5.3 shapes): { text, output_ids, meta_info: { id, finish_reason: { type:
 *     'stop', matched } | { type: 'length', length }, prompt_tokens, completion_tokens, cached_tokens,
 *     input_token_logprobs?, output_token_logprobs? } }, or an array of those (one per prompt and
 *     sample) for a batch of prompts or n > 1. input_token_logprobs cover the prompt from
 *     logprob_start_len (default: the last token) as [logprob, id, text | null], the first null.
 *   POST /update_weights_from_disk { model_path, load_format?, abort_all_requests? } → SGLang's
 *     { success, message, num_paused_requests } (200, or 400 with the old weights kept): the model
 *     takes another directory's weights (src/servers/weight-update.ts)
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
 * A request whose client disconnects before its answer leaves the queue, or, if it runs, stops
 * sampling at the next decode step (a scoring pass in progress finishes first): abandoned work
 * (client timeouts, retries elsewhere) does not delay the requests behind it.
 *
 * With `stream: true` (both /v1 endpoints) the answer is server-sent events: OpenAI's chunks, a
 * token at a time, `stream_options.include_usage` a last chunk with the usage, then
 * `data: [DONE]`; the same seed gives the same tokens as the unstreamed answer. Errors are
 * OpenAI's `{ error: { message, type, param, code } }`, `param` the field at fault, `code` the
 * HTTP status (as vLLM answers); an error after a stream began is an event of that shape.
 *
 * With `token`, every request but GET /health needs `Authorization: Bearer <token>`: without it
 * the answer is 401 from the headers alone (the body is never read, the connection closed), the
 * same whatever the path or body. `listen` refuses an address off loopback without a token
 * (src/servers/auth.ts).
 */
import * as http from 'node:http';
import type { LocalModel } from '../engines/local/local-model';
import { CompletionsHandlers } from './completions-handlers';
import { FieldError, parseCompletionRequest, parseGenerateRequest, type Limits } from './completions-requests';
import { ChatHandlers } from './chat-handlers';
import { parseChatRequest } from './chat-requests';
import { ChatTemplater } from './chat-template';
import { EventStream } from './openai-stream';
import { bearerMatches, checkToken, requireTokenOffLoopback } from './auth';
import { listenOn, readBody, RequestError, sendJson } from './http';
import { Limiter } from './limiter';
import { updateWeightsFromDisk, WeightGate } from './weight-update';
import { CaptureHook, type CallCapture, type CaptureServerOptions } from './capture-hook';

export { RequestError };
export { parseCompletionRequest, parseGenerateRequest, type CompletionRequest, type GenerateRequest } from './completions-requests';

/** Defaults of `createCompletionsServer` (each documented on `CompletionsServerOptions`). */
export const COMPLETIONS_SERVER_DEFAULTS = {
  modelName: 'mempo-tiny',
  maxBodyBytes: 4 << 20,
  maxConcurrency: 1,
  maxQueue: 64,
  maxN: 64,
} as const;

/** Capture (`recorder`, `weightVersion`, `onEpisodeFinished`): src/servers/capture-hook.ts. */
export interface CompletionsServerOptions extends CaptureServerOptions {
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
  /** Bearer token every request but GET /health must carry (default: none; required to listen off loopback). */
  token?: string;
  /** A Jinja chat template for /v1/chat/completions instead of the model's own (vLLM's --chat-template). */
  chatTemplate?: string;
}

/** The servers created with a token: `listen` lets only these bind off loopback. */
const withToken = new WeakSet<http.Server>();

const API_PATHS = new Set(['/v1/completions', '/v1/chat/completions', '/generate', '/update_weights_from_disk']);

/** OpenAI's error body: `type` follows the status, `param` names the field at fault (null when none is), `code` is the status. */
function errorBody(status: number, message: string, param: string | null = null): unknown {
  const type = status === 401 ? 'authentication_error' : status === 404 ? 'not_found_error' : status === 429 ? 'rate_limit_error' : status >= 500 ? 'server_error' : 'invalid_request_error';
  return { error: { message, type, param, code: status } };
}

function sendError(res: http.ServerResponse, status: number, message: string, param: string | null = null): void {
  sendJson(res, status, errorBody(status, message, param));
}

export function createCompletionsServer(model: LocalModel, options: CompletionsServerOptions = {}): http.Server {
  const D = COMPLETIONS_SERVER_DEFAULTS;
  const config = model.model.config;
  const handlers = new CompletionsHandlers(model, options.modelName ?? D.modelName);
  const maxBody = options.maxBodyBytes ?? D.maxBodyBytes;
  const tok = model.model.tokenizer;
  const limits: Limits = {
    vocabSize: config.vocabSize,
    maxN: options.maxN ?? D.maxN,
    maxTokens: options.maxTokens ?? config.maxPositions,
    maxPositions: config.maxPositions,
    ...(tok === undefined ? {} : { encode: (text: string) => tok.encode(text, { addSpecialTokens: true }) }),
  };
  // LocalModel always has a tokenizer; the template is compiled now so that a bad --chat-template fails at start.
  const chat = new ChatHandlers(model, handlers, new ChatTemplater(tok!, options.chatTemplate), limits);
  const limiter = new Limiter(Math.max(1, options.maxConcurrency ?? D.maxConcurrency), Math.max(0, options.maxQueue ?? D.maxQueue));
  const gate = new WeightGate();
  const token = checkToken(options.token, 'createCompletionsServer option token');
  let updates = 0;
  const capture = options.recorder === undefined ? undefined : new CaptureHook({ ...options, recorder: options.recorder }, () => updates);
  /** A tagged call's capture is released however the call ends (recorded calls have nothing left to release). */
  const captured = <T>(cap: CallCapture | undefined, p: Promise<T>): Promise<T> => (cap === undefined ? p : p.finally(() => cap.release()));
  /**
   * A parsed request, run after any weight update in progress, in its turn of the queue; `ctl`
   * aborts when its client goes away. A streamed answer is written to `events` (payload undefined).
   */
  const handle = async (req: http.IncomingMessage, path: string, text: string, ctl: AbortController, events: EventStream): Promise<{ status: number; payload: unknown }> => {
    if (path === '/update_weights_from_disk') {
      const out = await updateWeightsFromDisk(model, gate, text);
      if (out.status === 200) updates++;
      return out;
    }
    const ok = (payload: unknown) => ({ status: 200, payload });
    if (path === '/generate') {
      const r = parseGenerateRequest(text, limits);
      capture?.refuseTagged(req, path);
      return gate.run(ctl, () => limiter.run((s) => handlers.generate(r, s), ctl.signal)).then(ok);
    }
    if (path === '/v1/chat/completions') {
      const r = parseChatRequest(text, limits);
      const cap = capture?.call(req, text, r.n, 1);
      return captured(cap, gate.run(ctl, () => limiter.run((s) => chat.chat(r, s, events, cap), ctl.signal))).then(ok);
    }
    const r = parseCompletionRequest(text, limits);
    const cap = capture?.call(req, text, r.n, r.prompts.length);
    return captured(cap, gate.run(ctl, () => limiter.run((s) => handlers.complete(r, s, events, cap), ctl.signal))).then(ok);
  };
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    if (token !== undefined && !(path === '/health' && req.method === 'GET') && !bearerMatches(req, token)) return sendError(res, 401, 'a valid Authorization: Bearer <token> is required (mempo serve --token)');
    const episodes = CaptureHook.owns(path);
    if (!API_PATHS.has(path) && !episodes) return serveInfo(req, res, path, handlers.modelName, config.maxPositions);
    if (req.method !== 'POST') return sendError(res, 405, `method ${req.method} not allowed; use POST ${path}`);
    // 'close' before the answer was written: the client went away (disconnect, timeout).
    const gone = new AbortController();
    res.on('close', () => {
      if (!res.writableEnded) gone.abort();
    });
    const events = new EventStream(res);
    if (episodes && capture === undefined) return sendError(res, 404, `no such endpoint ${path}: this server records no episodes (createCompletionsServer option recorder, mempo serve --record)`);
    readBody(req, maxBody)
      .then((text) => (episodes ? capture!.finish(path) : handle(req, path, text, gone, events)))
      .then(({ status, payload }) => {
        if (payload !== undefined) sendJson(res, status, payload);
      })
      .catch((err: unknown) => {
        if (res.destroyed) return;
        // Aborted by a weight update (abort_all_requests): its reason is the answer, even while queued.
        const e = gone.signal.aborted && gone.signal.reason instanceof RequestError ? gone.signal.reason : err;
        const [status, message, param] = e instanceof RequestError ? [e.status, e.message, e instanceof FieldError ? e.param : null] : [500, `model failed: ${(e as Error).message}`, null];
        // A stream that began answered 200 already: the error is its last event (as vLLM sends it).
        if (events.isStarted) {
          events.send(errorBody(status, message, param));
          events.done();
        } else if (!res.headersSent) sendError(res, status, message, param);
      });
  });
  if (token !== undefined) withToken.add(server);
  return server;
}

/** The GET endpoints (/v1/models, /get_model_info, /health), or 404 naming the endpoints there are. */
function serveInfo(req: http.IncomingMessage, res: http.ServerResponse, path: string, modelName: string, maxPositions: number): void {
  const get = (payload: unknown) => (req.method === 'GET' ? sendJson(res, 200, payload) : sendError(res, 405, `method ${req.method} not allowed; use GET ${path}`));
  if (path === '/v1/models') return get({ object: 'list', data: [{ id: modelName, object: 'model', owned_by: 'mempo', max_model_len: maxPositions }] });
  if (path === '/get_model_info') return get({ model_path: modelName, tokenizer_path: modelName, is_generation: true });
  if (path === '/health') return get({});
  sendError(res, 404, `no such endpoint ${path}; use POST /v1/chat/completions, POST /v1/completions, POST /generate, POST /update_weights_from_disk or GET /v1/models`);
}

/**
 * Listens on host:port (port 0 picks a free one); resolves to the base URL (http://host:port).
 * An address off loopback (0.0.0.0 included) needs a server created with a token: ERR_INVALID_OPTION otherwise.
 */
export async function listen(server: http.Server, port: number, host = '127.0.0.1'): Promise<string> {
  await requireTokenOffLoopback(host, withToken.has(server));
  return listenOn(server, port, host);
}
