/**
 * The embedded world's pages (issue 32), checked from the committed files: every search
 * document carries its page's URL, every page holds its document's facts and one fact of its own,
 * page questions need that fact, and the oracle's page trajectories open the page, read it chunk
 * by chunk and copy the fact into `<mem>` while its chunk is shown. Their replay through the real
 * pipeline (ScriptedGenerator, BM25 over corpus-pages.jsonl with the local page store) answers
 * every question and keeps the fact in `<mem>` after the page has shrunk. The files regenerate
 * byte-identically from the seed, beside the original ones.
 */
import { createHash } from 'crypto';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { computeScore, validateFormat } from '../../src/kernels/outcome-reward';
import { ACCESS_GRAMMAR } from '../../src/protocol/grammar';
import { parseRound } from '../../src/protocol/round';
import { observationSegment, renderFullStream } from '../../src/protocol/stream';
import { chunkPage } from '../../src/retrieval/observation';
import { Bm25Retriever } from '../../src/retrieval/bm25';
import { PageStore } from '../../src/retrieval/pages';
import { ScriptedGenerator } from '../../src/engines/scripted';
import { runPipeline } from '../../src/pipeline/pipeline';
import type { Question } from '../../src/contracts';
import { DEFAULT_SEED, buildWorld, oracleTrajectories, pageFiles } from '../../tools/world/world';
import { anyRelation } from '../../tools/world/pages';
import { loadTokenizer, trajectorySamples } from '../../tools/world/samples';
import { urlsByTitle, withUrls, writeSamples } from '../../tools/world/cli';
import { FakeScorer, tokenizer } from '../pipeline/helpers';

// The two system messages, written out: the page-tool agent's (tool.access, and every sample written with pages) and the search-only one.
const ACCESS_PROMPT = 'Answer with search and pages. Each turn: memory of facts found, thoughts, then a search, a page access or the answer.';
const SEARCH_PROMPT = 'Answer with search. Each turn: memory of facts found, thoughts, then a search or the answer.';

const DATA = path.join(__dirname, '..', '..', 'data', 'world');
const CHUNK = 1000;
const SHORT = 100;
const PAGING = { pageMaxChars: 250_000, pageChunkChars: CHUNK, pageMaxChunks: 10 };

interface Hop { subject: string; relation: string; object: string }
interface PageQuestion {
  id: string; question: string; golds: string[]; split: string; kind: string; hops: number; objectives: number;
  answers: string[]; pageHop: number; pageChunk: number; chains: Hop[][];
}
interface Doc { id: string; title: string; contents: string; url?: string }
interface PageLine { url: string; title: string; contents: string }
interface OracleRecord {
  qid: string; question: string; golds: string[]; correct: boolean; factChunkRound: number | null; pageFact: string;
  rounds: { text: string; observation?: string; page?: number }[];
}

const rows = <T>(name: string): T[] => fs.readFileSync(path.join(DATA, name), 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as T);
const corpus = rows<Doc>('corpus.jsonl');
const urlCorpus = rows<Doc>('corpus-pages.jsonl');
const pages = rows<PageLine>('pages.jsonl');
const pageByUrl = new Map(pages.map((p) => [p.url, p]));
const docByTitle = new Map(urlCorpus.map((d) => [d.title, d]));
const splits = { train: rows<PageQuestion>('train-pages.jsonl'), dev: rows<PageQuestion>('dev-pages.jsonl'), test: rows<PageQuestion>('test-pages.jsonl') };
const oracleDev = rows<OracleRecord>('oracle-dev-pages.jsonl');
const sentences = (text: string): string[] => text.split(/(?<=\.)\s+/).filter((s) => s.length > 0);

/** The one sentence of `page` that names both ends of a hop and is not in the subject's search document. */
function factSentenceOf(page: string, h: Hop): string {
  const doc = docByTitle.get(h.subject)!.contents;
  const found = sentences(page).filter((s) => s.startsWith(h.subject) && s.includes(h.object) && !doc.includes(s));
  if (found.length !== 1) throw new Error(`${h.subject} ${h.relation}: ${found.length} sentences`);
  return found[0]!;
}

