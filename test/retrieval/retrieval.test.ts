/**
 * The search tool: round parsing, the embedded BM25 retriever, observation rendering, and the
 * HTTP retrieval-server client against a local server that answers, refuses, fails or hangs.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Bm25Retriever } from '../../src/retrieval/bm25';
import { HttpRetriever } from '../../src/retrieval/http-retriever';
import { parseRoundOutput } from '../../src/protocol/round';
import { renderSearchObservation } from '../../src/retrieval/observation';
import { runPipeline } from '../../src/pipeline/pipeline';
import { ScriptedGenerator } from '../../src/engines/scripted';
import { CORPUS, FakeScorer, Q1, answer, search, tokenizer } from '../pipeline/helpers';

describe('parseRoundOutput', () => {
  test('a well-formed search round has no violations', () => {
    const p = parseRoundOutput('<mem>none</mem><think>Find it.</think><search>Mamek country</search>');
    expect(p).toEqual({ mem: 'none', think: 'Find it.', search: 'Mamek country', access: null, answer: null, action: 'search', violations: [] });
  });

  test('a well-formed answer round', () => {
    const p = parseRoundOutput(' <mem>a</mem>\n<think>b</think> <answer> Thersekle </answer>');
    expect(p.action).toBe('answer');
    expect(p.answer).toBe('Thersekle');
    expect(p.violations).toEqual([]);
  });

  test.each([
    ['<mem>a</mem><think>b</think><search>', ['unclosed-tag', 'no-action']],
    ['<mem>a</mem><think>b</think><think>c</think><search>q</search>', ['repeated-tag']],
    ['x<mem>a</mem><think>b</think><search>q</search>', ['text-outside-tags']],
    ['<mem>a</mem><think>b</think><search>q</search>tail', ['text-outside-tags']],
    ['<mem>a</mem><think>b</think><search> </search>', ['empty-query']],
    ['<mem>a</mem><think>b</think><answer></answer>', ['empty-answer']],
    ['<mem>a</mem><think>b</think><search>q</search><answer>x</answer>', ['two-actions']],
    ['<think>b</think><mem>a</mem><search>q</search>', ['tag-order']],
    ['<mem>a</mem><search>q</search>', ['missing-think']],
    ['<mem>a</mem><think>b</think><information>doc</information><search>q</search>', ['model-wrote-information']],
    ['</think><mem>a</mem><think>b</think><search>q</search>', ['stray-close-tag']],
    ['<mem>a<think>b</think></mem><search>q</search>', ['nested-tag', 'unclosed-tag']],
    ['', ['missing-mem', 'missing-think', 'no-action']],
    ['<|endoftext|>garbage', ['text-outside-tags', 'missing-mem', 'missing-think', 'no-action']],
  ])('records violations of %j', (text, codes) => {
    const p = parseRoundOutput(text);
    for (const c of codes) expect(p.violations.map((v) => v.code)).toContain(c);
    expect(p.violations.every((v) => typeof v.message === 'string' && v.message.length > 0)).toBe(true);
  });
});

describe('Bm25Retriever (minisearch)', () => {
  const bm25 = Bm25Retriever.fromJsonl(CORPUS);
  // a city of the embedded corpus (names are generated: take one from the file, do not hard-code it)
  const city = (readFileSync(CORPUS, 'utf8').split('\n').map((l) => (l ? JSON.parse(l) : null))
    .find((d) => d && / is a city in /.test(d.contents)) as { title: string }).title;

  test('finds the document of an entity first', async () => {
    const [hits] = await bm25.search([`${city} city in country`], 3);
    expect(hits).toHaveLength(3);
    expect(hits![0]!.title).toBe(city);
    expect(hits![0]!.contents).toContain(`${city} is a city in`);
    expect(hits![0]!.score).toBeGreaterThanOrEqual(hits![1]!.score);
  });

  test('answers a batch in query order; an empty query gets nothing', async () => {
    const res = await bm25.search([city, '', 'The Hollow Winter published'], 2);
    expect(res.map((r) => r.length)).toEqual([2, 0, 2]);
    expect(res[2]![0]!.title).toBe('The Hollow Winter');
  });

  test('rejects a malformed corpus line naming file, line and field', () => {
    const dir = mkdtempSync(join(tmpdir(), 'mempo-c-'));
    const f = join(dir, 'c.jsonl');
    writeFileSync(f, '{"id":"1","title":"A","contents":"a"}\n{"id":"2","title":"B"}\n');
    expect(() => Bm25Retriever.fromJsonl(f)).toThrow(`${f}:2: field "contents": Invalid input: expected string, received undefined`);
    writeFileSync(f, '{"id":"1","title":"A","contents":"a"}\n{"id":"1","title":"B","contents":"b"}\n');
    expect(() => Bm25Retriever.fromJsonl(f)).toThrow(`${f}:2: field "id": "1" repeats line 1`);
    expect(() => Bm25Retriever.fromJsonl(join(dir, 'missing.jsonl'))).toThrow(/^Cannot read .*missing\.jsonl/);
  });

  test('a Search-R1 wiki-18 row ({ id, contents: "\u0022Title\u0022\ntext" }) renders with its title once; url is kept', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mempo-c-'));
    const f = join(dir, 'wiki.jsonl');
    writeFileSync(f, [
      JSON.stringify({ id: '1', contents: '"Paris"\nParis is the capital of France.' }),
      JSON.stringify({ id: '2', title: 'Lyon', contents: 'Lyon is a city in France.', url: 'https://en.wikipedia.org/wiki/Lyon' }),
    ].join('\n') + '\n');
    const bm25 = Bm25Retriever.fromJsonl(f);
    const paris = (await bm25.search(['Paris capital'], 1))[0]![0]!;
    expect(paris).toMatchObject({ id: '1', title: 'Paris', contents: 'Paris is the capital of France.' });
    expect(paris.url).toBeUndefined();
    expect(renderSearchObservation([paris])).toBe('<information>Doc 1 (Paris): Paris is the capital of France.</information>');
    const lyon = (await bm25.search(['Lyon'], 1))[0]![0]!;
    expect(lyon.url).toBe('https://en.wikipedia.org/wiki/Lyon');
  });

  test('observations are <information> blocks with each document cut', () => {
    const docs = [{ title: 'A', contents: 'x'.repeat(20), score: 1 }, { title: 'B', contents: 'short', score: 0 }];
    expect(renderSearchObservation(docs, { docMaxChars: 5 })).toBe('<information>Doc 1 (A): xxxxx\nDoc 2 (B): short</information>');
    expect(renderSearchObservation(docs, { docMaxChars: null })).toContain('x'.repeat(20));
    expect(renderSearchObservation([])).toBe('<information>No results.</information>');
  });
});

type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;

async function server(handler: Handler): Promise<{ url: string; close: () => Promise<void>; hits: () => number }> {
  let n = 0;
  const s: Server = createServer((req, res) => {
    n++;
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => handler(req, body, res));
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/retrieve`,
    hits: () => n,
    close: () => new Promise<void>((r) => { s.closeAllConnections(); s.close(() => r()); }),
  };
}

const answerWith = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
};

describe('HttpRetriever (Search-R1 / ASearcher retrieval server API)', () => {
  test('posts { queries, topk, return_scores } and reads result[q][k].document', async () => {
    let seen: unknown = null;
    const srv = await server((req, body, res) => {
      seen = { method: req.method, url: req.url, body: JSON.parse(body) };
      answerWith(res, 200, { result: [
        [{ document: { id: '7', contents: '"Mamek"\nMamek is a city in Thersekle.' }, score: 3.5 }],
        [{ document: { contents: 'no title line', title: 'T', url: 'https://x.test/T' }, score: 1 }, { contents: 'bare document' }],
      ] });
    });
    try {
      const r = new HttpRetriever(srv.url, { retries: 0 });
      const res = await r.search(['a', 'b'], 2);
      expect(seen).toEqual({ method: 'POST', url: '/retrieve', body: { queries: ['a', 'b'], topk: 2, return_scores: true } });
      expect(res).toEqual([
        [{ id: '7', title: 'Mamek', contents: 'Mamek is a city in Thersekle.', score: 3.5 }],
        [{ title: 'T', contents: 'no title line', score: 1, url: 'https://x.test/T' }, { title: '', contents: 'bare document', score: 0 }],
      ]);
      // A bare server address means its /retrieve endpoint.
      expect(new HttpRetriever(srv.url.replace('/retrieve', '')).url).toBe(srv.url);
    } finally {
      await srv.close();
    }
  });

  test('retries 500s with backoff and succeeds when the server recovers', async () => {
    let calls = 0;
    const srv = await server((_req, _body, res) => {
      calls++;
      if (calls < 3) answerWith(res, 500, 'overloaded');
      else answerWith(res, 200, { result: [[{ document: { contents: 'x', title: 'X' }, score: 1 }]] });
    });
    try {
      const r = new HttpRetriever(srv.url, { retries: 3, backoffMs: 5 });
      const res = await r.search(['q'], 1);
      expect(res[0]![0]!.title).toBe('X');
      expect(calls).toBe(3);
    } finally {
      await srv.close();
    }
  });

  test('a server that keeps answering 500 gives a clear error after the retries', async () => {
    const srv = await server((_req, _body, res) => answerWith(res, 500, 'boom'));
    try {
      const r = new HttpRetriever(srv.url, { retries: 2, backoffMs: 1 });
      await expect(r.search(['q'], 1)).rejects.toThrow(
        `The retrieval server at ${srv.url} did not answer after 3 attempts (last error: HTTP 500 boom)`,
      );
      expect(srv.hits()).toBe(3);
    } finally {
      await srv.close();
    }
  });

  test('a refused connection gives a clear error naming the server and the fix', async () => {
    const srv = await server(() => {});
    const url = srv.url;
    await srv.close();
    const r = new HttpRetriever(url, { retries: 1, backoffMs: 1 });
    const err = await r.search(['q'], 1).then(() => null, (e: Error & { code?: string }) => e);
    expect(err?.message).toMatch(new RegExp(`^The retrieval server at ${url.replace(/[.?]/g, '\\$&')} did not answer after 2 attempts \\(last error: ECONNREFUSED\\)`));
    expect(err?.message).toContain('--corpus FILE');
    expect(err?.code).toBe('ERR_RETRIEVER_DOWN');
  });

  test('a hanging server times out', async () => {
    const srv = await server(() => { /* never answers */ });
    try {
      const r = new HttpRetriever(srv.url, { retries: 1, backoffMs: 1, timeoutMs: 100 });
      await expect(r.search(['q'], 1)).rejects.toThrow('did not answer after 2 attempts (last error: no answer within 100 ms)');
      expect(srv.hits()).toBe(2);
    } finally {
      await srv.close();
    }
  });

  test('4xx and malformed answers are not retried and say what was wrong', async () => {
    let mode = 'bad-request';
    const srv = await server((_req, _body, res) => {
      if (mode === 'bad-request') answerWith(res, 422, 'queries missing');
      else if (mode === 'not-json') answerWith(res, 200, '<html>');
      else if (mode === 'shape') answerWith(res, 200, { result: [[{ document: { text: 'x' } }]] });
      else answerWith(res, 200, { result: [] });
    });
    try {
      const r = new HttpRetriever(srv.url, { retries: 3, backoffMs: 1 });
      await expect(r.search(['q'], 1)).rejects.toThrow(`The retrieval server at ${srv.url} answered HTTP 422: queries missing`);
      expect(srv.hits()).toBe(1);
      mode = 'not-json';
      await expect(r.search(['q'], 1)).rejects.toThrow('answered with invalid JSON');
      mode = 'shape';
      await expect(r.search(['q'], 1)).rejects.toThrow(/answered an unexpected shape: field "result\[0\]\[0\]/);
      mode = 'count';
      await expect(r.search(['q'], 1)).rejects.toThrow('answered 0 result lists for 1 queries');
    } finally {
      await srv.close();
    }
  });

  test('rejects a URL that is not http(s)', () => {
    expect(() => new HttpRetriever('ftp://x')).toThrow('Expected an http(s) URL for the retriever but received "ftp://x"');
    expect(() => new HttpRetriever('not a url')).toThrow('Expected an http(s) URL');
  });
});

