/**
 * `HttpCompletionsBackend`: the pipeline's `Generator` and `TargetScorer` over one or more
 * OpenAI / vLLM compatible `/v1/completions` endpoints (`mempo serve` or vLLM), with round-robin
 * dispatch, bounded in-flight requests per endpoint, a timeout, retries with backoff on 429 / 5xx /
 * connection errors, and endpoints that fail repeatedly taken out of rotation for a while.
 *
 * Scoring sends context + target as one prompt with `prompt_logprobs` and reads back the target
 * positions' log-probs (teacher forcing).
 */
import type {
  GenerateParams,
  GenerationFinish,
  GenerationOutput,
  GenerationRequest,
  Generator,
  ScoringItem,
  TargetScorer,
  TextCodec,
} from '../rollout/generator';
import { EOS_TOKEN_ID } from '../agent/protocol';

export interface HttpCompletionsOptions {
  /** Model name sent with every request and checked in every answer. */
  model: string;
  codec: TextCodec;
  maxContextTokens: number;
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
  /** fetch implementation (default: global fetch). */
  fetch?: typeof fetch;
}

/** A failure that another try (maybe on another endpoint) could fix. */
class RetryableError extends Error {}

export class CompletionsBackendError extends Error {}

interface Endpoint {
  url: string;
  inFlight: number;
  failures: number;
  downUntil: number;
  waiters: (() => void)[];
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function completionsUrl(u: string): string {
  const base = u.replace(/\/+$/, '');
  if (base.endsWith('/v1/completions')) return base;
  if (base.endsWith('/v1')) return `${base}/completions`;
  return `${base}/v1/completions`;
}

interface Choice {
  index?: number;
  token_ids?: unknown;
  logprobs?: { token_logprobs?: unknown; tokens?: unknown } | null;
  finish_reason?: unknown;
  stop_reason?: unknown;
}

export class HttpCompletionsBackend implements Generator, TargetScorer {
  readonly codec: TextCodec;
  readonly maxContextTokens: number;
  private readonly endpoints: Endpoint[];
  private next = 0;
  private readonly o: Required<Omit<HttpCompletionsOptions, 'codec' | 'maxContextTokens'>>;

  constructor(urls: readonly string[], options: HttpCompletionsOptions) {
    if (urls.length === 0) throw new Error('HttpCompletionsBackend needs at least one endpoint URL');
    this.endpoints = urls.map((u) => ({ url: completionsUrl(u), inFlight: 0, failures: 0, downUntil: 0, waiters: [] }));
    this.codec = options.codec;
    this.maxContextTokens = options.maxContextTokens;
    this.o = {
      model: options.model,
      maxInFlight: options.maxInFlight ?? 8,
      timeoutMs: options.timeoutMs ?? 120_000,
      retries: options.retries ?? 3,
      backoffMs: options.backoffMs ?? 200,
      failureThreshold: options.failureThreshold ?? 3,
      cooldownMs: options.cooldownMs ?? 30_000,
      fetch: options.fetch ?? fetch,
    };
  }

