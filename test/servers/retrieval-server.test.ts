/**
 * `mempo serve-retriever`'s server: the Search-R1 / ASearcher POST /retrieve API over BM25,
 * checked through the package's own HTTP client on loopback.
 */
import type { Server } from 'node:http';
import { Bm25Retriever } from '../../src/retrieval/bm25';
import { createRetrievalServer, listen } from '../../src/servers/retrieval-server';
import { HttpRetriever } from '../../src/retrieval/http-retriever';

const corpus = [
  { id: 'd1', title: 'Mamek', contents: 'Mamek is a city in Thersekle. Mamek is governed by Peikven Jodor.' },
  { id: 'd2', title: 'Faimvais Bank', contents: 'Faimvais Bank was founded by Tolo Vosman. Faimvais Bank is based in Mamek.' },
  { id: 'd3', title: 'Tolo Vosman', contents: 'Tolo Vosman was born in Ostra.', url: 'https://wiki.test/Tolo_Vosman' },
];

describe('retrieval server (POST /retrieve)', () => {
  const local = new Bm25Retriever(corpus);
  let server: Server;
  let url = '';
  beforeAll(async () => {
    server = createRetrievalServer(local, { maxBodyBytes: 4096, maxTopk: 10 });
    url = await listen(server, 0);
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const post = async (body: unknown, path = '/retrieve', method = 'POST') => {
    const res = await fetch(url.replace('/retrieve', path), { method, body: method === 'POST' ? (typeof body === 'string' ? body : JSON.stringify(body)) : undefined });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  };

  it('binds to loopback by default', () => {
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/retrieve$/);
  });

  it('answers through HttpRetriever exactly what the local retriever finds', async () => {
    const queries = ['Mamek city', 'who founded Faimvais Bank', 'Vosman born', ''];
    const remote = await new HttpRetriever(url, { retries: 0 }).search(queries, 2);
    const direct = await local.search(queries, 2);
    expect(remote).toEqual(direct);
    expect(remote[0]![0]!.title).toBe('Mamek');
    expect(remote[3]).toEqual([]);
  });

  it('returns bare documents without return_scores, as Search-R1 does', async () => {
    const { status, json } = await post({ queries: ['Mamek'], topk: 1, return_scores: false });
    expect(status).toBe(200);
    expect(json).toEqual({ result: [[{ id: 'd1', title: 'Mamek', contents: corpus[0]!.contents }]] });
  });

  it('defaults return_scores to false (Search-R1 / ASearcher QueryRequest) and passes url through', async () => {
    const { status, json } = await post({ queries: ['Vosman born'], topk: 1 });
    expect(status).toBe(200);
    expect(json).toEqual({ result: [[{ id: 'd3', title: 'Tolo Vosman', contents: corpus[2]!.contents, url: 'https://wiki.test/Tolo_Vosman' }]] });
    const scored = await post({ queries: ['Vosman born'], topk: 1, return_scores: true });
    expect((scored.json['result'] as { score: unknown }[][])[0]![0]!.score).toEqual(expect.any(Number));
  });

  it.each([
    ['not json', 'body is not valid JSON'],
    [[1, 2], 'body must be a JSON object'],
    [{ queries: 'x' }, 'field "queries": expected an array of strings'],
    [{ queries: ['a', 3] }, 'field "queries[1]": expected a string'],
    [{ queries: ['a'], topk: 0 }, 'field "topk": expected an integer in [1, 10], received 0'],
    [{ queries: ['a'], topk: 11 }, 'field "topk": expected an integer in [1, 10], received 11'],
    [{ queries: ['a'], return_scores: 'yes' }, 'field "return_scores": expected a boolean'],
  ])('rejects %j with 400 and names the field', async (body, error) => {
    expect(await post(body)).toEqual({ status: 400, json: { error } });
  });

  it('rejects other paths, other methods and oversized bodies', async () => {
    expect((await post({}, '/search')).status).toBe(404);
    expect((await post(null, '/retrieve', 'GET')).status).toBe(405);
    const big = { queries: ['x'.repeat(5000)] };
    expect(await post(big)).toEqual({ status: 413, json: { error: 'request body larger than 4096 bytes' } });
  });
});
