/**
 * `mempo eval`'s page-tool figures (issue 32; docs/rollout.md, "The page tool's figures"): the split
 * by question kind, access rounds, pages opened, chunks shown, page facts answered and the
 * gold-in-mem-after-shrink rate, on scripted trajectories with the embedded tokenizer and on the
 * embedded world's page questions replayed from the page oracle (tools/world/page-oracle.ts). Every
 * expected value is counted by hand from the scripts, or from the question records.
 */
import { createHash } from 'crypto';
import * as path from 'path';
import { renderRound } from '../../src/protocol/round';
import { runPipeline } from '../../src/pipeline/pipeline';
import { summarize } from '../../src/pipeline/summary';
import { evalReport, formatEvalReport } from '../../src/pipeline/eval-report';
import { ScriptedGenerator } from '../../src/engines/scripted';
import { Bm25Retriever } from '../../src/retrieval/bm25';
import { PageStore } from '../../src/retrieval/pages';
import { checkQuestions, readQuestions } from '../../src/io/questions';
import { MempoError } from '../../src/errors';
import { SeededRandom } from '../../src/rng';
import type { BatchRecord } from '../../src/pipeline/batch';
import type { Page, Question } from '../../src/contracts';
import { DEFAULT_SEED, buildPageSet, buildWorld } from '../../tools/world/world';
import type { Question as WorldQuestion } from '../../tools/world/questions';
import { renderReport } from '../../src/io/report';
import { printOutcome } from '../../src/cli/run-output';
import type { RunOutcome, RunSettings } from '../../src/cli/run-settings';
import { sink } from '../cli/run-cli';
import { FakeScorer, answer, search, tokenizer } from './helpers';

const URL_M = 'https://world.wiki/Mamek';
// Three chunks of 60, 60 and 20 characters; the fact (Mamek lies in Thersekle) is only in chunk 2.
const C1 = 'Mamek is an old city with a river and many bridges to see'.padEnd(60, '.');
const C2 = 'Mamek lies in the land of Thersekle, by the sea, maps say'.padEnd(60, '.');
const C3 = 'The end of the page.';
const PAGE: Page = { url: URL_M, title: 'Mamek', contents: C1 + C2 + C3 };
const DOC = { id: 'd1', title: 'Mamek', contents: 'Mamek is a city. Its page says more.', url: URL_M };
const DOC2 = { id: 'd2', title: 'The Hollow Winter', contents: 'The Hollow Winter was published by Faithhe Works.' };

const PAGE_Q: Question = {
  id: 'p', question: 'In which country is Mamek?', golds: ['Thersekle'], hops: 1, objectives: 1, kind: 'page',
  pageHop: 0, pageChunk: 2, chains: [[{ subject: 'Mamek', relation: 'country', object: 'Thersekle' }]],
};
const CHAIN_Q: Question = { id: 'c', question: 'Who published The Hollow Winter?', golds: ['Faithhe Works'], hops: 1, objectives: 1, kind: 'chain' };

const open = (mem: string) => renderRound(mem, 'Read the page.', { kind: 'access', url: URL_M });
const FACT = 'Mamek lies in Thersekle.';
/** Per sample of the page question: its rounds. Chunk 2 (the fact) is shown after round 2 in samples 0, 1, 2 and 4. */
const PAGE_SCRIPT: string[][] = [
  // copies the fact, searches (chunk 2 shrinks), keeps it in its mem and answers: held, correct
  [open('none'), open('none'), search(FACT, 'Mamek'), answer(FACT, 'Thersekle')],
  // forgets it, reads on to chunk 3, answers wrong: not held, wrong
  [open('none'), open('none'), open('none'), answer('none', 'Ostra')],
  // answers in the round that sees chunk 2 whole: the chunk never shrank
  [open('none'), open('none'), answer(FACT, 'Thersekle')],
  // never opens the page: no fact shown
  [search('none', 'Mamek'), answer('none', 'Thersekle')],
  // forgets it but answers right all the same: not held, correct
  [open('none'), open('none'), search('none', 'Mamek country'), answer('none', 'Thersekle')],
];
const CHAIN_SCRIPT = [search('none', 'The Hollow Winter'), answer('The Hollow Winter was published by Faithhe Works.', 'Faithhe Works')];

