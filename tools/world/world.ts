/**
 * The embedded world as a whole: KB, corpus, question splits, BM25, oracle, tokenizer
 * training texts, and the exact bytes of every generated file (so a test can check that the
 * committed files regenerate byte-identically from the seed).
 */
import { EMPTY_MEMORY } from '../../src/protocol/round';
import { SYSTEM_PROMPT } from '../../src/protocol/chat';
import { renderObservation } from '../../src/retrieval/observation';
import { SeededRandom } from '../../src/rng';
import { Bm25 } from './bm25';
import { NAME_PIECES, SPLITS, YEAR_RANGE, buildKB, factObject, objectName, relationsOf, renderCorpus } from './kb';
import { Oracle, OracleTrajectory } from './oracle';
import { DEFAULT_COUNTS, Question, buildQuestions, questionRecord } from './questions';
import { PageWorld, buildPageQuestions, buildPageWorld, pageQuestionRecord } from './pages';
import { PageOracle, PageOracleTrajectory, WORLD_PAGING } from './page-oracle';
import { buildTokenizerJson, tokenizerConfigJson } from './tokenizer';

/** Seed of the shipped world. */
export const DEFAULT_SEED = 20260529;
/** Vocabulary size of the shipped tokenizer / model. */
export const VOCAB_SIZE = 3072;
/** Context length of the shipped model. */
export const MAX_POSITIONS = 2048;

export interface World {
  seed: number;
  kb: ReturnType<typeof buildKB>;
  corpus: ReturnType<typeof renderCorpus>;
  bm25: Bm25;
  questions: Record<'train' | 'dev' | 'test', Question[]>;
  oracle: Oracle;
}

/** Build the whole world in memory (deterministic from the seed). */
export function buildWorld(seed: number = DEFAULT_SEED): World {
  const kb = buildKB(seed);
  const corpus = renderCorpus(kb);
  const bm25 = new Bm25(corpus);
  const questions = {
    train: buildQuestions(kb, 'train', seed + 1, DEFAULT_COUNTS.train),
    dev: buildQuestions(kb, 'dev', seed + 2, DEFAULT_COUNTS.dev),
    test: buildQuestions(kb, 'test', seed + 3, DEFAULT_COUNTS.test),
  };
  return { seed, kb, corpus, bm25, questions, oracle: new Oracle(kb, corpus, bm25) };
}

/** Oracle trajectories of a question list (deterministic). */
export function oracleTrajectories(w: World, qs: Question[], seed: number, flawRate = 0.3): OracleTrajectory[] {
  return qs.map((q, i) => w.oracle.trajectory(q, new SeededRandom(seed * 7919 + i * 104729 + 17), { flawRate }));
}

export function jsonl(rows: object[]): string {
  return rows.map((r) => JSON.stringify(r)).join('\n') + '\n';
}

/** Texts the BPE is trained on: the corpus, all questions, oracle rounds, chat prompts. */
export function tokenizerTexts(w: World): { texts: string[]; wholeWords: string[] } {
  const kb = w.kb;
  const wholeWords: string[] = [...NAME_PIECES];
  for (let y = YEAR_RANGE.first; y <= YEAR_RANGE.last; y++) wholeWords.push(String(y));
  const texts: string[] = [EMPTY_MEMORY];
  // the prompt scaffolding is in every context: weight it so it gets whole-word tokens
  for (let i = 0; i < 300; i++) texts.push(SYSTEM_PROMPT, 'system\nuser\nassistant\n');
  for (const d of w.corpus) texts.push(renderObservation([d]));
  for (const split of SPLITS) for (const q of w.questions[split]) texts.push(q.question);
  const trajs = oracleTrajectories(w, w.questions.train.slice(0, 4000), w.seed + 5);
  for (const t of trajs) for (const r of t.rounds) texts.push(r.text);
  for (const e of kb.entities) {
    for (const r of relationsOf(e.type)) {
      const o = factObject(kb, e.id, r.id);
      if (o === undefined) continue;
      const on = objectName(kb, r.id, o);
      texts.push(`<answer>${on}</answer>`);
    }
  }
  return { texts, wholeWords };
}

/** tokenizer.json and tokenizer_config.json contents (exact bytes). */
export function tokenizerFiles(w: World): Record<string, string> {
  const { texts, wholeWords } = tokenizerTexts(w);
  const tok = buildTokenizerJson(texts, { vocabSize: VOCAB_SIZE, wholeWords });
  return {
    'tokenizer.json': JSON.stringify(tok, null, 1) + '\n',
    'tokenizer_config.json': JSON.stringify(tokenizerConfigJson(MAX_POSITIONS), null, 2) + '\n',
  };
}

