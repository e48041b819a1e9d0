/**
 * The page endpoint of `mempo serve-retriever --pages`: ASearcher's POST /access
 * `{ urls }` → `{ result: [page | null] }`, bounded like /retrieve with errors naming the field,
 * checked on loopback through the package's own client (HttpRetriever.access, hasPages) and the
 * real CLI.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Bm25Retriever } from '../../src/retrieval/bm25';
import { PageStore } from '../../src/retrieval/pages';
import { createRetrievalServer, listen } from '../../src/servers/retrieval-server';
import { HttpRetriever } from '../../src/retrieval/http-retriever';

const corpus = [
  { id: 'd1', title: 'Mamek', contents: 'Mamek is a city in Thersekle.', url: 'https://world.wiki/Mamek' },
  { id: 'd2', title: 'Ostra', contents: 'Ostra is a town.' },
];
const pages = [
  { url: 'https://world.wiki/Mamek', title: 'Mamek', contents: `Mamek\n\n${'filler '.repeat(30)}Mamek is twinned with Ostra.` },
  { url: 'https://world.wiki/Ostra', title: 'Ostra', contents: 'Ostra is a town by the sea.' },
];

async function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
}

describe('retrieval server with pages (POST /access)', () => {
  const local = new Bm25Retriever(corpus, {}, 'bm25', new PageStore(pages));
  let server: Server;
  let url = '';
  beforeAll(async () => {
    server = createRetrievalServer(local, { maxUrls: 3, maxUrlChars: 40, maxPageChars: 60 });
    url = await listen(server, 0);
  });
  afterAll(() => closeServer(server));

  const post = async (body: unknown, path = '/access') => {
    const res = await fetch(url.replace('/retrieve', path), { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body) });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  };

  it("answers ASearcher's shape: one page or null per URL, each page's contents cut to maxPageChars", async () => {
    const { status, json } = await post({ urls: ['https://world.wiki/Ostra', 'https://world.wiki/Nowhere', 'https://world.wiki/Mamek'] });
    expect(status).toBe(200);
    expect(json).toEqual({
      result: [
        { url: 'https://world.wiki/Ostra', title: 'Ostra', contents: 'Ostra is a town by the sea.' },
        null,
        { url: 'https://world.wiki/Mamek', title: 'Mamek', contents: pages[0]!.contents.slice(0, 60) },
      ],
    });
    expect((await post({ urls: [] })).json).toEqual({ result: [] });
  });

  it('HttpRetriever.access reads it, and hasPages says the server has pages', async () => {
    const remote = new HttpRetriever(url, { retries: 0 });
    expect(remote.accessUrl).toBe(url.replace(/\/retrieve$/, '/access'));
    expect(await remote.access(['https://world.wiki/Ostra', 'x'])).toEqual([pages[1], null]);
    expect(await remote.hasPages()).toBe(true);
    // /retrieve is still there, with the document's URL.
    expect((await remote.search(['Mamek city'], 1))[0]![0]!.url).toBe('https://world.wiki/Mamek');
  });

  it.each([
    [{ urls: 'https://world.wiki/Ostra' }, 'field "urls": expected an array of strings'],
    [{ urls: ['a', 7] }, 'field "urls[1]": expected a string'],
    [{ urls: ['a', 'b', 'c', 'd'] }, 'field "urls": at most 3 URLs per request, received 4'],
    [{ urls: ['a', `https://world.wiki/${'x'.repeat(30)}`] }, 'field "urls[1]": 49 characters; at most 40 per URL'],
    [{}, 'field "urls": expected an array of strings'],
  ])('refuses %j with 400 naming the field', async (body, error) => {
    expect(await post(body)).toEqual({ status: 400, json: { error } });
  });

  it('a server without pages answers /access 404 saying how to get them, and hasPages is false', async () => {
    const bare = createRetrievalServer(new Bm25Retriever(corpus));
    const bareUrl = await listen(bare, 0);
    try {
      const res = await fetch(bareUrl.replace('/retrieve', '/access'), { method: 'POST', body: '{"urls":[]}' });
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ error: 'no such endpoint /access: this server has no pages (start it with --pages FILE); use POST /retrieve' });
      expect(await new HttpRetriever(bareUrl, { retries: 0 }).hasPages()).toBe(false);
      await expect(new HttpRetriever(bareUrl, { retries: 0 }).access(['u'])).rejects.toThrow(`The retrieval server at ${bareUrl.replace('/retrieve', '/access')} answered HTTP 404`);
    } finally {
      await closeServer(bare);
    }
  });

  it('an answer of the wrong length or shape is an error naming the server', async () => {
    const liar = createRetrievalServer({ name: 'liar', search: () => Promise.resolve([]), access: () => Promise.resolve([null]) });
    const liarUrl = await listen(liar, 0);
    try {
      await expect(new HttpRetriever(liarUrl, { retries: 0 }).access(['a', 'b'])).rejects.toThrow(`The retrieval server at ${liarUrl.replace('/retrieve', '/access')} answered 1 pages for 2 URLs`);
    } finally {
      await closeServer(liar);
    }
  });
});

describe('mempo serve-retriever --pages (the CLI)', () => {
  it('serves /access from the pages file it names', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mempo-serve-pages-'));
    const corpusFile = join(dir, 'corpus.jsonl');
    const pagesFile = join(dir, 'pages.jsonl');
    writeFileSync(corpusFile, corpus.map((d) => JSON.stringify(d)).join('\n'));
    writeFileSync(pagesFile, pages.map((p) => JSON.stringify(p)).join('\n'));
    const main = resolve(__dirname, '..', '..', 'dist', 'cli', 'main.js');
    const child = spawn(process.execPath, [main, 'serve-retriever', '--corpus', corpusFile, '--pages', pagesFile, '--port', '0'], { stdio: ['ignore', 'ignore', 'pipe'] });
    try {
      const banner = await new Promise<string>((res, rej) => {
        let err = '';
        child.stderr.on('data', (d: Buffer) => {
          err += d.toString();
          if (err.includes('listening on')) res(err);
        });
        child.on('exit', (code) => rej(new Error(`exited ${code}: ${err}`)));
      });
      expect(banner).toMatch(/2 documents from .*corpus\.jsonl and 2 pages from .*pages\.jsonl \(POST http:\/\/127\.0\.0\.1:\d+\/access\), listening on http:\/\/127\.0\.0\.1:\d+\/retrieve/);
      const served = /listening on (\S+)/.exec(banner)![1]!;
      expect(await new HttpRetriever(served, { retries: 0 }).access(['https://world.wiki/Mamek'])).toEqual([pages[0]]);
    } finally {
      child.kill('SIGTERM');
    }
  });
});