async function scriptedRecords(): Promise<BatchRecord[]> {
  const tok = await tokenizer();
  const gen = new ScriptedGenerator(tok, (tag) => (tag.uid === 'p' ? PAGE_SCRIPT[tag.sample]! : CHAIN_SCRIPT)[tag.round - 1]!);
  const { records } = await runPipeline({
    questions: [PAGE_Q, CHAIN_Q], generator: gen, scorer: new FakeScorer(),
    retriever: new Bm25Retriever([DOC, DOC2], {}, 'bm25', new PageStore([PAGE])),
    options: {
      rollout: { groupSize: PAGE_SCRIPT.length, maxTurns: 8, maxResponseTokens: 4096, maxRoundTokens: 200 },
      tool: { access: true, topk: 1, pageChunkChars: 60, pageMaxChars: 1000 },
    },
  });
  return records;
}

describe('eval figures of the page tool on scripted trajectories', () => {
  let records: BatchRecord[] = [];
  let decode: (ids: number[]) => string = () => '';
  beforeAll(async () => {
    records = await scriptedRecords();
    const tok = await tokenizer();
    decode = (ids) => tok.decode(ids);
  });

  test('split by kind; access rounds, pages opened, chunks shown; page facts answered; gold in mem after shrink', () => {
    expect(records.filter((r) => r.uid === 'p').map((r) => r.rounds.length)).toEqual(PAGE_SCRIPT.map((s) => s.length));
    const e = evalReport(records, { questions: [PAGE_Q, CHAIN_Q], access: true, decode });
    // EM: page samples 0, 2, 3, 4 answer Thersekle, sample 1 Ostra; every chain sample is right.
    expect(e.byKind['page']).toMatchObject({ questions: 1, trajectories: 5, em: 4 / 5 });
    expect(e.byKind['chain']).toMatchObject({ questions: 1, trajectories: 5, em: 1 });
    expect(Object.keys(e.byKind)).toEqual(['chain', 'page']);
    // 2 + 3 + 2 + 0 + 2 access rounds, each showing a chunk; 4 samples open the page.
    expect(e.access).toEqual({
      rounds: 9, roundsPerTrajectory: 9 / 10, pagesOpened: 4, chunksShown: 9,
      pageQuestions: { questions: 1, trajectories: 5, em: 4 / 5 },
      // shown to samples 0, 1, 2, 4; shrank for 0, 1, 4 (2 answered at once); held by 0; answered right by 0 and 4
      goldInMemAfterShrink: { trajectories: 5, factShown: 4, shrank: 3, inMem: 1, rate: 1 / 3, correct: 2, correctRate: 2 / 3 },
    });
    const text = formatEvalReport(e);
    expect(text).toContain('  EM by kind:        chain: 100.0% (n=1)  page: 80.0% (n=1)');
    expect(text).toContain('  page tool                9 access rounds (0.90 per trajectory), 4 pages opened, 9 chunks shown');
    expect(text).toContain('  page facts answered      80.0%   (EM on 1 page questions, 5 trajectories)');
    expect(text).toContain('  gold in mem after shrink 33.3%   (1 of 3 trajectories whose fact chunk shrank; answered 66.7%; chunk shown in 4 of 5)');
  });

  test('without the page tool and without questions: no access figures, every question of kind unknown; the tokenizer is needed for the rate', () => {
    const plain = records.filter((r) => r.uid === 'c');
    const e = evalReport(plain, { questions: [PAGE_Q, CHAIN_Q], access: false, decode });
    expect(e.access).toBeUndefined();
    expect(formatEvalReport(e)).not.toContain('page tool');
    expect(Object.keys(evalReport(records).byKind)).toEqual(['unknown']);
    // Access rounds alone turn the figures on; without decode there is no rate.
    expect(evalReport(records, { questions: [PAGE_Q, CHAIN_Q] }).access).toMatchObject({ rounds: 9, goldInMemAfterShrink: null });
    // A fact chunk that is not the one the record names is not the fact's.
    const elsewhere = { ...PAGE_Q, pageChunk: 1 };
    expect(evalReport(records, { questions: [elsewhere, CHAIN_Q], decode }).access!.goldInMemAfterShrink).toMatchObject({ trajectories: 5, factShown: 0, shrank: 0, rate: null });
  });

  test('summary.json: access rounds, pages opened, chunks shown and page-question EM with the page tool; nothing without it', () => {
    const s = summarize(records, null, { questions: [PAGE_Q, CHAIN_Q], access: true });
    expect(s.access).toEqual({ rounds: 9, pagesOpened: 4, chunksShown: 9, pageQuestions: { questions: 1, trajectories: 5, em: 4 / 5 } });
    const plain = records.filter((r) => r.uid === 'c');
    expect('access' in summarize(plain, null, { questions: [CHAIN_Q], access: false })).toBe(false);
    // the page tool on, no access round yet: the figures are there, at zero
    expect(summarize(plain, null, { questions: [CHAIN_Q], access: true }).access).toEqual({ rounds: 0, pagesOpened: 0, chunksShown: 0 });
  });
});

