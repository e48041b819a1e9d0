/**
 * `HttpCompletionsBackend`: the pipeline's `Generator` and `TargetScorer` over one or more
 * inference servers, in one of two dialects:
 *
 * - `'vllm'` (default): the OpenAI completions API as vLLM serves it, `POST /v1/completions` with
 *   token-id prompts. Generation reads the sampled ids from `choices[].token_ids`
 *   (`return_token_ids`, vLLM >= 0.10.2) or, failing that, from `logprobs.tokens` written as
 *   `token_id:N` (`return_tokens_as_token_ids`). Scoring sends context + target as one prompt
 *   with `prompt_logprobs: 0` and reads `choices[k].prompt_logprobs` (several items per request:
 *   `prompt` is then a list of token-id lists, one choice per item).
 * - `'sglang'`: SGLang's native `POST /generate` (field shapes as of SGLang v0.5.3,
 *   `python/sglang/srt/managers/io_struct.py::GenerateReqInput` and `tokenizer_manager.py`):
 *   `{ input_ids, sampling_params: { temperature, top_p, top_k, max_new_tokens, stop, n,
 *   sampling_seed, no_stop_trim, skip_special_tokens }, return_logprob, logprob_start_len }`,
 *   answered by `{ text, output_ids, meta_info: { finish_reason: { type: 'stop' | 'length',
 *   matched? }, prompt_tokens, completion_tokens, output_token_logprobs: [[logprob, id, text |
 *   null], ...], input_token_logprobs: same shape } }` (an array of those for a batch of
 *   prompts). The first `input_token_logprobs` entry is always `null` (SGLang pads it), so
 *   scoring asks from `logprob_start_len = context length - 1` and reads entries 1.. as the
 *   target's log-probs.
 *
 * Requests go round robin over the endpoints with a bounded number in flight per endpoint, a
 * timeout, retries with exponential backoff on 429 / 5xx / connection errors / timeouts, and an
 * endpoint that fails `failureThreshold` times in a row taken out of rotation for `cooldownMs`.
 * Every error names the endpoint and the request or item; `stats()` counts requests, failures
 * and retries per endpoint.
 *
 * A request that fails for good — an answer that is wrong rather than missing (HTTP 4xx,
 * malformed JSON, missing log-probs, token ids that do not match the request, another model's
 * name), or retries exhausted — fails only its own generation request or scoring items: when any
 * did, `generate` / `score` throw `PartialResultsError` with the results of the others and an
 * error per failed index, and the rollout records only those trajectories as failed.
 *
 * Seeds: request i of a `generate` call carries `streamSeed(params.seed, i)`, the seed whose
 * stream 0 is stream i of `params.seed` in mempo's sampler (`createRng`); `mempo serve` samples a
 * single-sequence request from stream 0 of its seed, so a seeded run over `mempo serve` draws the
 * same random numbers per trajectory as the in-process `LocalModel`.
 */
import { PartialResultsError, type GenerateParams, type GenerationFinish, type GenerationOutput, type GenerationRequest, type Generator, type ScoringItem, type TargetScorer, type TextCodec } from '../../contracts';
import { EOS_TOKEN_ID } from '../../protocol/embedded-ids';

export type CompletionsApi = 'vllm' | 'sglang';
export const COMPLETIONS_APIS: readonly CompletionsApi[] = ['vllm', 'sglang'];

export interface HttpCompletionsOptions {
  /** Model name sent with every vLLM request and checked in every vLLM answer (SGLang answers carry none). */
  model: string;
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
  /** fetch implementation (default: global fetch). */
  fetch?: typeof fetch;
}

/** A failure that another try (maybe on another endpoint) could fix. */
class RetryableError extends Error {}

export class CompletionsBackendError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CompletionsBackendError';
  }
}

export interface EndpointStats {
  url: string;
  /** Requests sent to this endpoint (each try counts). */
  requests: number;
  /** Tries that failed with a retryable error (429, 5xx, connection, timeout). */
  failures: number;
  /** Times it was taken out of rotation. */
  cooldowns: number;
  lastError: string | null;
}

export interface BackendStats {
  api: CompletionsApi;
  model: string;
  requests: number;
  /** Tries repeated after a retryable failure. */
  retries: number;
  /** Requests that failed for good (after every retry, or with an error that is not retried). */
  failedRequests: number;
  /** Generation requests and scoring items that failed for good (their trajectories are recorded as failed). */
  failedGenerations: number;
  failedItems: number;
  generationRequests: number;
  scoringRequests: number;
  scoredItems: number;
  endpoints: EndpointStats[];
}

