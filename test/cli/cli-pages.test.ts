/**
 * The page tool from the command line (docs/algorithm.md §1): `mempo rollout --pages FILE` gives
 * the local corpus its pages, `--retriever URL` turns the tool on when the server answers /access
 * (mempo serve-retriever --pages), and bad input is refused naming what is wrong.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { join } from 'node:path';
import { Bm25Retriever } from '../../src/retrieval/bm25';
import { PageStore } from '../../src/retrieval/pages';
import { createRetrievalServer, listen } from '../../src/servers/retrieval-server';
import { CORPUS } from '../pipeline/helpers';
import { questionsDir, runCli } from './run-cli';

const { dir, questions } = questionsDir('mempo-cli-pages-');
const SMALL = ['--questions', questions, '-n', '2', '--max-round-tokens', '24', '--max-turns', '2', '--threads', '1', '--questions-per-batch', '1'];
const PAGES = [
  { url: 'https://world.wiki/Mamek', title: 'Mamek', contents: 'Mamek is a city in Thersekle.' },
  { url: 'https://world.wiki/Ostra', title: 'Ostra', contents: 'Ostra is a town.' },
];
const pagesFile = join(dir, 'pages.jsonl');
writeFileSync(pagesFile, PAGES.map((p) => JSON.stringify(p)).join('\n') + '\n');

const runJson = (out: string) => JSON.parse(readFileSync(join(out, 'run.json'), 'utf8')) as { settings: { pages?: string; options: { tool: { access: boolean } } } };

async function withServer<T>(pages: boolean, fn: (url: string) => Promise<T>): Promise<T> {
  const server: Server = createRetrievalServer(Bm25Retriever.fromJsonl(CORPUS, {}, pages ? new PageStore(PAGES) : null));
  const url = await listen(server, 0);
  try {
    return await fn(url);
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
}

describe('mempo rollout with pages', () => {
  test('--pages: the banner names the pages, the run has the page tool and records the file', async () => {
    const out = join(dir, 'local');
    const r = await runCli(['rollout', '--out', out, ...SMALL, '--pages', pagesFile]);
    expect(r.code).toBe(0);
    expect(r.err).toMatch(/BM25 over \S+ \(\d+ documents\), 2 pages from \S+pages\.jsonl/);
    expect(runJson(out).settings.pages).toBe(pagesFile);
    expect(runJson(out).settings.options.tool.access).toBe(true);
  });

  test('--retriever: a server with pages turns the page tool on, one without leaves it off', async () => {
    for (const pages of [true, false]) {
      const out = join(dir, `remote-${pages}`);
      const r = await withServer(pages, (url) => runCli(['rollout', '--out', out, ...SMALL, '--quiet', '--retriever', url]));
      expect(r.code).toBe(0);
      expect(runJson(out).settings.options.tool.access).toBe(pages);
    }
  });

  test('--pages beside --retriever, and a pages file with a repeated URL, are refused', async () => {
    const both = await withServer(true, (url) => runCli(['rollout', '--out', join(dir, 'both'), ...SMALL, '--retriever', url, '--pages', pagesFile]));
    expect(both.code).toBe(2);
    expect(both.err).toContain('error: --pages gives the local corpus its pages; with --retriever the server answers /access itself (mempo serve-retriever --pages FILE)');
    const rep = join(dir, 'rep.jsonl');
    writeFileSync(rep, `${JSON.stringify(PAGES[0])}\n${JSON.stringify(PAGES[0])}\n`);
    const bad = await runCli(['rollout', '--out', join(dir, 'rep'), ...SMALL, '--pages', rep]);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain(`${rep}:2: field "url": "https://world.wiki/Mamek" repeats line 1`);
  });
});
