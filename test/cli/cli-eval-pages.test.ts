/**
 * `mempo eval` on the embedded page questions with the page tool (issue 32): the eval table and
 * eval.json split exact match by kind and carry the page tool's figures (docs/rollout.md, "The page
 * tool's figures"). The shipped model's answers are not fixed here (it is retrained); what is
 * checked is what the command reports about the run, against the run's own batch.jsonl.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EMBEDDED } from '../../src/paths';
import { runCli } from './run-cli';

const DATA = join(EMBEDDED.split('dev'), '..');
const dir = mkdtempSync(join(tmpdir(), 'mempo-cli-eval-pages-'));
const FAST = ['--limit', '3', '--max-turns', '4', '--max-round-tokens', '48', '--threads', '1'];

test('eval --split dev-pages --pages: EM by kind, access rounds, pages opened, page facts answered, gold in mem after shrink', async () => {
  const out = join(dir, 'eval');
  const r = await runCli(['eval', '--split', 'dev-pages', '--corpus', join(DATA, 'corpus-pages.jsonl'), '--pages', join(DATA, 'pages.jsonl'), ...FAST, '--out', out]);
  expect(r.code).toBe(0);
  const e = JSON.parse(readFileSync(join(out, 'eval.json'), 'utf8')) as {
    byKind: Record<string, { questions: number }>; access: { rounds: number; pagesOpened: number; pageQuestions: { questions: number }; goldInMemAfterShrink: { trajectories: number } };
  };
  const batch = readFileSync(join(out, 'batch.jsonl'), 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as { rounds: { action: string | null; page?: number }[] });
  const accesses = batch.reduce((a, t) => a + t.rounds.filter((rd) => rd.action === 'access').length, 0);
  expect(Object.keys(e.byKind)).toEqual(['page']);
  expect(e.byKind['page']!.questions).toBe(3);
  expect(e.access.rounds).toBe(accesses);
  expect(e.access.pagesOpened).toBe(batch.reduce((a, t) => a + t.rounds.filter((rd) => rd.page === 1).length, 0));
  expect(e.access.pageQuestions.questions).toBe(3);
  expect(e.access.goldInMemAfterShrink.trajectories).toBe(3);
  expect(r.out).toMatch(/^ {2}EM by kind: {8}page: \d+\.\d% \(n=3\)$/m);
  expect(r.out).toMatch(new RegExp(`^ {2}page tool {16}${accesses} access rounds \\(`, 'm'));
  expect(r.out).toMatch(/^ {2}page facts answered {6}\d+\.\d% {3}\(EM on 3 page questions, 3 trajectories\)$/m);
  expect(r.out).toMatch(/^ {2}gold in mem after shrink (–|\d+\.\d%) {3}\(\d+ of \d+ trajectories whose fact chunk shrank; answered (–|\d+\.\d%); chunk shown in \d+ of 3\)$/m);
  // summary.json: the same access rounds and page-question EM
  const s = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as { access: { rounds: number; pageQuestions: { questions: number } } };
  expect([s.access.rounds, s.access.pageQuestions.questions]).toEqual([accesses, 3]);
}, 120_000);

test('eval of the search questions without the page tool (--no-pages): a split by kind, no page tool figures', async () => {
  const r = await runCli(['eval', '--split', 'dev', '--no-pages', ...FAST, '--json']);
  expect(r.code).toBe(0);
  const e = JSON.parse(r.out) as { byKind: Record<string, unknown>; access?: unknown };
  expect(Object.keys(e.byKind).length).toBeGreaterThan(0);
  expect(e.byKind['page']).toBeUndefined();
  expect(e.access).toBeUndefined();
}, 120_000);