describe('committed page files', () => {
  test('corpus-pages.jsonl is corpus.jsonl, line for line, with a unique URL per document that pages.jsonl holds', () => {
    expect(urlCorpus.map(({ id, title, contents }) => ({ id, title, contents }))).toEqual(corpus);
    expect(new Set(urlCorpus.map((d) => d.url)).size).toBe(corpus.length);
    expect(pages).toHaveLength(corpus.length);
    for (const d of urlCorpus) expect([d.title, pageByUrl.get(d.url!)?.title]).toEqual([d.title, d.title]);
  });

  test("every page is thousands of characters, opens with its title and states each of its document's facts", () => {
    const bad: string[] = [];
    for (const d of urlCorpus) {
      const p = pageByUrl.get(d.url!)!;
      if (p.contents.length < 1000 || !p.contents.startsWith(`${d.title}\n\n`) || !sentences(d.contents).every((s) => p.contents.includes(s))) bad.push(d.title);
    }
    expect(bad).toEqual([]);
  });

  test('page questions: kind page, one hop stated on its page only, in the chunk the record names, out of its short text', () => {
    const searchText = urlCorpus.map((d) => d.contents).join('\n');
    const bad: string[] = [];
    let beyond = 0;
    for (const [split, qs] of Object.entries(splits)) {
      for (const q of qs) {
        const chain = q.chains[0]!;
        // the hops no search document states (every other hop is stated in its subject's document)
        const offDoc = chain.map((h, i) => (docByTitle.get(h.subject)!.contents.includes(h.object) ? -1 : i)).filter((i) => i >= 0);
        const h = chain[q.pageHop]!;
        const page = pageByUrl.get(docByTitle.get(h.subject)!.url!)!.contents;
        const fact = factSentenceOf(page, h);
        const chunks = chunkPage(page, PAGING);
        const inChunks = chunks.map((c, k) => (c.includes(fact) ? k + 1 : 0)).filter((k) => k > 0);
        const ok = q.kind === 'page' && q.split === split && q.chains.length === 1 && chain.length === q.hops
          && chain.every((x, i) => i === 0 || x.subject === chain[i - 1]!.object)
          && JSON.stringify(q.golds) === JSON.stringify([chain[chain.length - 1]!.object])
          && JSON.stringify(offDoc) === JSON.stringify([q.pageHop])
          && !searchText.includes(fact)
          && JSON.stringify(inChunks) === JSON.stringify([q.pageChunk])
          && !chunks[q.pageChunk - 1]!.slice(0, SHORT).includes(h.object);
        if (!ok) bad.push(q.id);
        if (q.pageChunk > 1) beyond++;
      }
    }
    expect(bad).toEqual([]);
    // the fact is beyond the first chunk boundary for most questions, and on page 1 for many
    const n = splits.train.length + splits.dev.length + splits.test.length;
    expect(beyond / n).toBeGreaterThan(0.5);
    expect(beyond / n).toBeLessThan(0.9);
    for (const s of ['dev', 'test'] as const) for (const hops of [1, 2, 3]) {
      expect([s, hops, splits[s].some((q) => q.hops === hops && q.pageChunk > 1)]).toEqual([s, hops, true]);
    }
  });

  test('page questions of dev and test name no entity of the train questions (search or page)', () => {
    const names = (qs: { chains: Hop[][] }[]) => new Set(qs.flatMap((q) => q.chains.flat().flatMap((h) => [h.subject, ...(docByTitle.has(h.object) ? [h.object] : [])])));
    const train = names([...splits.train, ...rows<{ chains: Hop[][] }>('train.jsonl')]);
    for (const s of ['dev', 'test'] as const) for (const n of names(splits[s])) expect([s, n, train.has(n)]).toEqual([s, n, false]);
  });

  test("the rollouts' BM25 on corpus-pages.jsonl ranks the subject's document first for every hop of dev and test page questions", () => {
    const bm = Bm25Retriever.fromJsonl(path.join(DATA, 'corpus-pages.jsonl'));
    const missed: string[] = [];
    let n = 0;
    for (const t of oracleDev) {
      for (const r of t.rounds) {
        const { search } = parseRound(r.text, ACCESS_GRAMMAR);
        if (search === null) continue;
        n++;
        const top = bm.searchOne(search, 1)[0];
        if (!top || !r.observation!.startsWith(`<information>Doc 1 (${top.title}) [${top.url}]: `)) missed.push(search);
      }
    }
    expect(n).toBe(splits.dev.reduce((a, q) => a + q.hops, 0));
    // and the test split's hops, by the generator's queries
    for (const q of splits.test) {
      for (const h of q.chains[0]!) {
        n++;
        const query = anyRelation(h.relation).query(h.subject);
        if (bm.searchOne(query, 1)[0]?.title !== h.subject) missed.push(query);
      }
    }
    expect(n).toBe([...splits.dev, ...splits.test].reduce((a, q) => a + q.hops, 0));
    expect(missed).toEqual([]);
  });
});

