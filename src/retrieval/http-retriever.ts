/**
 * HTTP client of the retrieval-server API used by Search-R1 and ASearcher:
 * `POST {url}` with `{ queries, topk, return_scores: true }`, answered by
 * `{ result: [[{ document: { contents, title?, url? }, score }]] }` (one list per query; servers
 * that leave return_scores false answer bare documents). Documents without a title follow
 * Search-R1's corpus layout: the first line of `contents` is the title (`splitTitle`).
 * Each request has a timeout; network errors, timeouts and 5xx answers are retried with
 * exponential backoff; when the server stays down the error says so and how to fix it.
 */
import { z } from 'zod';
import { DEFAULTS } from '../options';
import { isHttpUrl } from '../validate';
import { MempoError } from '../errors';
import { zodMessage } from '../io/jsonl';
import type { RetrievedDoc, Retriever } from '../contracts';
import { splitTitle } from './observation';

export interface HttpRetrieverOptions {
  /** Per-request timeout in ms (default 10000). */
  timeoutMs?: number;
  /** Retries after the first attempt (default 3). */
  retries?: number;
  /** Wait before the first retry in ms, doubled each time (default 250). */
  backoffMs?: number;
}

const documentSchema = z.object({ contents: z.string(), title: z.string().optional(), id: z.union([z.string(), z.number()]).nullish(), url: z.string().nullish() }).passthrough();
const hitSchema = z.union([
  z.object({ document: documentSchema, score: z.number().optional() }).passthrough(),
  documentSchema,
]);
const responseSchema = z.object({ result: z.array(z.array(hitSchema)) }).passthrough();

class RetryableError extends Error {}

function toDoc(hit: z.output<typeof hitSchema>): RetrievedDoc {
  const doc = 'document' in hit ? (hit.document as z.output<typeof documentSchema>) : (hit as z.output<typeof documentSchema>);
  const score = 'document' in hit && typeof hit.score === 'number' ? hit.score : 0;
  const { title, contents } = doc.title === undefined ? splitTitle(doc.contents) : { title: doc.title, contents: doc.contents };
  const out: RetrievedDoc = { title, contents, score };
  if (doc.id !== undefined && doc.id !== null) out.id = String(doc.id);
  if (typeof doc.url === 'string') out.url = doc.url;
  return out;
}

export class HttpRetriever implements Retriever {
  readonly name: string;
  readonly timeoutMs: number;
  readonly retries: number;
  readonly backoffMs: number;

  constructor(readonly url: string, options: HttpRetrieverOptions = {}) {
    if (!isHttpUrl(url)) {
      throw new MempoError('ERR_INVALID_OPTION', `Expected an http(s) URL for the retriever but received ${JSON.stringify(url)}`);
    }
    const parsed = new URL(url);
    // A bare server address means its /retrieve endpoint.
    if (parsed.pathname === '/' || parsed.pathname === '') parsed.pathname = '/retrieve';
    this.url = parsed.toString();
    this.name = `http:${this.url}`;
    this.timeoutMs = options.timeoutMs ?? DEFAULTS.retriever.timeoutMs;
    this.retries = options.retries ?? DEFAULTS.retriever.retries;
    this.backoffMs = options.backoffMs ?? DEFAULTS.retriever.backoffMs;
  }

  async search(queries: readonly string[], topk: number): Promise<RetrievedDoc[][]> {
    if (queries.length === 0) return [];
    const body = JSON.stringify({ queries, topk, return_scores: true });
    const attempts = this.retries + 1;
    let last = '';
    for (let attempt = 1; attempt <= attempts; attempt++) {
      try {
        return await this.once(body, queries.length);
      } catch (err) {
        if (!(err instanceof RetryableError)) throw err;
        last = err.message;
        if (attempt < attempts) await new Promise((r) => setTimeout(r, this.backoffMs * 2 ** (attempt - 1)));
      }
    }
    throw new MempoError(
      'ERR_RETRIEVER_DOWN',
      `The retrieval server at ${this.url} did not answer after ${attempts} attempt${attempts === 1 ? '' : 's'} (last error: ${last}). ` +
        'Start the server (e.g. Search-R1 `retrieval_server.py` / ASearcher), check the URL, or search the local corpus with --corpus FILE.',
    );
  }

  private async once(body: string, n: number): Promise<RetrievedDoc[][]> {
    const ctrl = new AbortController();
    const timer = setTimeout(() => ctrl.abort(), this.timeoutMs);
    let res: Response;
    let text: string;
    try {
      res = await fetch(this.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: ctrl.signal });
      text = await res.text();
    } catch (err) {
      const e = err as Error & { cause?: { code?: string; message?: string } };
      if (ctrl.signal.aborted) throw new RetryableError(`no answer within ${this.timeoutMs} ms`);
      throw new RetryableError(e.cause?.code ?? e.cause?.message ?? e.message);
    } finally {
      clearTimeout(timer);
    }
    if (res.status >= 500 || res.status === 429) throw new RetryableError(`HTTP ${res.status} ${clip(text)}`);
    if (!res.ok) {
      throw new MempoError('ERR_RETRIEVER_RESPONSE', `The retrieval server at ${this.url} answered HTTP ${res.status}: ${clip(text)}`);
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new MempoError('ERR_RETRIEVER_RESPONSE', `The retrieval server at ${this.url} answered with invalid JSON: ${clip(text)}`);
    }
    const r = responseSchema.safeParse(json);
    if (!r.success) {
      throw new MempoError('ERR_RETRIEVER_RESPONSE', `The retrieval server at ${this.url} answered an unexpected shape: ${zodMessage(r.error)}`);
    }
    if (r.data.result.length !== n) {
      throw new MempoError('ERR_RETRIEVER_RESPONSE', `The retrieval server at ${this.url} answered ${r.data.result.length} result lists for ${n} queries`);
    }
    return r.data.result.map((hits) => hits.map(toDoc));
  }
}

function clip(s: string): string {
  const t = s.trim();
  return t.length > 200 ? `${t.slice(0, 200)}…` : t;
}