test('questions: a page question carries pageHop, pageChunk and chains; a pageHop beyond chains[0] is refused naming the field', () => {
  const [q] = checkQuestions([{ ...PAGE_Q }]);
  expect(q).toEqual(PAGE_Q);
  expect(() => checkQuestions([{ ...PAGE_Q, pageHop: 1 }])).toThrow(new MempoError('ERR_INVALID_INPUT', 'questions[0]: field "pageHop": chains[0] has no hop 1 (it has 1)'));
  const { pageChunk: _c, ...noChunk } = PAGE_Q;
  expect(() => checkQuestions([noChunk])).toThrow(new MempoError('ERR_INVALID_INPUT', 'questions[0]: field "pageChunk": a page question gives both pageHop and pageChunk'));
});

describe('eval figures on the embedded page questions, replayed from the page oracle', () => {
  const DATA = path.join(__dirname, '..', '..', 'data', 'world');
  // Every third dev page question: 1, 2 and 3 hops, the page hop first, in the middle and last.
  const questions = readQuestions(path.join(DATA, 'dev-pages.jsonl')).filter((_q, i) => i % 3 === 0);
  const world = buildWorld(DEFAULT_SEED);
  const ps = buildPageSet(world);
  const worldQ = new Map(ps.questions.dev.map((q) => [q.id, q]));
  const retriever = () => Bm25Retriever.fromJsonl(path.join(DATA, 'corpus-pages.jsonl'), {}, PageStore.fromJsonl(path.join(DATA, 'pages.jsonl')));

  async function replay(qs: Question[], roundsOf: (uid: string) => string[]): Promise<BatchRecord[]> {
    const tok = await tokenizer();
    const { records } = await runPipeline({
      questions: qs, generator: new ScriptedGenerator(tok, (tag) => roundsOf(tag.uid)[tag.round - 1]!), scorer: null, retriever: retriever(),
      options: {
        rollout: { groupSize: 1, maxTurns: 16, maxResponseTokens: 4096, maxRoundTokens: 160, questionsPerBatch: 20 },
        tool: { access: true, pageChunkChars: 1000 },
        memory: { enabled: false },
      },
    });
    return records;
  }

  test('the flawless oracle copies the fact while its chunk is shown: every shrunk chunk is held, rate 1; a page_forget trajectory gives 0', async () => {
    const tok = await tokenizer();
    const oracle = (q: Question) => ps.oracle.trajectory(worldQ.get(q.id)! as WorldQuestion, new SeededRandom(7), 0);
    const flawless = new Map(questions.map((q) => [q.id, oracle(q).rounds.map((r) => r.text)]));
    const records = await replay(questions, (uid) => flawless.get(uid)!);
    const decode = (ids: number[]) => tok.decode(ids);
    const e = evalReport(records, { questions, access: true, decode });
    // From the question records: the chunk shrinks when a hop follows the page hop (its fact is then needed later).
    const shrinking = questions.filter((q) => q.pageHop! < q.hops! - 1).length;
    expect(shrinking).toBeGreaterThan(5);
    expect(e.byKind).toEqual({ page: expect.objectContaining({ questions: questions.length, em: 1 }) });
    expect(e.access!.pageQuestions).toEqual({ questions: questions.length, trajectories: questions.length, em: 1 });
    expect(e.access!.goldInMemAfterShrink).toEqual({
      trajectories: questions.length, factShown: questions.length, shrank: shrinking, inMem: shrinking, rate: 1, correct: shrinking, correctRate: 1,
    });
    // Accesses: one per chunk read up to the fact's (pageChunk) on each question.
    expect(e.access!.rounds).toBe(questions.reduce((a, q) => a + q.pageChunk!, 0));
    expect(e.access!.pagesOpened).toBe(questions.length);

    // page_forget: reads the fact's chunk without copying it, reads on, answers wrong.
    const q = questions.find((x) => x.hops === 1 && x.pageChunk! >= 2)!;
    let forget: ReturnType<typeof oracle> | null = null;
    for (let seed = 1; forget === null; seed++) {
      const t = ps.oracle.trajectory(worldQ.get(q.id)! as WorldQuestion, new SeededRandom(seed), 1);
      if (t.flaw === 'page_forget') forget = t;
    }
    const fRecords = await replay([q], () => forget!.rounds.map((r) => r.text));
    expect(evalReport(fRecords, { questions: [q], access: true, decode }).access!.goldInMemAfterShrink).toEqual({
      trajectories: 1, factShown: 1, shrank: 1, inMem: 0, rate: 0, correct: 0, correctRate: 0,
    });
  }, 120_000);
});