describe('oracle page trajectories (oracle-dev-pages.jsonl)', () => {
  test('one per dev page question, correct, valid in the access grammar only, reward 1', () => {
    expect(oracleDev.map((t) => t.qid)).toEqual(splits.dev.map((q) => q.id));
    for (const t of oracleDev) {
      const resp = renderFullStream(t.rounds.map((r) => r.text), t.rounds.flatMap((r) => (r.observation !== undefined ? [r.observation] : [])));
      expect(t.correct).toBe(true);
      expect(validateFormat(resp, { requireAnswer: true, access: true })).toEqual({ valid: true });
      expect(validateFormat(resp, { requireAnswer: true }).valid).toBe(false);
      expect(computeScore(resp, t.golds, { access: true })).toBe(1);
      for (const r of t.rounds) expect(validateFormat(r.text, { access: true })).toEqual({ valid: true });
    }
  });

  test('pages are opened from a URL of the last search, read chunk by chunk, and <mem> copies only what was shown', () => {
    let accesses = 0;
    for (const t of oracleDev) {
      const shown: string[] = [];
      let lastSearchObs = '';
      const read = new Map<string, number>();
      for (const r of t.rounds) {
        const p = parseRound(r.text, ACCESS_GRAMMAR);
        if (p.mem !== 'none') for (const fact of sentences(p.mem!)) expect([t.qid, fact, shown.some((o) => o.includes(fact))]).toEqual([t.qid, fact, true]);
        if (p.search !== null) lastSearchObs = r.observation!;
        if (p.access !== null) {
          accesses++;
          const k = (read.get(p.access) ?? 0) + 1;
          read.set(p.access, k);
          // the URL was in the previous search's documents, or is the page being read
          expect(lastSearchObs.includes(` [${p.access}]: `)).toBe(true);
          const chunks = chunkPage(pageByUrl.get(p.access)!.contents, PAGING);
          expect(r.page).toBe(k);
          expect(r.observation).toBe(`<information>Page ${k} of ${chunks.length} (${p.access}): ${chunks[k - 1]}</information>`);
        }
        if (r.observation !== undefined) shown.push(r.observation);
      }
    }
    expect(accesses).toBeGreaterThan(oracleDev.length);
  });

  test("the page fact is copied into <mem> in the round its chunk is shown to, and kept in every later round's <mem>", () => {
    let shrunk = 0;
    for (const t of oracleDev) {
      const a = t.factChunkRound!;
      expect(t.rounds[a]!.observation!.includes(t.pageFact)).toBe(true);
      for (let i = 0; i < t.rounds.length; i++) {
        const mem = parseRound(t.rounds[i]!.text, ACCESS_GRAMMAR).mem!;
        expect([t.qid, i, mem.includes(t.pageFact)]).toEqual([t.qid, i, i > a]);
      }
      if (t.rounds.length > a + 2) shrunk++;
    }
    // questions whose page hop is not the last: the fact must outlive its chunk in the window
    expect(shrunk).toBeGreaterThan(30);
  });
});

