/**
 * Options of `HttpCompletionsBackend` and their defaults, defined once here: the `--server-*`
 * flags of `mempo rollout` / `mempo eval` (src/cli/options.ts) and `connectCompletionsServers`
 * fall back to the same values.
 */
import type { TextCodec } from '../../contracts';
import { serverError } from '../../errors';
import { isHttpUrl } from '../../validate';
import { DEFAULTS } from '../../options';

/**
 * The environment variable holding the bearer token of `mempo serve` (its `--token`), which the
 * client also sends to every server when no `apiKey` is given (vLLM's and SGLang's `--api-key`
 * check the same header).
 */
export const SERVER_TOKEN_ENV = 'MEMPO_SERVE_TOKEN';

/** `f` sending `Authorization: Bearer <apiKey>` with every request; `f` itself without a key. */
export function withBearer(f: typeof fetch, apiKey: string | undefined): typeof fetch {
  if (apiKey === undefined || apiKey === '') return f;
  return (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set('authorization', `Bearer ${apiKey}`);
    return f(input, { ...init, headers });
  };
}

/** `options.apiKey`, else the environment's SERVER_TOKEN_ENV. */
export function apiKeyOf(options: { apiKey?: string }): string | undefined {
  return options.apiKey ?? process.env[SERVER_TOKEN_ENV];
}

export type CompletionsApi = 'vllm' | 'sglang';
export const COMPLETIONS_APIS: readonly CompletionsApi[] = ['vllm', 'sglang'];

/** The engine client's defaults (each documented on `HttpCompletionsOptions`; the shared ones live in src/options.ts). */
export const HTTP_ENGINE_DEFAULTS = Object.freeze({
  ...DEFAULTS.server,
  sendSeed: true,
  /** Longest wait for GET /v1/models when connecting (ms); a shorter timeoutMs wins. */
  modelsTimeoutMs: 10_000,
});

export interface HttpCompletionsOptions {
  /** Model name sent with every vLLM request and checked in every vLLM answer (SGLang answers carry none). */
  model: string;
  /**
   * Other names a vLLM answer may carry for `model`: vLLM answers with its first
   * `--served-model-name` whichever alias the request named, so `connectCompletionsServers` passes
   * every id GET /v1/models lists. Default: none (only `model`).
   */
  modelAliases?: readonly string[];
  codec: TextCodec;
  maxContextTokens: number;
  /** Server dialect (default 'vllm'). */
  api?: CompletionsApi;
  /** Most requests in flight per endpoint (default 8). */
  maxInFlight?: number;
  /** Per-request timeout in ms (default 120000). */
  timeoutMs?: number;
  /** Retries after the first try (default 3); backoff starts at `backoffMs` (default 200) and doubles. */
  retries?: number;
  backoffMs?: number;
  /** Consecutive failures after which an endpoint leaves rotation (default 3), and for how long (ms, default 30000). */
  failureThreshold?: number;
  cooldownMs?: number;
  /** Scoring items sent in one request (default 8). */
  scoreBatchSize?: number;
  /** Send a per-request sampling seed (default true): vLLM `seed`, SGLang `sampling_params.sampling_seed`. */
  sendSeed?: boolean;
  /** Ids that end a generation as 'eos' rather than 'stop' (default: the embedded tokenizer's eos, 0). */
  eosTokenIds?: readonly number[];
  /** Bearer token sent with every request (`mempo serve --token`, vLLM's / SGLang's `--api-key`); default: $MEMPO_SERVE_TOKEN, else none. */
  apiKey?: string;
  /** fetch implementation (default: global fetch). */
  fetch?: typeof fetch;
}

/** The endpoint pool's settings (src/engines/http/pool.ts). */
export interface PoolSettings {
  maxInFlight: number;
  timeoutMs: number;
  retries: number;
  backoffMs: number;
  failureThreshold: number;
  cooldownMs: number;
  fetch: typeof fetch;
}

export interface ResolvedOptions {
  api: CompletionsApi;
  pool: PoolSettings;
  scoreBatchSize: number;
  sendSeed: boolean;
}

/** Checks the endpoint URLs and options, in the order the constructor always has, and fills in the defaults. */
export function resolveEngineOptions(urls: readonly string[], options: HttpCompletionsOptions): ResolvedOptions {
  if (urls.length === 0) throw serverError('HttpCompletionsBackend needs at least one endpoint URL');
  const api = options.api ?? HTTP_ENGINE_DEFAULTS.api;
  if (!COMPLETIONS_APIS.includes(api)) throw serverError(`Unknown server api ${JSON.stringify(api)}; expected one of ${COMPLETIONS_APIS.join(', ')}`);
  for (const u of urls) {
    if (!isHttpUrl(u)) throw serverError(`Expected an http(s) URL for a server endpoint but received ${JSON.stringify(u)}`);
  }
  const D = HTTP_ENGINE_DEFAULTS;
  const posInt = (v: number | undefined, name: string, def: number, min: number) => {
    const x = v ?? def;
    if (!Number.isInteger(x) || x < min) throw serverError(`HttpCompletionsBackend option ${name}: expected an integer >= ${min}, received ${JSON.stringify(v)}`);
    return x;
  };
  const pool: PoolSettings = {
    maxInFlight: posInt(options.maxInFlight, 'maxInFlight', D.maxInFlight, 1),
    timeoutMs: posInt(options.timeoutMs, 'timeoutMs', D.timeoutMs, 1),
    retries: posInt(options.retries, 'retries', D.retries, 0),
    backoffMs: posInt(options.backoffMs, 'backoffMs', D.backoffMs, 0),
    failureThreshold: posInt(options.failureThreshold, 'failureThreshold', D.failureThreshold, 1),
    cooldownMs: posInt(options.cooldownMs, 'cooldownMs', D.cooldownMs, 0),
    fetch: withBearer(options.fetch ?? fetch, apiKeyOf(options)),
  };
  return {
    api,
    pool,
    scoreBatchSize: posInt(options.scoreBatchSize, 'scoreBatchSize', D.scoreBatchSize, 1),
    sendSeed: options.sendSeed ?? D.sendSeed,
  };
}