  /** The endpoint URLs (normalised to .../v1/completions). */
  get urls(): string[] {
    return this.endpoints.map((e) => e.url);
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

  private async post(e: Endpoint, body: unknown, what: string): Promise<Record<string, unknown>> {
    await this.acquire(e);
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), this.o.timeoutMs);
    try {
      let res: Response;
      try {
        res = await this.o.fetch(e.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: ctl.signal });
      } catch (err) {
        throw new RetryableError(`${e.url} (${what}): ${ctl.signal.aborted ? `no answer within ${this.o.timeoutMs} ms` : `connection failed: ${(err as Error).message}`}`);
      }
      const text = await res.text().catch((err: Error) => {
        throw new RetryableError(`${e.url} (${what}): reading the answer failed: ${err.message}`);
      });
      if (res.status === 429 || res.status >= 500) throw new RetryableError(`${e.url} (${what}): HTTP ${res.status}: ${text.slice(0, 300)}`);
      if (res.status !== 200) throw new CompletionsBackendError(`${e.url} (${what}): HTTP ${res.status}: ${text.slice(0, 300)}`);
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        throw new CompletionsBackendError(`${e.url} (${what}): the answer is not valid JSON: ${text.slice(0, 200)}`);
      }
      if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new CompletionsBackendError(`${e.url} (${what}): the answer is not a JSON object`);
      const j = json as Record<string, unknown>;
      if (j['model'] !== this.o.model) throw new CompletionsBackendError(`${e.url} (${what}): the answer comes from model ${JSON.stringify(j['model'])}, expected ${JSON.stringify(this.o.model)}`);
      if (!Array.isArray(j['choices'])) throw new CompletionsBackendError(`${e.url} (${what}): the answer has no "choices" array`);
      return j;
    } finally {
      clearTimeout(timer);
      this.release(e);
    }
  }

  /** Posts with retries; `check` validates the answer (its errors are not retried). */
  private async request<T>(body: unknown, what: string, check: (j: Record<string, unknown>, url: string) => T): Promise<T> {
    const tried = new Set<Endpoint>();
    let last: Error | null = null;
    for (let attempt = 0; attempt <= this.o.retries; attempt++) {
      if (attempt > 0) await sleep(this.o.backoffMs * 2 ** (attempt - 1));
      if (tried.size >= this.endpoints.length) tried.clear();
      const e = this.pick(tried);
      tried.add(e);
      try {
        const j = await this.post(e, body, what);
        e.failures = 0;
        return check(j, e.url);
      } catch (err) {
        if (!(err instanceof RetryableError)) throw err;
        last = err;
        e.failures++;
        if (e.failures >= this.o.failureThreshold) {
          e.downUntil = Date.now() + this.o.cooldownMs;
          e.failures = 0;
        }
      }
    }
    throw new CompletionsBackendError(`${what}: failed after ${this.o.retries + 1} tries; last error: ${last?.message ?? 'unknown'}`);
  }

  async generate(requests: readonly GenerationRequest[], params: GenerateParams): Promise<GenerationOutput[]> {
    return Promise.all(
      requests.map((r, i) => {
        const what = `generation request ${i} (${r.tag.uid} sample ${r.tag.sample} round ${r.tag.round})`;
        const body = {
          model: this.o.model,
          prompt: [...r.ids],
          n: 1,
          temperature: params.temperature,
          top_p: params.topP,
          ...(params.topK > 0 ? { top_k: params.topK } : {}),
          max_tokens: r.maxNewTokens,
          stop: [...params.stop],
          include_stop_str_in_output: true,
          skip_special_tokens: false,
          logprobs: 0,
          seed: (params.seed + i) % 2 ** 31,
          return_tokens_as_token_ids: true,
        };
        return this.request(body, what, (j, url) => {
          const c = (j['choices'] as Choice[])[0];
          const where = `${url} (${what})`;
          if (c === undefined) throw new CompletionsBackendError(`${where}: the answer has no choice`);
          const ids = c.token_ids;
          if (!Array.isArray(ids) || ids.some((x) => typeof x !== 'number' || !Number.isInteger(x) || x < 0)) throw new CompletionsBackendError(`${where}: choice without a "token_ids" array of token ids`);
          if (ids.length > r.maxNewTokens) throw new CompletionsBackendError(`${where}: ${ids.length} tokens returned, more than max_tokens ${r.maxNewTokens}`);
          const lps = c.logprobs?.token_logprobs;
          if (!Array.isArray(lps) || lps.length !== ids.length || lps.some((x) => typeof x !== 'number')) throw new CompletionsBackendError(`${where}: missing or malformed logprobs.token_logprobs (expected ${ids.length} numbers)`);
          const fr = c.finish_reason;
          let finishReason: GenerationFinish;
          if (fr === 'length') finishReason = 'length';
          else if (fr === 'stop') finishReason = ids.length > 0 && ids[ids.length - 1] === EOS_TOKEN_ID ? 'eos' : 'stop';
          else throw new CompletionsBackendError(`${where}: unknown finish_reason ${JSON.stringify(fr)}`);
          return { tokenIds: ids as number[], logprobs: Float32Array.from(lps as number[]), finishReason };
        });
      }),
    );
  }

  async score(items: readonly ScoringItem[]): Promise<Float32Array[]> {
    return Promise.all(
      items.map((it, i) => {
        const what = `scoring item ${i}`;
        const prompt = [...it.contextIds, ...it.targetIds];
        if (it.targetIds.length === 0) return Promise.resolve(new Float32Array(0));
        if (it.contextIds.length === 0) return Promise.reject(new CompletionsBackendError(`${what}: empty context`));
        const body = { model: this.o.model, prompt, max_tokens: 1, temperature: 0, prompt_logprobs: 0, n: 1 };
        return this.request(body, what, (j, url) => {
          const where = `${url} (${what})`;
          const pl = j['prompt_logprobs'];
          if (!Array.isArray(pl)) throw new CompletionsBackendError(`${where}: the answer has no "prompt_logprobs" array`);
          if (pl.length !== prompt.length) throw new CompletionsBackendError(`${where}: ${pl.length} prompt_logprobs for a ${prompt.length}-token prompt`);
          const out = new Float32Array(it.targetIds.length);
          for (let t = 0; t < out.length; t++) {
            const pos = it.contextIds.length + t;
            const entry = pl[pos] as Record<string, { logprob?: unknown }> | null;
            const id = prompt[pos];
            const lp = entry?.[String(id)]?.logprob;
            if (typeof lp !== 'number') {
              const keys = entry && typeof entry === 'object' ? Object.keys(entry).join(', ') : String(entry);
              throw new CompletionsBackendError(`${where}: prompt_logprobs[${pos}] has no log-prob for the requested token ${id} (has: ${keys})`);
            }
            out[t] = lp;
          }
          return out;
        });
      }),
    );
  }
}