describe('a retrieval server that stays down, through the pipeline', () => {
  test('searching trajectories are recorded with the error and excluded; the rest are scored', async () => {
    const srv = await server((_req, _body, res) => answerWith(res, 503, 'down'));
    try {
      const tok = await tokenizer();
      const gen = new ScriptedGenerator(tok, (tag) => (tag.sample < 2 ? answer('none', tag.sample === 0 ? 'Thersekle' : 'No') : search('none', 'Mamek')));
      const res = await runPipeline({
        questions: [Q1], generator: gen, scorer: new FakeScorer(), retriever: new HttpRetriever(srv.url, { retries: 1, backoffMs: 1 }),
        options: { rollout: { groupSize: 4 } },
      });
      expect(srv.hits()).toBe(2); // one batched request for both searches, retried once
      const [a, b, c, d] = res.records;
      expect([a!.excluded, b!.excluded, c!.excluded, d!.excluded]).toEqual([false, false, true, true]);
      expect(c!.error).toBe(`The retrieval server at ${srv.url} did not answer after 2 attempts (last error: HTTP 503 down). ` +
        'Start the server (e.g. Search-R1 `retrieval_server.py` / ASearcher), check the URL, or search the local corpus with --corpus FILE.');
      expect(c!.score).toBeNull();
      expect(a!.advantages[0]).toBeCloseTo(1 / Math.SQRT2, 5);
      expect(b!.advantages[0]).toBeCloseTo(-1 / Math.SQRT2, 5);
    } finally {
      await srv.close();
    }
  });
});