interface Endpoint {
  url: string;
  inFlight: number;
  consecutive: number;
  downUntil: number;
  waiters: (() => void)[];
  stats: EndpointStats;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Base URL of a server (scheme, host, port and any path prefix), without the API path. */
export function serverBaseUrl(u: string): string {
  return u.replace(/\/+$/, '').replace(/\/(v1\/completions|v1|generate)$/, '');
}

/** The endpoint a dialect posts to, from a base URL or a full endpoint URL. */
export function endpointUrl(u: string, api: CompletionsApi): string {
  const base = serverBaseUrl(u);
  return api === 'sglang' ? `${base}/generate` : `${base}/v1/completions`;
}

/**
 * The seed whose stream 0 equals stream `stream` of `seed` in mempo's sampler: `createRng(seed,
 * stream)` starts from `low32(seed) ^ imul(stream + 1, K) ^ high(seed)`, so this seed, below 2^32,
 * starts `createRng(·, 0)` at the same state (src/runtime/rng.ts; test/serve-e2e.test.ts checks it).
 */
export function streamSeed(seed: number, stream: number): number {
  const K = 0x27d4eb2f;
  return (Math.floor(seed) ^ Math.imul(stream + 1, K) ^ Math.floor(seed / 4294967296) ^ K) >>> 0;
}

/**
 * Sampling settings of scoring requests: temperature 1 and no top-p / top-k / penalty, so that
 * servers that post-process log-probs (vLLM --logprobs-mode processed_logprobs, SGLang's
 * temperature-normalised log-probs) still report the model's own log π. The one generated token
 * is not used.
 */
const NEUTRAL_SCORING = {
  vllm: { max_tokens: 1, temperature: 1, top_p: 1, top_k: -1, repetition_penalty: 1 },
  sglang: { max_new_tokens: 1, temperature: 1, top_p: 1, top_k: -1, repetition_penalty: 1 },
};

const isTokenId = (x: unknown): x is number => typeof x === 'number' && Number.isInteger(x) && x >= 0;

export class HttpCompletionsBackend implements Generator, TargetScorer {
  readonly codec: TextCodec;
  readonly maxContextTokens: number;
  readonly api: CompletionsApi;
  readonly model: string;
  private readonly endpoints: Endpoint[];
  private next = 0;
  private readonly eos: Set<number>;
  private readonly o: Required<Omit<HttpCompletionsOptions, 'codec' | 'maxContextTokens' | 'api' | 'model' | 'eosTokenIds'>>;
  private readonly counts = { requests: 0, retries: 0, failedRequests: 0, failedGenerations: 0, failedItems: 0, generationRequests: 0, scoringRequests: 0, scoredItems: 0 };

  constructor(urls: readonly string[], options: HttpCompletionsOptions) {
    if (urls.length === 0) throw new CompletionsBackendError('HttpCompletionsBackend needs at least one endpoint URL');
    const api = options.api ?? 'vllm';
    if (!COMPLETIONS_APIS.includes(api)) throw new CompletionsBackendError(`Unknown server api ${JSON.stringify(api)}; expected one of ${COMPLETIONS_APIS.join(', ')}`);
    for (const u of urls) {
      let p: URL | null = null;
      try {
        p = new URL(u);
      } catch {
        p = null;
      }
      if (p === null || (p.protocol !== 'http:' && p.protocol !== 'https:')) throw new CompletionsBackendError(`Expected an http(s) URL for a server endpoint but received ${JSON.stringify(u)}`);
    }
    const posInt = (v: number | undefined, name: string, def: number, min: number) => {
      const x = v ?? def;
      if (!Number.isInteger(x) || x < min) throw new CompletionsBackendError(`HttpCompletionsBackend option ${name}: expected an integer >= ${min}, received ${JSON.stringify(v)}`);
      return x;
    };
    this.api = api;
    this.model = options.model;
    this.endpoints = urls.map((u) => {
      const url = endpointUrl(u, api);
      return { url, inFlight: 0, consecutive: 0, downUntil: 0, waiters: [], stats: { url, requests: 0, failures: 0, cooldowns: 0, lastError: null } };
    });
    this.codec = options.codec;
    this.maxContextTokens = options.maxContextTokens;
    this.eos = new Set(options.eosTokenIds ?? [EOS_TOKEN_ID]);
    this.o = {
      maxInFlight: posInt(options.maxInFlight, 'maxInFlight', 8, 1),
      timeoutMs: posInt(options.timeoutMs, 'timeoutMs', 120_000, 1),
      retries: posInt(options.retries, 'retries', 3, 0),
      backoffMs: posInt(options.backoffMs, 'backoffMs', 200, 0),
      failureThreshold: posInt(options.failureThreshold, 'failureThreshold', 3, 1),
      cooldownMs: posInt(options.cooldownMs, 'cooldownMs', 30_000, 0),
      scoreBatchSize: posInt(options.scoreBatchSize, 'scoreBatchSize', 8, 1),
      sendSeed: options.sendSeed ?? true,
      fetch: options.fetch ?? fetch,
    };
  }

