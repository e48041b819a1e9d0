/**
 * `mempo serve-retriever`: the Search-R1 / ASearcher retrieval-server API over any Retriever
 * (the embedded BM25 by default), so that the HTTP path of a rollout can run against a real
 * server on loopback and a user can put a local corpus behind the production interface.
 *
 *   POST /retrieve  { queries: string[], topk?: number, return_scores?: boolean }
 *   →               { result: [[{ document: { id, title, contents, url? }, score }]] }   (one list per query)
 *
 * return_scores defaults to false, as in Search-R1's and ASearcher's `retrieval_server.py`
 * (`QueryRequest.return_scores: bool = False`): each hit is then the bare document. `url` is
 * there when the corpus line has one.
 *
 * With pages (a retriever with `access`: `mempo serve-retriever --pages FILE`), ASearcher's page
 * endpoint beside it:
 *
 *   POST /access    { urls: string[] }  →  { result: [{ url, title, contents } | null] }   (one per URL)
 *
 * URLs are bounded (`maxUrls` per request, `maxUrlChars` each, 400) and so is each page's
 * contents in the answer (`maxPageChars`, cut: what an agent reads of a page, ASearcher's 250,000).
 *
 * Queries are bounded (`maxQueryChars` per query, 400; `maxTotalChars` per request, 413): BM25's
 * work grows with the query's terms (a 100 KB query ran the heap out of memory). The embedded
 * retriever answers a request's queries in slices with event-loop turns between them, so one slow
 * request does not stall the others.
 */
import * as http from 'node:http';
import { listenOn, parseJsonObject, readBody, RequestError, sendJson } from './http';
import type { Retriever } from '../contracts';
import { DEFAULT_TOPK } from '../retrieval/observation';

/** Defaults of `createRetrievalServer` (each documented on `RetrievalServerOptions`). */
export const RETRIEVAL_SERVER_DEFAULTS = {
  maxBodyBytes: 1 << 20,
  maxQueries: 4096,
  maxTopk: 100,
  defaultTopk: DEFAULT_TOPK,
  maxQueryChars: 4096,
  maxTotalChars: 1 << 20,
  maxUrls: 1024,
  maxUrlChars: 2048,
  maxPageChars: 250_000,
} as const;

export interface RetrievalServerOptions {
  /** Largest request body accepted, in bytes (default 1 MiB); larger ones get 413. */
  maxBodyBytes?: number;
  /** Most queries in one request (default 4096) and most documents per query (default 100). */
  maxQueries?: number;
  maxTopk?: number;
  /** topk when the request has none (default 3, the rollout default). */
  defaultTopk?: number;
  /**
   * Longest query, in characters (JavaScript string length; default 4096, far above what one
   * round of a rollout can generate) and most characters of all queries of a request (default
   * 1,048,576); longer ones get 400 and 413 naming the limit.
   */
  maxQueryChars?: number;
  maxTotalChars?: number;
  /** /access: most URLs in one request (default 1024) and longest URL (default 2048 characters); more get 400 naming the field. */
  maxUrls?: number;
  maxUrlChars?: number;
  /** /access: each page's contents is answered cut to this many characters (default 250,000: ASearcher's agent reads no more). */
  maxPageChars?: number;
}

/** Checks a /retrieve body; every message names the field at fault. */
export function parseRetrieveRequest(
  text: string,
  o: Required<RetrievalServerOptions>,
): { queries: string[]; topk: number; returnScores: boolean } {
  const b = parseJsonObject(text);
  const queries = b['queries'];
  if (!Array.isArray(queries)) throw new RequestError(400, 'field "queries": expected an array of strings');
  if (queries.length > o.maxQueries) throw new RequestError(400, `field "queries": at most ${o.maxQueries} queries per request, received ${queries.length}`);
  let total = 0;
  queries.forEach((q, i) => {
    if (typeof q !== 'string') throw new RequestError(400, `field "queries[${i}]": expected a string`);
    if (q.length > o.maxQueryChars) throw new RequestError(400, `field "queries[${i}]": ${q.length} characters; at most ${o.maxQueryChars} per query`);
    total += q.length;
  });
  if (total > o.maxTotalChars) throw new RequestError(413, `field "queries": ${total} characters in all; at most ${o.maxTotalChars} per request`);
  const topk = b['topk'] ?? o.defaultTopk;
  if (typeof topk !== 'number' || !Number.isInteger(topk) || topk < 1 || topk > o.maxTopk) {
    throw new RequestError(400, `field "topk": expected an integer in [1, ${o.maxTopk}], received ${JSON.stringify(topk)}`);
  }
  const rs = b['return_scores'] ?? false;
  if (typeof rs !== 'boolean') throw new RequestError(400, 'field "return_scores": expected a boolean');
  return { queries: queries as string[], topk, returnScores: rs };
}

