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
 * URLs are bounded (`maxUrls` per request, `maxUrlChars` each, 400; a URL twice in one request,
 * 400) and so is each page's contents in the answer (`maxPageChars`, cut: what an agent reads of a
 * page, ASearcher's 250,000). The answer is bounded too: its size as JSON is counted before it is
 * built (`maxAnswerBytes`, 413; a page of `"` or control characters escapes to 2 or 6 bytes per
 * character, and 1,024 of them once overflowed V8's longest string, a 500), and so are the bytes
 * of answers not yet read by their clients (`maxPendingBytes`, 503), so slow readers cannot hold
 * the server's memory.
 *
 * With `token`, every request needs `Authorization: Bearer <token>` (401 from the headers, body
 * unread); `listen` refuses an address off loopback without one, as `mempo serve` does.
 * Connections have the learner's limits (src/servers/http.ts CONNECTION_LIMITS).
 *
 * Queries are bounded (`maxQueryChars` per query, 400; `maxTotalChars` per request, 413): BM25's
 * work grows with the query's terms (a 100 KB query ran the heap out of memory). The embedded
 * retriever answers a request's queries in slices with event-loop turns between them, so one slow
 * request does not stall the others.
 */
import * as http from 'node:http';
import { capConnections, limitedServerOptions, listenOn, parseJsonObject, readBody, RequestError, sendJson } from './http';
import { bearerMatches, checkToken, requireTokenOffLoopback } from './auth';
import type { Page, Retriever } from '../contracts';
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
  maxAnswerBytes: 16 << 20,
  maxPendingBytes: 256 << 20,
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
  /**
   * /access: most bytes of one answer, as the JSON sent (default 16 MiB), counted before it is
   * built; a larger one gets 413 naming `maxAnswerBytes` (ask for fewer URLs at once).
   */
  maxAnswerBytes?: number;
  /**
   * Most bytes of answers written but not yet taken by their clients, over all connections
   * (default 256 MiB); an answer past it gets 503 naming `maxPendingBytes` (a retry may pass).
   */
  maxPendingBytes?: number;
  /** Bearer token every request must carry (default: none; required to listen off loopback). */
  token?: string;
}

/** The limits of a server: every option but the token, defaults filled in. */
type Limits = Required<Omit<RetrievalServerOptions, 'token'>>;

/** Checks a /retrieve body; every message names the field at fault. */
export function parseRetrieveRequest(
  text: string,
  o: Limits,
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
export function parseAccessRequest(text: string, o: Limits): string[] {
  const b = parseJsonObject(text);
  const urls = b['urls'];
  if (!Array.isArray(urls)) throw new RequestError(400, 'field "urls": expected an array of strings');
  if (urls.length > o.maxUrls) throw new RequestError(400, `field "urls": at most ${o.maxUrls} URLs per request, received ${urls.length}`);
  // A URL named twice would be answered twice: 1,024 times one 50 MB page was a 256 MB answer.
  const seen = new Map<string, number>();
  urls.forEach((u, i) => {
    if (typeof u !== 'string') throw new RequestError(400, `field "urls[${i}]": expected a string`);
    if (u.length > o.maxUrlChars) throw new RequestError(400, `field "urls[${i}]": ${u.length} characters; at most ${o.maxUrlChars} per URL`);
    const prev = seen.get(u);
    if (prev !== undefined) throw new RequestError(400, `field "urls[${i}]": repeats urls[${prev}]; ask for each URL once per request`);
    seen.set(u, i);
  });
  return urls as string[];
}

/**
 * Bytes of `JSON.stringify(s)` as UTF-8, counted without building it: `"` and `\` escape to 2,
 * control characters to 2 (`\n`, `\t`, ...) or 6 (`\u0001`), a lone surrogate to 6 (`\udc00`).
 * Stops counting once past `limit` (the count returned is then above it).
 */
export function jsonStringBytes(s: string, limit = Infinity): number {
  let n = 2;
  for (let i = 0; i < s.length && n <= limit; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20) n += c === 0x08 || c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d ? 2 : 6;
    else if (c === 0x22 || c === 0x5c) n += 2;
    else if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      n += 4;
      i++;
    } else if (c >= 0xd800 && c <= 0xdfff) n += 6;
    else n += 3;
  }
  return n;
}

/** Bytes of the /access answer `{"result":[...]}` for `pages`, or a count above `limit` once it is past it. */
export function accessAnswerBytes(pages: ReadonlyArray<Page | null>, limit = Infinity): number {
  // {"result":[ ... ]} with commas between items; a page is {"url":U,"title":T,"contents":C}.
  let n = 13 + Math.max(0, pages.length - 1);
  for (const p of pages) {
    if (n > limit) return n;
    if (p === null) {
      n += 4;
      continue;
    }
    n += 29 + jsonStringBytes(p.url, limit - n);
    n += jsonStringBytes(p.title, limit - n);
    n += jsonStringBytes(p.contents, limit - n);
  }
  return n;
}