  /** The endpoint URLs (normalised to .../v1/completions or .../generate). */
  get urls(): string[] {
    return this.endpoints.map((e) => e.url);
  }

  /** Requests, failures and retries so far, per endpoint. */
  stats(): BackendStats {
    return { api: this.api, model: this.model, ...this.counts, endpoints: this.endpoints.map((e) => ({ ...e.stats })) };
  }

  /** Next endpoint in rotation, skipping those cooling down (unless all are). */
  private pick(exclude: Set<Endpoint>): Endpoint {
    const now = Date.now();
    const n = this.endpoints.length;
    for (let k = 0; k < n; k++) {
      const e = this.endpoints[(this.next + k) % n] as Endpoint;
      if (e.downUntil > now || exclude.has(e)) continue;
      this.next = (this.next + k + 1) % n;
      return e;
    }
    // Every endpoint is down or was just tried: prefer one not just tried, then the earliest back.
    const order = [...this.endpoints].sort((a, b) => Number(exclude.has(a)) - Number(exclude.has(b)) || a.downUntil - b.downUntil);
    const e = order[0] as Endpoint;
    this.next = (this.endpoints.indexOf(e) + 1) % n;
    return e;
  }

  private async acquire(e: Endpoint): Promise<void> {
    while (e.inFlight >= this.o.maxInFlight) await new Promise<void>((r) => e.waiters.push(r));
    e.inFlight++;
  }

  private release(e: Endpoint): void {
    e.inFlight--;
    e.waiters.shift()?.();
  }

