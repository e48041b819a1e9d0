/**
 * The embedded defaults (docs/rollout.md "The embedded world"): without --corpus, --retriever or
 * --pages a run has the page tool over the embedded pages, paged as they were built (1,000-character
 * chunks), and its default split mixes in the page questions; --no-pages is the search-only world;
 * questions files given together are interleaved in proportion (orders below written by hand).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { readQuestionFiles } from '../../src/io/questions';
import { MempoError } from '../../src/errors';
import { runCli } from './run-cli';

const DATA = resolve(__dirname, '..', '..', 'data', 'world');
const dir = mkdtempSync(join(tmpdir(), 'mempo-embedded-world-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const file = (name: string, ids: string[]) => {
  const p = join(dir, name);
  writeFileSync(p, ids.map((id) => JSON.stringify({ id, question: `q ${id}?`, golds: ['x'] })).join('\n') + '\n');
  return p;
};
const ids = (files: string[]) => readQuestionFiles(files).map((q) => q.id);

describe('readQuestionFiles', () => {
  test('files of 4, 2 and 1 questions: each at (k + ½) / n of the way, each file in its own order', () => {
    const a = file('a.jsonl', ['a0', 'a1', 'a2', 'a3']);
    const b = file('b.jsonl', ['b0', 'b1']);
    const c = file('c.jsonl', ['c0']);
    // a: 1/8 3/8 5/8 7/8; b: 1/4 3/4; c: 1/2
    expect(ids([a, b, c])).toEqual(['a0', 'b0', 'a1', 'c0', 'a2', 'b1', 'a3']);
    expect(ids([c, b])).toEqual(['b0', 'c0', 'b1']);
    expect(ids([a])).toEqual(['a0', 'a1', 'a2', 'a3']);
  });

  test('ties go to the file given first', () => {
    const two = file('two.jsonl', ['t0', 't1']);
    const six = file('six.jsonl', ['s0', 's1', 's2', 's3', 's4', 's5']);
    // two: 3/12 9/12; six: 1/12 3/12 5/12 7/12 9/12 11/12
    expect(ids([two, six])).toEqual(['s0', 't0', 's1', 's2', 's3', 't1', 's4', 's5']);
    expect(ids([six, two])).toEqual(['s0', 's1', 't0', 's2', 's3', 's4', 't1', 's5']);
  });

  test('an id in two files is refused, naming both', () => {
    const x = file('x.jsonl', ['p', 'q']);
    const y = file('y.jsonl', ['r', 'q']);
    expect(() => readQuestionFiles([x, y])).toThrow(MempoError);
    expect(() => readQuestionFiles([x, y])).toThrow(`${y}: field "id": "q" is also a question of ${x}`);
  });
});

type Run = { settings: { questions: string | string[]; retriever: string | null; pages?: string; options: { tool: { access: boolean; pageChunkChars: number; pageMaxChars: number; pageMaxChunks: number } } } };
const QUICK = ['--limit', '3', '-n', '1', '--max-turns', '1', '--max-round-tokens', '4', '--threads', '1', '--quiet', '--no-report'];

async function rollout(name: string, args: string[], kind = 'rollout'): Promise<{ run: Run; uids: string[] }> {
  const out = join(dir, name);
  const r = await runCli([kind, '--out', out, ...QUICK, ...args]);
  expect(r.err).toBe('');
  expect(r.code).toBe(0);
  const run = JSON.parse(readFileSync(join(out, 'run.json'), 'utf8')) as Run;
  const uids = readFileSync(join(out, 'batch.jsonl'), 'utf8').trim().split('\n').map((l) => (JSON.parse(l) as { uid: string }).uid);
  return { run, uids };
}

describe('the embedded world from the command line', () => {
  test('defaults: corpus with URLs, the page tool paged in 1,000-character chunks, train mixed with its page questions', async () => {
    const { run, uids } = await rollout('defaults', []);
    expect(run.settings.questions).toEqual([join(DATA, 'train.jsonl'), join(DATA, 'train-pages.jsonl')]);
    expect(run.settings.retriever).toBe(join(DATA, 'corpus-pages.jsonl'));
    expect(run.settings.pages).toBe(join(DATA, 'pages.jsonl'));
    expect(run.settings.options.tool).toMatchObject({ access: true, pageChunkChars: 1000, pageMaxChars: 250_000, pageMaxChunks: 10 });
    // 13,300 train and 2,800 page questions: the first page question is third (1/5,600 lies between 3/26,600 and 5/26,600)
    expect(uids).toEqual(['train-0', 'train-1', 'train-page-0']);
  }, 60_000);

  test('a --page-* flag given wins over the paging of the embedded pages', async () => {
    const { run } = await rollout('chunk', ['--page-chunk-chars', '500', '--page-max-chunks', '3']);
    expect(run.settings.options.tool).toMatchObject({ access: true, pageChunkChars: 500, pageMaxChars: 250_000, pageMaxChunks: 3 });
  }, 60_000);

  test('--no-pages: the search-only world (corpus.jsonl, no page tool, train alone)', async () => {
    const { run, uids } = await rollout('no-pages', ['--no-pages']);
    expect(run.settings.questions).toBe(join(DATA, 'train.jsonl'));
    expect(run.settings.retriever).toBeNull();
    expect(run.settings.pages).toBeUndefined();
    expect(run.settings.options.tool).toMatchObject({ access: false, pageChunkChars: 25_000 });
    expect(uids).toEqual(['train-0', 'train-1', 'train-2']);
  }, 60_000);

  test('a corpus of your own: no page tool unless --pages, and the train split alone', async () => {
    const { run, uids } = await rollout('own-corpus', ['--corpus', join(DATA, 'corpus.jsonl')]);
    expect(run.settings.pages).toBeUndefined();
    expect(run.settings.options.tool.access).toBe(false);
    expect(uids).toEqual(['train-0', 'train-1', 'train-2']);
  }, 60_000);

  test('--split names one or more splits; eval defaults to dev mixed with dev-pages', async () => {
    const { run, uids } = await rollout('split', ['--split', 'test-pages,test']);
    expect(run.settings.questions).toEqual([join(DATA, 'test-pages.jsonl'), join(DATA, 'test.jsonl')]);
    // 200 page and 1,000 test questions: test-0 (1/2,000) and test-1 (3/2,000), then test-page-0 (1/400 = 5/2,000) before test-2 (5/2,000: a tie, to the file given first)
    expect(uids).toEqual(['test-0', 'test-1', 'test-page-0']);
    const ev = await rollout('eval', [], 'eval');
    expect(ev.run.settings.questions).toEqual([join(DATA, 'dev.jsonl'), join(DATA, 'dev-pages.jsonl')]);
  }, 60_000);

  test('an unknown split is an error naming its file', async () => {
    const r = await runCli(['rollout', '--out', join(dir, 'bad'), ...QUICK, '--split', 'train,nope']);
    expect(r.code).not.toBe(0);
    expect(r.err).toContain(join(DATA, 'nope.jsonl'));
  });
});