describe('oracle search trajectories of the page-tool agent (samples --pages) through the pipeline', () => {
  test("their samples' memory contexts are the rollout's over corpus-pages.jsonl with the page tool: URLs and system message included", async () => {
    const codec = await tokenizer();
    const w = buildWorld(DEFAULT_SEED);
    const qs = w.questions.dev.filter((_q, i) => i % 19 === 0).slice(0, 24); // chains and bundles alike
    const ts = oracleTrajectories(w, qs, 11, 0);
    const urls = urlsByTitle(urlCorpus as Array<{ title: string; url: string }>);
    for (const t of ts) withUrls(t, urls);
    const byQid = new Map(ts.map((t) => [t.qid, t]));
    const retriever = Bm25Retriever.fromJsonl(path.join(DATA, 'corpus-pages.jsonl'), {}, PageStore.fromJsonl(path.join(DATA, 'pages.jsonl')));
    const { records } = await runPipeline({
      questions: qs.map((q) => ({ id: q.id, question: q.question, golds: q.golds, hops: q.hops, objectives: q.objectives })),
      generator: new ScriptedGenerator(codec, (tag) => byQid.get(tag.uid)!.rounds[tag.round - 1]!.text),
      scorer: new FakeScorer(), retriever,
      options: {
        rollout: { groupSize: 1, context: 'memory', maxTurns: 16, maxResponseTokens: 4096, maxRoundTokens: 160, questionsPerBatch: 24 },
        tool: { access: true, pageChunkChars: CHUNK },
      },
    });
    let checked = 0;
    for (const rec of records) {
      const t = byQid.get(rec.uid)!;
      const samples = trajectorySamples(t, ACCESS_PROMPT).filter((x) => x.policy === 'memory');
      expect(rec.rounds).toHaveLength(t.rounds.length);
      // (the oracle's BM25 and the runtime's agree on the subject's document, Doc 1, not always on the runners-up)
      const firstDoc = (ctx: string) => ctx.replace(/\nDoc 2 \([\s\S]*?<\/information>/g, '</information>');
      rec.rounds.forEach((r, i) => {
        expect(firstDoc(codec.decode(r.contextIds!))).toBe(firstDoc(samples[i]!.context));
        checked++;
      });
      // the documents the agent saw carry their URLs, as the samples' do
      expect(codec.decode(rec.responseIds)).toMatch(/Doc 1 \([^)]+\) \[https:\/\/world\.wiki\/[A-Za-z_]+\]: /);
    }
    expect(checked).toBeGreaterThan(24 * 3);
  });
});