  /** One try: the parsed JSON answer of a 200, or an error naming the endpoint and `what`. */
  private async post(e: Endpoint, body: string, what: string): Promise<unknown> {
    await this.acquire(e);
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), this.o.timeoutMs);
    e.stats.requests++;
    this.counts.requests++;
    try {
      let res: Response;
      let text: string;
      try {
        res = await this.o.fetch(e.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: ctl.signal });
        text = await res.text();
      } catch (err) {
        const c = (err as Error & { cause?: { code?: string; message?: string } }).cause;
        const why = ctl.signal.aborted ? `no answer within ${this.o.timeoutMs} ms` : `connection failed: ${c?.code ?? c?.message ?? (err as Error).message}`;
        throw new RetryableError(`${e.url} (${what}): ${why}`);
      }
      if (res.status === 429 || res.status >= 500) throw new RetryableError(`${e.url} (${what}): HTTP ${res.status}: ${text.slice(0, 300)}`);
      if (res.status !== 200) throw new CompletionsBackendError(`${e.url} (${what}): HTTP ${res.status}: ${text.slice(0, 300)}`);
      try {
        return JSON.parse(text) as unknown;
      } catch {
        throw new CompletionsBackendError(`${e.url} (${what}): the answer is not valid JSON: ${text.slice(0, 200)}`);
      }
    } finally {
      clearTimeout(timer);
      this.release(e);
    }
  }

  /** Posts with retries; `check` validates the answer (its errors are not retried). */
  private async request<T>(body: unknown, what: string, check: (j: unknown, where: string) => T): Promise<T> {
    const text = JSON.stringify(body);
    const tried = new Set<Endpoint>();
    let last: Error | null = null;
    for (let attempt = 0; attempt <= this.o.retries; attempt++) {
      if (attempt > 0) {
        this.counts.retries++;
        await sleep(this.o.backoffMs * 2 ** (attempt - 1));
      }
      if (tried.size >= this.endpoints.length) tried.clear();
      const e = this.pick(tried);
      tried.add(e);
      try {
        const j = await this.post(e, text, what);
        e.consecutive = 0;
        const where = `${e.url} (${what})`;
        try {
          return check(j, where);
        } catch (err) {
          if (err instanceof CompletionsBackendError) throw err;
          throw new CompletionsBackendError(`${where}: could not read the answer: ${(err as Error).message}`);
        }
      } catch (err) {
        if (!(err instanceof RetryableError)) {
          this.counts.failedRequests++;
          throw err;
        }
        last = err;
        e.stats.failures++;
        e.stats.lastError = err.message;
        e.consecutive++;
        if (e.consecutive >= this.o.failureThreshold) {
          e.downUntil = Date.now() + this.o.cooldownMs;
          e.consecutive = 0;
          e.stats.cooldowns++;
        }
      }
    }
    this.counts.failedRequests++;
    throw new CompletionsBackendError(`${what}: failed after ${this.o.retries + 1} tries; last error: ${last?.message ?? 'unknown'}`);
  }

  /**
   * One request per generation request, all in flight together (bounded per endpoint). Throws
   * `PartialResultsError` when some failed for good, once every request has settled.
   */
  async generate(requests: readonly GenerationRequest[], params: GenerateParams): Promise<GenerationOutput[]> {
    const settled = await Promise.allSettled(
      requests.map((r, i) => {
        const what = `generation request ${i} (${r.tag.uid} sample ${r.tag.sample} round ${r.tag.round})`;
        const seed = streamSeed(params.seed, i);
        this.counts.generationRequests++;
        if (this.api === 'sglang') {
          const body = {
            input_ids: [...r.ids],
            sampling_params: {
              temperature: params.temperature,
              top_p: params.topP,
              top_k: params.topK > 0 ? params.topK : -1,
              // Explicit, so that the model's generation_config.json defaults (e.g. Qwen's 1.05) do not apply.
              repetition_penalty: 1,
              max_new_tokens: r.maxNewTokens,
              stop: [...params.stop],
              n: 1,
              no_stop_trim: true,
              skip_special_tokens: false,
              ...(this.o.sendSeed ? { sampling_seed: seed } : {}),
            },
            return_logprob: true,
            stream: false,
          };
          return this.request(body, what, (j, where) => this.parseSglangGeneration(j, where, r));
        }
        const body = {
          model: this.model,
          prompt: [...r.ids],
          n: 1,
          temperature: params.temperature,
          top_p: params.topP,
          // top_k and repetition_penalty explicit, so that the model's generation_config.json defaults do not apply.
          top_k: params.topK > 0 ? params.topK : -1,
          repetition_penalty: 1,
          max_tokens: r.maxNewTokens,
          stop: [...params.stop],
          include_stop_str_in_output: true,
          skip_special_tokens: false,
          logprobs: 0,
          ...(this.o.sendSeed ? { seed } : {}),
          return_tokens_as_token_ids: true,
          return_token_ids: true,
        };
        return this.request(body, what, (j, where) => this.parseVllmGeneration(j, where, r));
      }),
    );
    const results: (GenerationOutput | undefined)[] = new Array<GenerationOutput | undefined>(requests.length).fill(undefined);
    const failures = new Map<number, string>();
    settled.forEach((x, i) => {
      if (x.status === 'fulfilled') results[i] = x.value;
      else if (x.reason instanceof CompletionsBackendError) failures.set(i, x.reason.message);
      else throw x.reason;
    });
    if (failures.size > 0) {
      this.counts.failedGenerations += failures.size;
      throw new PartialResultsError(results, failures, 'generation requests');
    }
    return results as GenerationOutput[];
  }

  private finish(ids: readonly number[], stopped: boolean): GenerationFinish {
    if (!stopped) return 'length';
    return ids.length > 0 && this.eos.has(ids[ids.length - 1]!) ? 'eos' : 'stop';
  }

  private vllmAnswer(j: unknown, where: string): Record<string, unknown> {
    if (typeof j !== 'object' || j === null || Array.isArray(j)) throw new CompletionsBackendError(`${where}: the answer is not a JSON object`);
    const o = j as Record<string, unknown>;
    if (o['model'] !== this.model) throw new CompletionsBackendError(`${where}: the answer comes from model ${JSON.stringify(o['model'])}, expected ${JSON.stringify(this.model)}`);
    if (!Array.isArray(o['choices'])) throw new CompletionsBackendError(`${where}: the answer has no "choices" array`);
    return o;
  }

  private parseVllmGeneration(j: unknown, where: string, r: GenerationRequest): GenerationOutput {
    const c = (this.vllmAnswer(j, where)['choices'] as Record<string, unknown>[])[0];
    if (c === undefined || typeof c !== 'object' || c === null) throw new CompletionsBackendError(`${where}: the answer has no choice`);
    const lp = c['logprobs'] as { token_logprobs?: unknown; tokens?: unknown } | null | undefined;
    const fromTokens = Array.isArray(lp?.tokens) ? (lp!.tokens as unknown[]).map((t) => (typeof t === 'string' && /^token_id:\d+$/.test(t) ? Number(t.slice(9)) : null)) : null;
    let ids: number[];
    if (Array.isArray(c['token_ids'])) {
      const t = c['token_ids'] as unknown[];
      if (!t.every(isTokenId)) throw new CompletionsBackendError(`${where}: "token_ids" is not an array of token ids`);
      ids = t as number[];
      if (fromTokens && fromTokens.every((x) => x !== null) && (fromTokens.length !== ids.length || fromTokens.some((x, k) => x !== ids[k]))) {
        throw new CompletionsBackendError(`${where}: "token_ids" and logprobs.tokens disagree`);
      }
    } else if (fromTokens && fromTokens.every((x) => x !== null)) {
      ids = fromTokens as number[];
    } else {
      throw new CompletionsBackendError(`${where}: the choice has neither "token_ids" nor logprobs.tokens as "token_id:N" (start vLLM >= 0.10.2, or one that honours return_tokens_as_token_ids)`);
    }
    const pids = c['prompt_token_ids'];
    if (Array.isArray(pids) && (pids.length !== r.ids.length || pids.some((x, k) => x !== r.ids[k]))) {
      throw new CompletionsBackendError(`${where}: "prompt_token_ids" do not match the ${r.ids.length} prompt tokens sent`);
    }
    if (ids.length > r.maxNewTokens) throw new CompletionsBackendError(`${where}: ${ids.length} tokens returned, more than max_tokens ${r.maxNewTokens}`);
    const lps = lp?.token_logprobs;
    if (!Array.isArray(lps) || lps.length !== ids.length || lps.some((x) => typeof x !== 'number')) throw new CompletionsBackendError(`${where}: missing or malformed logprobs.token_logprobs (expected ${ids.length} numbers)`);
    const fr = c['finish_reason'];
    if (fr !== 'length' && fr !== 'stop') throw new CompletionsBackendError(`${where}: unknown finish_reason ${JSON.stringify(fr)}`);
    return { tokenIds: ids, logprobs: Float32Array.from(lps as number[]), finishReason: this.finish(ids, fr === 'stop') };
  }

  /** SGLang answers one object per prompt and sample; a single prompt with n = 1 may come as an object or a one-element array. */
  private sglangAnswers(j: unknown, where: string, count: number): Record<string, unknown>[] {
    const arr = Array.isArray(j) ? j : [j];
    if (arr.length !== count) throw new CompletionsBackendError(`${where}: ${arr.length} answers for ${count} prompts`);
    return arr.map((a, k) => {
      if (typeof a !== 'object' || a === null || Array.isArray(a)) throw new CompletionsBackendError(`${where}: answer ${k} is not a JSON object`);
      const m = (a as Record<string, unknown>)['meta_info'];
      if (typeof m !== 'object' || m === null) throw new CompletionsBackendError(`${where}: answer ${k} has no "meta_info" object`);
      return a as Record<string, unknown>;
    });
  }

  /** [[logprob, id, text], ...] → checked pairs; `nullFirst` allows a null log-prob in the first entry. */
  private static logprobTuples(v: unknown, where: string, field: string, nullFirst: boolean): { lp: number | null; id: number }[] {
    if (!Array.isArray(v)) throw new CompletionsBackendError(`${where}: meta_info.${field} is missing (send return_logprob)`);
    return v.map((e, k) => {
      if (!Array.isArray(e) || e.length < 2 || !isTokenId(e[1]) || !(typeof e[0] === 'number' || (e[0] === null && nullFirst && k === 0))) {
        throw new CompletionsBackendError(`${where}: meta_info.${field}[${k}] is not [logprob, token_id, text]: ${JSON.stringify(e)?.slice(0, 80)}`);
      }
      return { lp: e[0] as number | null, id: e[1] as number };
    });
  }

  private parseSglangGeneration(j: unknown, where: string, r: GenerationRequest): GenerationOutput {
    const a = this.sglangAnswers(j, where, 1)[0]!;
    const meta = a['meta_info'] as Record<string, unknown>;
    const tuples = HttpCompletionsBackend.logprobTuples(meta['output_token_logprobs'], where, 'output_token_logprobs', false);
    const ids = tuples.map((t) => t.id);
    const out = a['output_ids'];
    if (out !== undefined) {
      if (!Array.isArray(out) || !out.every(isTokenId)) throw new CompletionsBackendError(`${where}: "output_ids" is not an array of token ids`);
      if (out.length !== ids.length || out.some((x, k) => x !== ids[k])) throw new CompletionsBackendError(`${where}: "output_ids" and meta_info.output_token_logprobs disagree`);
    }
    if (ids.length > r.maxNewTokens) throw new CompletionsBackendError(`${where}: ${ids.length} tokens returned, more than max_new_tokens ${r.maxNewTokens}`);
    const fr = meta['finish_reason'] as { type?: unknown } | null | undefined;
    const type = typeof fr === 'object' && fr !== null ? fr.type : fr;
    if (type !== 'stop' && type !== 'length') throw new CompletionsBackendError(`${where}: meta_info.finish_reason ${JSON.stringify(fr)}, expected type 'stop' or 'length'`);
    return { tokenIds: ids, logprobs: Float32Array.from(tuples.map((t) => t.lp as number)), finishReason: this.finish(ids, type === 'stop') };
  }

  /** How errors name scoring item k: its index in the call and, when tagged, its trajectory, round and context. */
  private static itemName(items: readonly ScoringItem[], k: number): string {
    const t = items[k]?.tag;
    return t ? `scoring item ${k} (${t.uid} sample ${t.sample} round ${t.round}, ${t.context} context)` : `scoring item ${k}`;
  }

  /**
   * All items in one logical batch: groups of `scoreBatchSize` items per request, all in flight
   * together. Throws `PartialResultsError` when some items failed for good (each error names the
   * endpoint and the item), once every request has settled.
   */
  async score(items: readonly ScoringItem[]): Promise<Float32Array[]> {
    const out: (Float32Array | undefined)[] = new Array<Float32Array | undefined>(items.length).fill(undefined);
    const failures = new Map<number, string>();
    const name = (k: number) => HttpCompletionsBackend.itemName(items, k);
    // Items with an empty target need no request; the others go out in groups of scoreBatchSize.
    const todo: { k: number; prompt: number[]; ctx: number; tgt: readonly number[] }[] = [];
    const limit = this.maxContextTokens - 1; // servers need room for the one token they generate
    for (let k = 0; k < items.length; k++) {
      const it = items[k]!;
      if (it.targetIds.length === 0) {
        out[k] = new Float32Array(0);
        continue;
      }
      // Too long: drop the context's first tokens, as LocalModel's scorer does (truncate: 'left').
      const over = Math.max(0, it.contextIds.length + it.targetIds.length - limit);
      const ctx = it.contextIds.slice(over);
      if (ctx.length === 0) {
        failures.set(k, `${name(k)}: ${it.contextIds.length === 0 ? 'empty context' : `the target alone (${it.targetIds.length} tokens) does not fit the model's ${this.maxContextTokens} positions`}`);
        continue;
      }
      todo.push({ k, prompt: [...ctx, ...it.targetIds], ctx: ctx.length, tgt: it.targetIds });
    }
    const groups: (typeof todo)[] = [];
    for (let g = 0; g < todo.length; g += this.o.scoreBatchSize) groups.push(todo.slice(g, g + this.o.scoreBatchSize));
    // Per item of a group: its log-probs, or the error that names the endpoint and the item.
    type ItemResult = Float32Array | { error: string };
    const perItem = (f: () => Float32Array): ItemResult => {
      try {
        return f();
      } catch (err) {
        if (!(err instanceof CompletionsBackendError)) throw err;
        return { error: err.message };
      }
    };
    const settled = await Promise.allSettled(
      groups.map((group) => {
        const first = group[0]!.k;
        const lastK = group[group.length - 1]!.k;
        const what = group.length === 1 ? name(first) : `scoring items ${first}..${lastK}`;
        this.counts.scoringRequests++;
        this.counts.scoredItems += group.length;
        const itemWhere = (where: string, k: number) => (group.length === 1 ? where : `${where.slice(0, where.lastIndexOf(' ('))} (${name(k)})`);
        let sent: Promise<ItemResult[]>;
        if (this.api === 'sglang') {
          const body = {
            input_ids: group.map((x) => x.prompt),
            sampling_params: NEUTRAL_SCORING.sglang,
            return_logprob: true,
            logprob_start_len: group.map((x) => x.ctx - 1),
            stream: false,
          };
          sent = this.request(body, what, (j, where) => {
            const answers = this.sglangAnswers(j, where, group.length);
            return group.map((x, g) => perItem(() => {
              const w = itemWhere(where, x.k);
              const meta = answers[g]!['meta_info'] as Record<string, unknown>;
              const tuples = HttpCompletionsBackend.logprobTuples(meta['input_token_logprobs'], w, 'input_token_logprobs', true);
              if (tuples.length !== x.tgt.length + 1) throw new CompletionsBackendError(`${w}: ${tuples.length} input_token_logprobs from logprob_start_len ${x.ctx - 1} of a ${x.prompt.length}-token prompt (expected ${x.tgt.length + 1})`);
              const lp = new Float32Array(x.tgt.length);
              for (let t = 0; t < lp.length; t++) {
                const e = tuples[t + 1]!;
                if (e.id !== x.tgt[t]) throw new CompletionsBackendError(`${w}: input_token_logprobs[${t + 1}] is for token ${e.id}, the request has ${x.tgt[t]} there`);
                lp[t] = e.lp as number;
              }
              return lp;
            }));
          });
        } else {
          const body = {
            model: this.model,
            prompt: group.map((x) => x.prompt),
            ...NEUTRAL_SCORING.vllm,
            prompt_logprobs: 0,
            n: 1,
          };
          sent = this.request(body, what, (j, where) => {
            const choices = this.vllmAnswer(j, where)['choices'] as Record<string, unknown>[];
            if (choices.length !== group.length) throw new CompletionsBackendError(`${where}: ${choices.length} choices for ${group.length} prompts`);
            const byIndex = new Map<number, Record<string, unknown>>();
            choices.forEach((c, n) => byIndex.set(typeof c?.['index'] === 'number' ? (c['index'] as number) : n, c));
            return group.map((x, g) => perItem(() => {
              const w = itemWhere(where, x.k);
              const c = byIndex.get(g);
              const pl = c?.['prompt_logprobs'];
              if (!Array.isArray(pl)) throw new CompletionsBackendError(`${w}: choice ${g} has no "prompt_logprobs" array`);
              if (pl.length !== x.prompt.length) throw new CompletionsBackendError(`${w}: ${pl.length} prompt_logprobs for a ${x.prompt.length}-token prompt`);
              const lp = new Float32Array(x.tgt.length);
              for (let t = 0; t < lp.length; t++) {
                const pos = x.ctx + t;
                const entry = pl[pos] as Record<string, { logprob?: unknown }> | null;
                const id = x.prompt[pos]!;
                const v = entry?.[String(id)]?.logprob;
                if (typeof v !== 'number') {
                  const keys = entry && typeof entry === 'object' ? Object.keys(entry).join(', ') : String(entry);
                  throw new CompletionsBackendError(`${w}: prompt_logprobs[${pos}] has no log-prob for the requested token ${id} (has: ${keys})`);
                }
                lp[t] = v;
              }
              return lp;
            }));
          });
        }
        return sent.then(
          (res) => res.forEach((r, g) => {
            const k = group[g]!.k;
            if (r instanceof Float32Array) out[k] = r;
            else failures.set(k, r.error);
          }),
          (err: unknown) => {
            if (!(err instanceof CompletionsBackendError)) throw err;
            // The whole request failed: every item of it, each error naming the item and the request.
            for (const x of group) failures.set(x.k, group.length === 1 ? err.message : `${name(x.k)}: ${err.message}`);
          },
        );
      }),
    );
    for (const x of settled) if (x.status === 'rejected') throw x.reason;
    if (failures.size > 0) {
      this.counts.failedItems += failures.size;
      const ordered = new Map([...failures].sort((a, b) => a[0] - b[0]));
      throw new PartialResultsError(out, ordered, 'scoring items');
    }
    return out as Float32Array[];
  }
}