/** Every file of data/world (exact bytes), keyed by file name. */
export function worldFiles(w: World): Record<string, string> {
  const files: Record<string, string> = {};
  files['corpus.jsonl'] = jsonl(w.corpus);
  for (const split of SPLITS) {
    files[`${split}.jsonl`] = jsonl(w.questions[split].map((q) => questionRecord(w.kb, q)));
  }
  const devTraj = oracleTrajectories(w, w.questions.dev, w.seed + 11, 0);
  files['oracle-dev.jsonl'] = jsonl(devTraj.map((t) => ({
    qid: t.qid, question: t.question, golds: t.golds, correct: t.correct,
    rounds: t.rounds.map((r) => (r.observation !== undefined ? { text: r.text, observation: r.observation } : { text: r.text })),
  })));
  // retrievability of the oracle's queries (rank of the subject document)
  const stats = { queries: 0, rank1: 0, top3: 0 };
  for (const q of w.questions.test.concat(w.questions.dev)) {
    for (const c of q.chains) {
      for (const h of c) {
        const subj = w.kb.byId.get(h.subject);
        const r = subj ? relationsOf(subj.type).find((x) => x.id === h.relation) : undefined;
        if (!subj || !r) throw new Error(`bad hop ${h.subject} ${h.relation}`);
        const rank = w.oracle.rankOf(r.query(subj.name), h.subject);
        stats.queries++;
        if (rank === 0) stats.rank1++;
        if (rank >= 0) stats.top3++;
      }
    }
  }
  const meta = {
    seed: w.seed,
    documents: w.corpus.length,
    entities: Object.fromEntries(SPLITS.map((s) => [s, w.kb.entities.filter((e) => e.split === s).length])),
    questions: Object.fromEntries(SPLITS.map((s) => [s, w.questions[s].length])),
    oracleRetrieval: stats,
  };
  files['meta.json'] = JSON.stringify(meta, null, 2) + '\n';
  return files;
}

/** The world's pages (issue 32): page-only facts, pages, the URL corpus, page questions and their oracle. */
export interface PageSet {
  pw: PageWorld;
  questions: Record<'train' | 'dev' | 'test', Question[]>;
  oracle: PageOracle;
}

export function buildPageSet(w: World): PageSet {
  const pw = buildPageWorld(w.kb, w.corpus);
  const taken = (s: 'train' | 'dev' | 'test') => new Set(w.questions[s].map((q) => q.question));
  const questions = {
    train: buildPageQuestions(w.kb, pw, 'train', taken('train')),
    dev: buildPageQuestions(w.kb, pw, 'dev', taken('dev')),
    test: buildPageQuestions(w.kb, pw, 'test', taken('test')),
  };
  return { pw, questions, oracle: new PageOracle(w.kb, pw, w.bm25) };
}

/** Page-question oracle trajectories (deterministic; the seeds of `oracleTrajectories`). */
export function pageOracleTrajectories(ps: PageSet, qs: Question[], seed: number, flawRate = 0.3): PageOracleTrajectory[] {
  return qs.map((q, i) => ps.oracle.trajectory(q, new SeededRandom(seed * 7919 + i * 104729 + 17), flawRate));
}

/**
 * The page files of data/world (exact bytes), new files beside `worldFiles`' (which stay as they
 * were): pages.jsonl (`{url, title, contents}`, the page tool's input), corpus-pages.jsonl (the
 * corpus with each document's page `url`), {train,dev,test}-pages.jsonl (page questions, kind
 * `page`), oracle-dev-pages.jsonl (flawless oracle trajectories of the dev page questions, each
 * access round with its chunk number) and meta-pages.json.
 */
export function pageFiles(w: World, ps: PageSet = buildPageSet(w)): Record<string, string> {
  const files: Record<string, string> = {};
  files['pages.jsonl'] = jsonl(ps.pw.pages);
  files['corpus-pages.jsonl'] = jsonl(ps.pw.corpus);
  for (const split of SPLITS) files[`${split}-pages.jsonl`] = jsonl(ps.questions[split].map((q) => pageQuestionRecord(w.kb, ps.pw, q)));
  const devTraj = pageOracleTrajectories(ps, ps.questions.dev, w.seed + 13, 0);
  files['oracle-dev-pages.jsonl'] = jsonl(devTraj.map((t) => ({
    qid: t.qid, question: t.question, golds: t.golds, correct: t.correct, factChunkRound: t.factChunkRound, pageFact: t.pageFact,
    rounds: t.rounds.map((r) => ({
      text: r.text,
      ...(r.observation !== undefined ? { observation: r.observation } : {}),
      ...(r.page !== undefined ? { page: r.page } : {}),
    })),
  })));
  const chunkOf: Record<string, number> = {};
  for (const p of ps.pw.places.values()) chunkOf[String(p.chunk + 1)] = (chunkOf[String(p.chunk + 1)] ?? 0) + 1;
  const lens = ps.pw.pages.map((p) => p.contents.length);
  const meta = {
    seed: w.seed,
    pages: ps.pw.pages.length,
    pageChars: { min: Math.min(...lens), max: Math.max(...lens), total: lens.reduce((a, b) => a + b, 0) },
    paging: WORLD_PAGING,
    /** Pages by the chunk (1-based) that states the page-only fact. */
    pageFactChunk: chunkOf,
    questions: Object.fromEntries(SPLITS.map((s) => [s, ps.questions[s].length])),
  };
  files['meta-pages.json'] = JSON.stringify(meta, null, 2) + '\n';
  return files;
}