/** Checks an /access body; every message names the field at fault. */
export function parseAccessRequest(text: string, o: Required<RetrievalServerOptions>): string[] {
  const b = parseJsonObject(text);
  const urls = b['urls'];
  if (!Array.isArray(urls)) throw new RequestError(400, 'field "urls": expected an array of strings');
  if (urls.length > o.maxUrls) throw new RequestError(400, `field "urls": at most ${o.maxUrls} URLs per request, received ${urls.length}`);
  urls.forEach((u, i) => {
    if (typeof u !== 'string') throw new RequestError(400, `field "urls[${i}]": expected a string`);
    if (u.length > o.maxUrlChars) throw new RequestError(400, `field "urls[${i}]": ${u.length} characters; at most ${o.maxUrlChars} per URL`);
  });
  return urls as string[];
}

export function createRetrievalServer(retriever: Retriever, options: RetrievalServerOptions = {}): http.Server {
  const D = RETRIEVAL_SERVER_DEFAULTS;
  const o: Required<RetrievalServerOptions> = {
    maxBodyBytes: options.maxBodyBytes ?? D.maxBodyBytes,
    maxQueries: options.maxQueries ?? D.maxQueries,
    maxTopk: options.maxTopk ?? D.maxTopk,
    defaultTopk: options.defaultTopk ?? D.defaultTopk,
    maxQueryChars: options.maxQueryChars ?? D.maxQueryChars,
    maxTotalChars: options.maxTotalChars ?? D.maxTotalChars,
    maxUrls: options.maxUrls ?? D.maxUrls,
    maxUrlChars: options.maxUrlChars ?? D.maxUrlChars,
    maxPageChars: options.maxPageChars ?? D.maxPageChars,
  };
  const endpoints = retriever.access === undefined ? 'POST /retrieve' : 'POST /retrieve or POST /access';
  return http.createServer((req, res) => {
    const send = (status: number, payload: unknown) => sendJson(res, status, payload);
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/access' && retriever.access === undefined) {
      return send(404, { error: 'no such endpoint /access: this server has no pages (start it with --pages FILE); use POST /retrieve' });
    }
    if (path !== '/retrieve' && path !== '/access') return send(404, { error: `no such endpoint ${path}; use ${endpoints}` });
    if (req.method !== 'POST') return send(405, { error: `method ${req.method} not allowed; use POST ${path}` });
    readBody(req, o.maxBodyBytes)
      .then(async (text) => {
        if (path === '/access') {
          const urls = parseAccessRequest(text, o);
          const pages = await retriever.access!(urls);
          send(200, { result: pages.map((p) => (p === null ? null : { url: p.url, title: p.title, contents: p.contents.slice(0, o.maxPageChars) })) });
          return;
        }
        const { queries, topk, returnScores } = parseRetrieveRequest(text, o);
        const hits = await retriever.search(queries, topk);
        send(200, {
          result: hits.map((list) =>
            list.map((d) => {
              const document = { id: d.id ?? null, title: d.title, contents: d.contents, ...(d.url !== undefined ? { url: d.url } : {}) };
              return returnScores ? { document, score: d.score } : document;
            }),
          ),
        });
      })
      .catch((err: unknown) => {
        if (res.headersSent || res.destroyed) return;
        if (err instanceof RequestError) send(err.status, { error: err.message });
        else send(500, { error: `retriever failed: ${(err as Error).message}` });
      });
  });
}

/** Listens on host:port (port 0 picks a free one); resolves to the bound URL of /retrieve. */
export async function listen(server: http.Server, port: number, host = '127.0.0.1'): Promise<string> {
  return `${await listenOn(server, port, host)}/retrieve`;
}