describe('oracle page trajectories through the pipeline', () => {
  test('replayed with BM25 over corpus-pages.jsonl and the local page store: EM 1, the chunks as recorded, the fact in <mem> after its page shrank', async () => {
    const codec = await tokenizer();
    const retriever = Bm25Retriever.fromJsonl(path.join(DATA, 'corpus-pages.jsonl'), {}, PageStore.fromJsonl(path.join(DATA, 'pages.jsonl')));
    const byQid = new Map(oracleDev.map((t) => [t.qid, t]));
    const questions: Question[] = splits.dev.map((q) => ({ id: q.id, question: q.question, golds: q.golds, hops: q.hops, objectives: 1 }));
    const gen = new ScriptedGenerator(codec, (tag) => byQid.get(tag.uid)!.rounds[tag.round - 1]!.text);
    const { records } = await runPipeline({
      questions, generator: gen, scorer: new FakeScorer(), retriever,
      options: {
        rollout: { groupSize: 1, context: 'memory', maxTurns: 16, maxResponseTokens: 4096, maxRoundTokens: 160, questionsPerBatch: 20 },
        tool: { access: true, pageChunkChars: CHUNK },
      },
    });
    expect(records).toHaveLength(oracleDev.length);
    let shrunk = 0;
    let samplesChecked = 0;
    for (const rec of records) {
      const t = byQid.get(rec.uid)!;
      expect([rec.uid, rec.score, rec.doneReason, rec.formatValid]).toEqual([rec.uid, 1, 'answer', true]);
      expect(rec.rounds).toHaveLength(t.rounds.length);
      const decode = (from: number, to: number) => codec.decode(rec.responseIds.slice(from, to));
      rec.rounds.forEach((r, i) => {
        const o = t.rounds[i]!;
        // access rounds show exactly the recorded chunk
        if (r.action === 'access') {
          expect(r.page).toBe(o.page);
          expect(decode(r.observation!.start, r.observation!.end)).toBe(observationSegment(o.observation!));
        }
      });
      // the training samples' memory contexts are the contexts the rollout conditions on after a chunk
      const samples = trajectorySamples({
        qid: t.qid, question: t.question, golds: t.golds, flaw: null, correct: t.correct,
        rounds: t.rounds.map((r) => ({
          mem: parseRound(r.text, ACCESS_GRAMMAR).mem!, think: '', action: { kind: 'answer', answer: '' }, text: r.text,
          ...(r.observation !== undefined ? { observation: r.observation } : {}),
        })),
      }, ACCESS_PROMPT).filter((x) => x.policy === 'memory');
      rec.rounds.forEach((r, i) => {
        if (i > 0 && rec.rounds[i - 1]!.action === 'access') {
          samplesChecked++;
          expect(codec.decode(r.contextIds!)).toBe(samples[i]!.context);
        }
      });
      const a = t.factChunkRound!;
      // the round after the chunk: its memory context shows the whole chunk
      const copying = rec.rounds[a + 1]!;
      expect(codec.decode(copying.contextIds!).includes(t.rounds[a]!.observation!)).toBe(true);
      const after = rec.rounds[a + 2];
      if (after === undefined) continue;
      // the round after that: the chunk has left the window; the fact is only in the previous round's <mem> — and in this round's
      shrunk++;
      const ctx = codec.decode(after.contextIds!);
      const prevMem = parseRound(t.rounds[a + 1]!.text, ACCESS_GRAMMAR).mem!;
      expect(ctx.includes(t.rounds[a]!.observation!)).toBe(false);
      expect(ctx.replace(`<mem>${prevMem}</mem>`, '').includes(t.pageFact)).toBe(false);
      expect(decode(after.memSpan![0], after.memSpan![1]).includes(t.pageFact)).toBe(true);
    }
    expect(shrunk).toBeGreaterThan(30);
    expect(samplesChecked).toBeGreaterThan(oracleDev.length);
  });
});

test('the page files regenerate byte-identically from the seed', () => {
  const files = pageFiles(buildWorld(DEFAULT_SEED));
  expect(Object.keys(files).sort()).toEqual([
    'corpus-pages.jsonl', 'dev-pages.jsonl', 'meta-pages.json', 'oracle-dev-pages.jsonl', 'pages.jsonl', 'test-pages.jsonl', 'train-pages.jsonl',
  ]);
  for (const [name, text] of Object.entries(files)) expect([name, fs.readFileSync(path.join(DATA, name), 'utf8') === text]).toEqual([name, true]);
});