describe('runs without the page tool: summary.json, report.html and the printed line as before issue 32', () => {
  // Hand-made records of a search-only run (no access round).
  const rec = (uid: string, sample: number, ans: string, ctx: number[], mem: Array<number | null>): BatchRecord => {
    const n = ctx.length;
    return {
      uid, sample, question: `Q ${uid}?`, golds: ['Gold'], hops: 1, objectives: 1,
      promptIds: [1, 2], responseIds: Array.from({ length: n * 3 }, (_, i) => 20 + i), responseMask: Array.from({ length: n * 3 }, (_, i) => (i % 3 === 2 ? 0 : 1)),
      oldLogp: Array(n * 3).fill(-0.5),
      rounds: ctx.map((c, i) => ({
        index: i + 1, start: 3 * i, end: 3 * i + 2, memSpan: [3 * i, 3 * i + 1] as [number, number], memReward: mem[i] ?? null, pFull: 0.5, pMem: 0.25,
        action: i === n - 1 ? 'answer' as const : 'search' as const, query: i === n - 1 ? null : 'q', answer: i === n - 1 ? ans : null,
        violations: [], finishReason: 'stop', contextTokens: c, observation: i === n - 1 ? null : { start: 3 * i + 2, end: 3 * i + 3, truncated: false },
      })),
      score: ans === 'Gold' ? 1 : 0, formatValid: true, formatReason: null,
      outcomeAdvantage: Array(n * 3).fill(ans === 'Gold' ? 0.5 : -0.5), memoryAdvantage: Array(n * 3).fill(0.125), advantages: Array(n * 3).fill(ans === 'Gold' ? 0.625 : -0.375),
      text: `<mem>m</mem><think>t</think><answer>${ans}</answer>`, doneReason: 'answer', error: null, excluded: false,
    };
  };
  const records = [rec('a', 0, 'Gold', [40, 100], [null, 0.25]), rec('a', 1, 'Lead', [40, 90, 120], [null, -0.5, 0.125]), rec('b', 0, 'Gold', [40], [null])];
  const questions: Question[] = [{ id: 'a', question: 'Q a?', golds: ['Gold'], kind: 'chain' }, { id: 'b', question: 'Q b?', golds: ['Gold'], kind: 'chain' }];
  const sha = (x: string) => createHash('sha256').update(x).digest('hex');

  test('the same bytes as the code before (sha256 of its outputs at a3107f3)', () => {
    const s = summarize(records, null, { questions, access: false });
    expect(sha(JSON.stringify(s, null, 2))).toBe('5a891b6f411ac04dc25b9992da2567c6f0694235f35fb0fbd6df8cd4da55671a');
    const html = renderReport(records, { pieceOf: (id) => `<${id}>`, summary: s, maxQuestions: 2, title: 'mempo rollout', notes: ['note'] });
    expect(sha(html)).toBe('d96a2f6dbc72091ce052ec6a05cb96f497a534fa338311b30f953ecdb7d4211c');
    const out = sink();
    const outcome = { summary: s, eval: null, server: null, wallMs: 1234, records } as RunOutcome;
    printOutcome({ json: false, quiet: false, options: {} } as unknown as RunSettings, { stdout: out, stderr: out }, outcome, '/x/out');
    expect(out.text()).toBe('3 trajectories (2 questions): mean score 0.667, format-valid 100.0%, memory reward -0.0417 ± 0.4018 (n=3), 12 tokens generated, 1.2 s → /x/out\n');
  });

  test('with the page tool the line, the report and summary.json say access rounds, pages opened and page-question EM', () => {
    const paged: Question[] = questions.map((q) => ({ ...q, kind: 'page' }));
    const s = summarize(records, null, { questions: paged, access: true });
    expect(s.access).toEqual({ rounds: 0, pagesOpened: 0, chunksShown: 0, pageQuestions: { questions: 2, trajectories: 3, em: 2 / 3 } });
    const out = sink();
    printOutcome({ json: false, quiet: false, options: {} } as unknown as RunSettings, { stdout: out, stderr: out }, { summary: s, eval: null, server: null, wallMs: 1234, records } as RunOutcome, '/x/out');
    expect(out.text()).toContain('12 tokens generated, 0 access rounds (0 pages opened), page questions EM 66.7% (n=2), 1.2 s → /x/out\n');
    const html = renderReport(records, { pieceOf: (id) => `<${id}>`, summary: s, maxQuestions: 2 });
    expect(html).toContain('<tr><td>access rounds / pages opened / chunks shown</td><td>0 / 0 / 0</td></tr><tr><td>page questions EM</td><td>66.7% (2 questions)</td></tr>');
  });
});