export function createRetrievalServer(retriever: Retriever, options: RetrievalServerOptions = {}): http.Server {
  const D = RETRIEVAL_SERVER_DEFAULTS;
  const o: Limits = {
    maxBodyBytes: options.maxBodyBytes ?? D.maxBodyBytes,
    maxQueries: options.maxQueries ?? D.maxQueries,
    maxTopk: options.maxTopk ?? D.maxTopk,
    defaultTopk: options.defaultTopk ?? D.defaultTopk,
    maxQueryChars: options.maxQueryChars ?? D.maxQueryChars,
    maxTotalChars: options.maxTotalChars ?? D.maxTotalChars,
    maxUrls: options.maxUrls ?? D.maxUrls,
    maxUrlChars: options.maxUrlChars ?? D.maxUrlChars,
    maxPageChars: options.maxPageChars ?? D.maxPageChars,
    maxAnswerBytes: options.maxAnswerBytes ?? D.maxAnswerBytes,
    maxPendingBytes: options.maxPendingBytes ?? D.maxPendingBytes,
  };
  const token = checkToken(options.token, 'createRetrievalServer option token');
  const endpoints = retriever.access === undefined ? 'POST /retrieve' : 'POST /retrieve or POST /access';
  /** Bytes of answers handed to sockets whose clients have not taken them yet. */
  let pending = 0;
  /** Writes a 200 answer, counted in `pending` until its last byte reaches the kernel or its connection closes; 503 past maxPendingBytes. */
  const answer = (res: http.ServerResponse, body: Buffer) => {
    if (pending + body.length > o.maxPendingBytes) {
      throw new RequestError(503, `the server holds ${pending} bytes of answers their clients have not read yet; with this one of ${body.length} that would pass ${o.maxPendingBytes} (maxPendingBytes): retry later`);
    }
    pending += body.length;
    let held = true;
    const release = () => {
      if (held) pending -= body.length;
      held = false;
    };
    res.once('finish', release);
    res.once('close', release);
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
    res.end(body);
  };
  const server = http.createServer(limitedServerOptions(), (req, res) => {
    const send = (status: number, payload: unknown) => sendJson(res, status, payload);
    const path = (req.url ?? '/').split('?')[0];
    if (token !== undefined && !bearerMatches(req, token)) return send(401, { error: 'a valid Authorization: Bearer <token> is required (mempo serve-retriever --token)' });
    if (path === '/access' && retriever.access === undefined) {
      return send(404, { error: 'no such endpoint /access: this server has no pages (start it with --pages FILE); use POST /retrieve' });
    }
    if (path !== '/retrieve' && path !== '/access') return send(404, { error: `no such endpoint ${path}; use ${endpoints}` });
    if (req.method !== 'POST') return send(405, { error: `method ${req.method} not allowed; use POST ${path}` });
    readBody(req, o.maxBodyBytes)
      .then(async (text) => {
        if (path === '/access') {
          const urls = parseAccessRequest(text, o);
          const pages = (await retriever.access!(urls)).map((p) => (p === null ? null : { url: p.url, title: p.title, contents: p.contents.slice(0, o.maxPageChars) }));
          // Counted before the string is built: past the limit nothing large is allocated.
          const bytes = accessAnswerBytes(pages, o.maxAnswerBytes);
          if (bytes > o.maxAnswerBytes) {
            throw new RequestError(413, `the answer to these ${urls.length} URLs would pass ${o.maxAnswerBytes} bytes (maxAnswerBytes); ask for fewer URLs at once`);
          }
          answer(res, Buffer.from(JSON.stringify({ result: pages })));
          return;
        }
        const { queries, topk, returnScores } = parseRetrieveRequest(text, o);
        const hits = await retriever.search(queries, topk);
        const result = hits.map((list) =>
          list.map((d) => {
            const document = { id: d.id ?? null, title: d.title, contents: d.contents, ...(d.url !== undefined ? { url: d.url } : {}) };
            return returnScores ? { document, score: d.score } : document;
          }),
        );
        answer(res, Buffer.from(JSON.stringify({ result })));
      })
      .catch((err: unknown) => {
        if (res.headersSent || res.destroyed) return;
        if (err instanceof RequestError) send(err.status, { error: err.message });
        else send(500, { error: `retriever failed: ${(err as Error).message}` });
      });
  });
  capConnections(server);
  if (token !== undefined) withToken.add(server);
  return server;
}

/** What a token guards, in the refusal of a bind off loopback without one. */
export const RETRIEVER_GUARDED = 'search the corpus or read its pages (POST /retrieve, POST /access)';

/** The servers created with a token: `listen` lets only these bind off loopback. */
const withToken = new WeakSet<http.Server>();

/**
 * Listens on host:port (port 0 picks a free one); resolves to the bound URL of /retrieve. An
 * address off loopback (0.0.0.0 included) needs a server created with a token: ERR_INVALID_OPTION otherwise.
 */
export async function listen(server: http.Server, port: number, host = '127.0.0.1'): Promise<string> {
  await requireTokenOffLoopback(host, withToken.has(server), RETRIEVER_GUARDED);
  return `${await listenOn(server, port, host)}/retrieve`;
}
