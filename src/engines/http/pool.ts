/**
 * The endpoint pool of the HTTP engine client: requests go round robin over the endpoints with
 * a bounded number in flight per endpoint and a timeout; 429 / 5xx / connection errors /
 * timeouts are retried with exponential backoff, and an endpoint that fails `failureThreshold`
 * times in a row leaves rotation for `cooldownMs`. Every error names the endpoint and the request.
 */
import { RetryableError } from './errors';
import { isServerError, serverError } from '../../errors';
import type { PoolSettings } from './options';

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

/** Request counts of the whole pool. */
export interface PoolCounts {
  requests: number;
  /** Tries repeated after a retryable failure. */
  retries: number;
  /** Requests that failed for good (after every retry, or with an error that is not retried). */
  failedRequests: number;
}

interface Endpoint {
  url: string;
  inFlight: number;
  consecutive: number;
  downUntil: number;
  waiters: (() => void)[];
  stats: EndpointStats;
}

/** Validates a 200 answer; `where` names the endpoint and the request. */
export type AnswerCheck<T> = (j: unknown, where: string) => T;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class EndpointPool {
  private readonly endpoints: Endpoint[];
  private next = 0;
  readonly counts: PoolCounts = { requests: 0, retries: 0, failedRequests: 0 };

  /** `urls`: the endpoint URLs the dialect posts to (already normalised). */
  constructor(urls: readonly string[], private readonly o: PoolSettings) {
    this.endpoints = urls.map((url) => ({ url, inFlight: 0, consecutive: 0, downUntil: 0, waiters: [], stats: { url, requests: 0, failures: 0, cooldowns: 0, lastError: null } }));
  }

  get urls(): string[] {
    return this.endpoints.map((e) => e.url);
  }

  endpointStats(): EndpointStats[] {
    return this.endpoints.map((e) => ({ ...e.stats }));
  }

  /** Posts with retries; `check` validates the answer (its errors are not retried). */
  async request<T>(body: unknown, what: string, check: AnswerCheck<T>): Promise<T> {
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
        return checked(j, `${e.url} (${what})`, check);
      } catch (err) {
        if (!(err instanceof RetryableError)) {
          this.counts.failedRequests++;
          throw err;
        }
        last = err;
        this.recordFailure(e, err);
      }
    }
    this.counts.failedRequests++;
    throw serverError(`${what}: failed after ${this.o.retries + 1} tries; last error: ${last?.message ?? 'unknown'}`);
  }

  /** A retryable failure; `failureThreshold` in a row take the endpoint out of rotation. */
  private recordFailure(e: Endpoint, err: RetryableError): void {
    e.stats.failures++;
    e.stats.lastError = err.message;
    e.consecutive++;
    if (e.consecutive >= this.o.failureThreshold) {
      e.downUntil = Date.now() + this.o.cooldownMs;
      e.consecutive = 0;
      e.stats.cooldowns++;
    }
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
      if (res.status !== 200) throw serverError(`${e.url} (${what}): HTTP ${res.status}: ${text.slice(0, 300)}`);
      try {
        return JSON.parse(text) as unknown;
      } catch {
        throw serverError(`${e.url} (${what}): the answer is not valid JSON: ${text.slice(0, 200)}`);
      }
    } finally {
      clearTimeout(timer);
      this.release(e);
    }
  }
}

/** Runs `check`; an unexpected error (a TypeError on a malformed answer) becomes a server error (ERR_SERVER) naming `where`. */
function checked<T>(j: unknown, where: string, check: AnswerCheck<T>): T {
  try {
    return check(j, where);
  } catch (err) {
    if (isServerError(err)) throw err;
    throw serverError(`${where}: could not read the answer: ${(err as Error).message}`);
  }
}
