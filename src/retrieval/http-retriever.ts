/**
 * HTTP client of the retrieval-server API used by Search-R1 and ASearcher:
 * `POST {url}` with `{ queries, topk, return_scores: true }`, answered by
 * `{ result: [[{ document: { contents, title?, url? }, score }]] }` (one list per query; servers
 * that leave return_scores false answer bare documents). Documents without a title follow
 * Search-R1's corpus layout: the first line of `contents` is the title (`splitTitle`).
 * The page tool is ASearcher's `POST {server}/access` with `{ urls }`, answered by
 * `{ result: [page | null] }` (a page: `{ contents, url?, title? }`), one per URL.
 * Each request has a timeout; network errors, timeouts and 5xx answers are retried with
 * exponential backoff; when the server stays down the error says so and how to fix it.
 * With a token, every request carries `Authorization: Bearer <token>` (`mempo serve-retriever
 * --token`). `access` asks for each URL once, and halves a request the server finds too large
 * to answer (413, `mempo serve-retriever`'s maxAnswerBytes).
 */
import { z } from 'zod';
import { DEFAULTS } from '../options';
import { isHttpUrl } from '../validate';
import { MempoError } from '../errors';
import { SERVER_TOKEN_ENV } from '../engines/http/options';
import { zodMessage } from '../io/jsonl';
import type { Page, RetrievedDoc, Retriever } from '../contracts';
import { splitTitle } from './observation';

export interface HttpRetrieverOptions {
  /** Per-request timeout in ms (default 10000). */
  timeoutMs?: number;
  /** Retries after the first attempt (default 3). */
  retries?: number;
  /** Wait before the first retry in ms, doubled each time (default 250). */
  backoffMs?: number;
  /** Bearer token sent with every request (default: none). */
  token?: string;
}

const documentSchema = z.object({ contents: z.string(), title: z.string().optional(), id: z.union([z.string(), z.number()]).nullish(), url: z.string().nullish() }).passthrough();
const hitSchema = z.union([
  z.object({ document: documentSchema, score: z.number().optional() }).passthrough(),
  documentSchema,
]);
const responseSchema = z.object({ result: z.array(z.array(hitSchema)) }).passthrough();
const pageSchema = z.object({ contents: z.string(), url: z.string().nullish(), title: z.string().nullish() }).passthrough();
const accessSchema = z.object({ result: z.array(pageSchema.nullable()) }).passthrough();

class RetryableError extends Error {}