describe('training samples with pages (cli.ts samples --pages N)', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mempo-page-samples-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
  const MODEL = path.join(__dirname, '..', '..', 'models', 'mempo-tiny');
  const lines = (f: string) => fs.readFileSync(f, 'utf8').trimEnd().split('\n');

  test('without --pages the samples are byte-identical to those written before pages existed; with it, page lines are added and marked, and every context has the page-tool prompt', async () => {
    const log = jest.spyOn(console, 'log').mockImplementation(() => undefined);
    try {
      const plain = path.join(dir, 'plain.jsonl');
      const withPages = path.join(dir, 'pages.jsonl');
      await writeSamples(DEFAULT_SEED, MODEL, plain, 1, 'dev', 0.3);
      await writeSamples(DEFAULT_SEED, MODEL, withPages, 1, 'dev', 0.3, 1, 0, true, 20);
      // sha256 of `cli.js samples --split dev --draws 1 --flaw-rate 0.3` at 43394d3 (before the page oracle)
      expect(createHash('sha256').update(fs.readFileSync(plain)).digest('hex')).toBe('cb16620df55d35876e7341b2d1eba49f40e43e27276d85dd3fa15ebc53dc93bc');
      const all = lines(withPages);
      const page = all.filter((l) => l.endsWith(',"pg":1}'));
      // the search questions' lines are the plain ones but for the system message (the agent that has pages is told so)
      // and the documents' URLs (it searches corpus-pages.jsonl, whose documents show them): `Doc k (Title) [url]: …`
      const tok = await loadTokenizer(MODEL);
      const URL_RE = / \[https:\/\/world\.wiki\/[A-Za-z_]+\]:/g;
      const decoded = (l: string, from: string, to: string) => {
        const j = JSON.parse(l) as { c: number[] };
        return JSON.stringify({ ...j, c: tok.decode(j.c).split(from).join(to).replace(URL_RE, ':') });
      };
      const withUrl = all.filter((l) => !l.endsWith(',"pg":1}') && tok.decode((JSON.parse(l) as { c: number[] }).c).replace(URL_RE, ':') !== tok.decode((JSON.parse(l) as { c: number[] }).c));
      expect(withUrl.length).toBeGreaterThan(1000);
      const searchLines = all.filter((l) => !l.endsWith(',"pg":1}'));
      expect(searchLines.every((l) => tok.decode((JSON.parse(l) as { c: number[] }).c).includes(ACCESS_PROMPT))).toBe(true);
      // every one is a plain line; the plain lines left out are those the URLs push past the 2,048-token context.
      // (A stream's output holds its observations, URLs included: one stream per trajectory, as without pages.)
      const isStream = (l: string) => l.startsWith('{"p":"stream"');
      expect(searchLines.filter(isStream)).toHaveLength(lines(plain).filter(isStream).length);
      const plainLeft = new Map<string, number>();
      for (const l of lines(plain).filter((x) => !isStream(x))) plainLeft.set(decoded(l, '', ''), (plainLeft.get(decoded(l, '', '')) ?? 0) + 1);
      for (const l of searchLines.filter((x) => !isStream(x))) {
        const k = decoded(l, ACCESS_PROMPT, SEARCH_PROMPT);
        expect(plainLeft.get(k) ?? 0).toBeGreaterThan(0);
        plainLeft.set(k, plainLeft.get(k)! - 1);
      }
      const dropped = [...plainLeft].flatMap(([k, n]) => Array<string>(n).fill(k)).map((k) => JSON.parse(k) as { c: string; o: number[] });
      expect(dropped.length).toBeLessThan(searchLines.length / 20);
      for (const d of dropped) expect(tok.encode(d.c, { add_special_tokens: false }).length + d.o.length).toBeGreaterThan(2048 - 16 * 3 * 24);
      expect(page.every((l) => tok.decode((JSON.parse(l) as { c: number[] }).c).includes(ACCESS_PROMPT))).toBe(true);
      // 20 trajectories: a stream each, and every access round's successor as a memory sample
      expect(page.filter((l) => l.startsWith('{"p":"stream"'))).toHaveLength(20);
      expect(page.filter((l) => l.startsWith('{"p":"memory"')).length).toBeGreaterThan(20 * 3);
    } finally {
      log.mockRestore();
    }
  }, 60_000);
});
