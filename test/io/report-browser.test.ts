/**
 * report.html of a run with the page tool in a real headless browser (Debian's chromium), as
 * train-report-browser.test.ts does for the training report: the summary table parses with the
 * access rounds, pages opened, chunks shown and page-question EM of scripted trajectories (counted
 * here by hand), and access rounds are labelled; a run without the tool has none of these rows.
 * Skipped only when no chromium binary is installed (`apt-get install -y chromium`).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromiumBinary } from '../helpers';
import { renderReport } from '../../src/io/report';
import { summarize } from '../../src/pipeline/summary';
import { runPipeline } from '../../src/pipeline/pipeline';
import { renderRound } from '../../src/protocol/round';
import { ScriptedGenerator } from '../../src/engines/scripted';
import { Bm25Retriever } from '../../src/retrieval/bm25';
import { PageStore } from '../../src/retrieval/pages';
import type { Question } from '../../src/contracts';
import { FakeScorer, answer, search, tokenizer } from '../pipeline/helpers';

const CHROMIUM = chromiumBinary();
const SKIP = CHROMIUM === null ? 'no chromium binary on PATH (apt-get install -y chromium)' : null;
if (SKIP) console.warn(`report-browser.test.ts skipped: ${SKIP}`);
const maybe = SKIP ? (name: string, fn: () => void) => it.skip(`${name} [skipped: ${SKIP}]`, fn) : it;

const URL_M = 'https://world.wiki/Mamek';
const PAGE = { url: URL_M, title: 'Mamek', contents: 'Mamek is an old city with a river.'.padEnd(60, '.') + 'Mamek lies in the land of Thersekle.'.padEnd(60, '.') };
const DOC = { id: 'd1', title: 'Mamek', contents: 'Mamek is a city. Its page says more.', url: URL_M };
const Q: Question = {
  id: 'p', question: 'In which country is Mamek?', golds: ['Thersekle'], hops: 1, objectives: 1, kind: 'page',
  pageHop: 0, pageChunk: 2, chains: [[{ subject: 'Mamek', relation: 'country', object: 'Thersekle' }]],
};
const open = (mem: string) => renderRound(mem, 'Read the page.', { kind: 'access', url: URL_M });
// Sample 0 reads both chunks and answers right; sample 1 searches and answers wrong: 2 access rounds, 1 page opened, EM 1/2.
const SCRIPT = [[open('none'), open('none'), answer('Mamek lies in Thersekle.', 'Thersekle')], [search('none', 'Mamek'), answer('none', 'Ostra')]];

function chromium(args: string[], profile: string): string {
  return execFileSync(CHROMIUM!, ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', `--user-data-dir=${profile}`, ...args], {
    encoding: 'utf8', timeout: 90_000, maxBuffer: 64 << 20, stdio: ['ignore', 'pipe', 'pipe'],
  });
}

describe('report.html of a run with the page tool, in headless chromium', () => {
  let dir = '';
  const files: Record<'paged' | 'plain', string> = { paged: '', plain: '' };
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mempo-report-'));
    const tok = await tokenizer();
    for (const access of [true, false]) {
      const { records } = await runPipeline({
        questions: [Q], generator: new ScriptedGenerator(tok, (tag) => SCRIPT[tag.sample]![tag.round - 1]!), scorer: new FakeScorer(),
        retriever: new Bm25Retriever([DOC], {}, 'bm25', new PageStore([PAGE])),
        options: { rollout: { groupSize: 2, maxRoundTokens: 200 }, tool: { access, topk: 1, pageChunkChars: 60 } },
      });
      const file = join(dir, `${access ? 'paged' : 'plain'}.html`);
      const summary = summarize(records, null, { questions: [Q], access });
      writeFileSync(file, renderReport(records, { pieceOf: (id) => tok.piece(id), summary, title: 'mempo rollout <pages>' }));
      files[access ? 'paged' : 'plain'] = file;
    }
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  maybe('the summary table has the access rounds, pages opened, chunks shown and page-question EM; access rounds are labelled', () => {
    const dom = chromium(['--dump-dom', `file://${files.paged}`], join(dir, 'profile-paged'));
    expect(dom).not.toMatch(/This page contains the following errors|error on line/i);
    expect(dom).toContain('<h1>mempo rollout &lt;pages&gt;</h1>');
    const rows = [...dom.matchAll(/<tr><td>([^<]*)<\/td><td>([^<]*)<\/td><\/tr>/g)].map((m) => [m[1], m[2]]);
    expect(rows).toContainEqual(['access rounds / pages opened / chunks shown', '2 / 1 / 2']);
    expect(rows).toContainEqual(['page questions EM', '50.0% (1 question)']);
    expect(dom.match(/round \d · access/g)).toEqual(['round 1 · access', 'round 2 · access']);
  });

  maybe('without the page tool: no such rows (<access> is text there)', () => {
    const dom = chromium(['--dump-dom', `file://${files.plain}`], join(dir, 'profile-plain'));
    expect(dom).toContain('<td>tokens generated</td>');
    expect(dom).not.toContain('access rounds');
    expect(dom).not.toContain('page questions EM');
  });
});