/** A 413: the request (or its answer) is too large for the server. */
class TooLargeError extends MempoError {}

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
  /** The server's page endpoint, `/access` beside the search endpoint. */
  readonly accessUrl: string;

  constructor(readonly url: string, options: HttpRetrieverOptions = {}) {
    if (!isHttpUrl(url)) {
      throw new MempoError('ERR_INVALID_OPTION', `Expected an http(s) URL for the retriever but received ${JSON.stringify(url)}`);
    }
    const parsed = new URL(url);
    // A bare server address means its /retrieve endpoint.
    if (parsed.pathname === '/' || parsed.pathname === '') parsed.pathname = '/retrieve';
    this.url = parsed.toString();
    this.accessUrl = new URL('access', this.url).toString();
    this.name = `http:${this.url}`;
    this.timeoutMs = options.timeoutMs ?? DEFAULTS.retriever.timeoutMs;
    this.retries = options.retries ?? DEFAULTS.retriever.retries;
    this.backoffMs = options.backoffMs ?? DEFAULTS.retriever.backoffMs;
    this.token = options.token === '' ? undefined : options.token;
  }

  private readonly token: string | undefined;

  async search(queries: readonly string[], topk: number): Promise<RetrievedDoc[][]> {
    if (queries.length === 0) return [];
    const body = JSON.stringify({ queries, topk, return_scores: true });
    return this.withRetries(this.url, async () => {
      const json = await this.once(this.url, body);
      const r = responseSchema.safeParse(json);
      if (!r.success) {
        throw new MempoError('ERR_RETRIEVER_RESPONSE', `The retrieval server at ${this.url} answered an unexpected shape: ${zodMessage(r.error)}`);
      }
      if (r.data.result.length !== queries.length) {
        throw new MempoError('ERR_RETRIEVER_RESPONSE', `The retrieval server at ${this.url} answered ${r.data.result.length} result lists for ${queries.length} queries`);
      }
      return r.data.result.map((hits) => hits.map(toDoc));
    });
  }

  /**
   * The page tool: ASearcher's `POST /access`, one page (or null) per URL. A URL asked for by
   * several trajectories is requested once (mempo serve-retriever refuses repeats); an answer
   * too large for the server (413) is asked for in halves, down to one URL.
   */
  async access(urls: readonly string[]): Promise<Array<Page | null>> {
    if (urls.length === 0) return [];
    const distinct = [...new Set(urls)];
    const pages = await this.accessDistinct(distinct);
    const byUrl = new Map(distinct.map((u, i) => [u, pages[i]!]));
    return urls.map((u) => byUrl.get(u)!);
  }

  private async accessDistinct(urls: readonly string[]): Promise<Array<Page | null>> {
    try {
      return await this.accessOnce(urls);
    } catch (err) {
      if (!(err instanceof TooLargeError) || urls.length === 1) throw err;
      const half = Math.ceil(urls.length / 2);
      return [...(await this.accessDistinct(urls.slice(0, half))), ...(await this.accessDistinct(urls.slice(half)))];
    }
  }

  private async accessOnce(urls: readonly string[]): Promise<Array<Page | null>> {
    const body = JSON.stringify({ urls });
    return this.withRetries(this.accessUrl, async () => {
      const json = await this.once(this.accessUrl, body);
      const r = accessSchema.safeParse(json);
      if (!r.success) {
        throw new MempoError('ERR_RETRIEVER_RESPONSE', `The retrieval server at ${this.accessUrl} answered an unexpected shape: ${zodMessage(r.error)}`);
      }
      if (r.data.result.length !== urls.length) {
        throw new MempoError('ERR_RETRIEVER_RESPONSE', `The retrieval server at ${this.accessUrl} answered ${r.data.result.length} pages for ${urls.length} URLs`);
      }
      return r.data.result.map((p, i) => (p === null ? null : { url: p.url ?? urls[i]!, title: p.title ?? '', contents: p.contents }));
    });
  }

  /**
   * Whether the server has pages: one `POST /access` with no URLs, answered 200 by a server with
   * pages (mempo serve-retriever --pages, ASearcher's). Any other answer, or none, is "no pages".
   */
  async hasPages(): Promise<boolean> {
    try {
      return accessSchema.safeParse(await this.once(this.accessUrl, JSON.stringify({ urls: [] }))).success;
    } catch {
      return false;
    }
  }

  private async withRetries<T>(url: string, call: () => Promise<T>): Promise<T> {
    const attempts = this.retries + 1;
    let last = '';
    for (let attempt = 1; attempt <= attempts; attempt++) {
      try {
        return await call();
      } catch (err) {
        if (!(err instanceof RetryableError)) throw err;
        last = err.message;
        if (attempt < attempts) await new Promise((r) => setTimeout(r, this.backoffMs * 2 ** (attempt - 1)));
      }
    }
    throw new MempoError(
      'ERR_RETRIEVER_DOWN',
      `The retrieval server at ${url} did not answer after ${attempts} attempt${attempts === 1 ? '' : 's'} (last error: ${last}). ` +
        'Start the server (e.g. Search-R1 `retrieval_server.py` / ASearcher), check the URL, or search the local corpus with --corpus FILE.',
    );
  }

  /** One POST: the parsed JSON; RetryableError for what a retry may cure. */
  private async once(url: string, body: string): Promise<unknown> {
    const ctrl = new AbortController();
    const timer = setTimeout(() => ctrl.abort(), this.timeoutMs);
    let res: Response;
    let text: string;
    try {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (this.token !== undefined) headers['authorization'] = `Bearer ${this.token}`;
      res = await fetch(url, { method: 'POST', headers, body, signal: ctrl.signal });
      text = await res.text();
    } catch (err) {
      const e = err as Error & { cause?: { code?: string; message?: string } };
      if (ctrl.signal.aborted) throw new RetryableError(`no answer within ${this.timeoutMs} ms`);
      throw new RetryableError(e.cause?.code ?? e.cause?.message ?? e.message);
    } finally {
      clearTimeout(timer);
    }
    if (res.status >= 500 || res.status === 429) throw new RetryableError(`HTTP ${res.status} ${clip(text)}`);
    if (res.status === 413) throw new TooLargeError('ERR_RETRIEVER_RESPONSE', `The retrieval server at ${url} answered HTTP 413: ${clip(text)}`);
    if (res.status === 401) {
      const hint = this.token === undefined ? `; set ${SERVER_TOKEN_ENV} to the token the server was started with` : `; check ${SERVER_TOKEN_ENV}`;
      throw new MempoError('ERR_RETRIEVER_RESPONSE', `The retrieval server at ${url} answered HTTP 401: ${clip(text)}${hint}`);
    }
    if (!res.ok) {
      throw new MempoError('ERR_RETRIEVER_RESPONSE', `The retrieval server at ${url} answered HTTP ${res.status}: ${clip(text)}`);
    }
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new MempoError('ERR_RETRIEVER_RESPONSE', `The retrieval server at ${url} answered with invalid JSON: ${clip(text)}`);
    }
  }
}

function clip(s: string): string {
  const t = s.trim();
  return t.length > 200 ? `${t.slice(0, 200)}…` : t;
}
