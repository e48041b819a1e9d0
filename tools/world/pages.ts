/**
 * The embedded world's webpages (issue 32): every entity gets a long page at a URL — its search
 * document's facts, one fact that is on the page only, and seeded filler around them — and the
 * search documents carry that URL. Built beside the search world, never inside it: buildKB,
 * renderCorpus and the question splits draw nothing from here, so data/world's original files and
 * the shipped tokenizer regenerate byte-identically.
 *
 * A page is read in chunks of `PAGE_CHUNK_CHARS` characters (the page tool's `pageChunkChars`;
 * ASearcher's 25,000 would not fit the embedded model's 2,048-token context). The page-only fact
 * never straddles a chunk boundary and never lies in a chunk's first `SHORT_TEXT_CHARS` characters
 * (what a chunk keeps once it shrinks to its short text), and for most entities it is beyond the
 * first boundary: an agent that did not copy it into `<mem>` while its chunk was shown has lost it.
 */
import { SeededRandom } from '../../src/rng';
import {
  CorpusDoc, Entity, EntityType, KB, RELATION_BY_ID, RelationDef, SPLITS, Split, WORK_ADJECTIVES, WORK_NOUNS, factSentence, relationsOf,
} from './kb';
import type { Hop, Question } from './questions';

/** Characters per page chunk the world is built for (`--page-chunk-chars`). */
export const PAGE_CHUNK_CHARS = 1000;
/** Characters a shown chunk keeps afterwards (`memory.webpageShortTextChars`, docs/algorithm.md §7). */
export const SHORT_TEXT_CHARS = 100;
/** Pages have 2-4 chunks. */
const MIN_CHUNKS = 2;
const MAX_CHUNKS = 4;
/** Share of entities whose page-only fact lies in the first chunk (the others: in a later one). */
const FIRST_CHUNK_SHARE = 0.3;

/** Page-only relations: one per entity type, object an entity of the same split (so a chain can go on). */
export const PAGE_RELATIONS: readonly RelationDef[] = [
  {
    id: 'mentor', subject: 'person', object: 'person',
    sentence: (s, o) => `${s} was mentored by ${o}.`,
    question: (s) => `Who mentored ${s}?`,
    nounPhrase: (s) => `the mentor of ${s}`,
    // not "mentored by": "by" would match the documents that name the subject as a founder or author
    query: (s) => `${s} mentor`,
    think: (s) => `Find the mentor of ${s}.`,
  },
  {
    id: 'partner', subject: 'org', object: 'org',
    sentence: (s, o) => `${s} is a partner of ${o}.`,
    question: (s) => `Which organisation is a partner of ${s}?`,
    nounPhrase: (s) => `the partner of ${s}`,
    query: (s) => `${s} partner`,
    think: (s) => `Find the partner of ${s}.`,
  },
  {
    id: 'twin', subject: 'city', object: 'city',
    sentence: (s, o) => `${s} is twinned with ${o}.`,
    question: (s) => `Which city is twinned with ${s}?`,
    nounPhrase: (s) => `the twin city of ${s}`,
    query: (s) => `${s} twinned with`,
    think: (s) => `Find the twin city of ${s}.`,
  },
  {
    id: 'anthem', subject: 'country', object: 'work',
    sentence: (s, o) => `${s} has the anthem ${o}.`,
    question: (s) => `What is the anthem of ${s}?`,
    nounPhrase: (s) => `the anthem of ${s}`,
    query: (s) => `${s} anthem`,
    think: (s) => `Find the anthem of ${s}.`,
  },
  {
    id: 'setting', subject: 'work', object: 'city',
    sentence: (s, o) => `${s} is set in ${o}.`,
    question: (s) => `In which city is ${s} set?`,
    nounPhrase: (s) => `the setting of ${s}`,
    query: (s) => `${s} set in`,
    think: (s) => `Find the setting of ${s}.`,
  },
];

export const PAGE_RELATION_BY_ID: ReadonlyMap<string, RelationDef> = new Map(PAGE_RELATIONS.map((r) => [r.id, r]));

export function pageRelationOf(type: EntityType): RelationDef {
  const r = PAGE_RELATIONS.find((x) => x.subject === type);
  if (!r) throw new Error(`no page relation for ${type}`);
  return r;
}

/** The URL of an entity's page: its name with spaces as underscores (each name piece stays one token). */
export function pageUrl(name: string): string {
  return `https://world.wiki/${name.replace(/ /g, '_')}`;
}

export interface Page {
  url: string;
  title: string;
  contents: string;
}

/** Where the page-only fact of an entity lies. */
export interface PageFactPlace {
  /** 0-based chunk (of `PAGE_CHUNK_CHARS`) holding the whole sentence. */
  chunk: number;
  start: number;
  end: number;
  chunks: number;
}

/** A search document with the URL of its entity's page. */
export interface UrlDoc extends CorpusDoc {
  url: string;
}

export interface PageWorld {
  /** subject id -> page relation id -> object id (page-only facts; not in kb.facts). */
  facts: Map<string, Map<string, string>>;
  pages: Page[];
  /** entity id -> where its page-only fact lies. */
  places: Map<string, PageFactPlace>;
  /** corpus (same ids, titles, contents and order) with each entity's page URL. */
  corpus: UrlDoc[];
  byUrl: Map<string, Page>;
}

/** Seed offset of the page world (disjoint from the question splits' seed + 1..3 and the oracle's). */
const PAGE_SEED_OFFSET = 41;

/** The page-only fact sentence of an entity. */
export function pageFactSentence(kb: KB, pw: PageWorld, subjectId: string): string {
  const s = kb.byId.get(subjectId) as Entity;
  const r = pageRelationOf(s.type);
  const o = pw.facts.get(subjectId)?.get(r.id);
  if (o === undefined) throw new Error(`no page fact for ${subjectId}`);
  return r.sentence(s.name, (kb.byId.get(o) as Entity).name);
}

// ---------------------------------------------------------------- filler

/**
 * Filler sentences made of words the shipped tokenizer holds whole (about 4 characters a token,
 * against 2 for ordinary English), and never a name, a year or a relation phrase: nothing in it
 * can be mistaken for a fact.
 */
const FILLER: readonly ((a: () => string, n: () => string) => string)[] = [
  (a, n) => `The ${n()} was ${a()} and the ${n()} was ${a()}.`,
  (_a, n) => `In the city the ${n()} has its ${n()}.`,
  (_a, n) => `The country has its ${n()} with the ${n()}.`,
  (a, n) => `When the ${n()} was ${a()}, the ${n()} was ${a()}.`,
  (a, n) => `Where the ${n()} was not ${a()}, the ${n()} was.`,
  (a, n) => `The ${n()} of the city was ${a()}.`,
  (a, n) => `Then the ${n()} was ${a()} all year.`,
  (_a, n) => `Its home is the ${n()} of the country.`,
];

function fillerSentence(rng: SeededRandom): string {
  const a = () => rng.pick(WORK_ADJECTIVES);
  const n = () => rng.pick(WORK_NOUNS);
  return rng.pick(FILLER)(a, n);
}

/**
 * Page text: the name, then paragraphs of filler with the search document's facts in the first
 * chunk and the page-only fact at `factChunk`, each sentence whole inside one chunk and after the
 * chunk's first SHORT_TEXT_CHARS characters.
 */
function renderPage(
  rng: SeededRandom, name: string, docFacts: readonly string[], pageFact: string, chunks: number, factChunk: number,
): { contents: string; start: number; end: number } {
  const C = PAGE_CHUNK_CHARS;
  const target = (chunks - 1) * C + 300 + rng.int(C - 400);
  // earliest start offset of each fact: doc facts spread over the first chunk, the page fact in its chunk
  const docAt = docFacts.map((_, i) => SHORT_TEXT_CHARS + Math.floor(((i + rng.next()) * (C - 300)) / Math.max(1, docFacts.length)));
  const pageAt = factChunk * C + SHORT_TEXT_CHARS + rng.int(factChunk === 0 ? C - 600 : C - 400);
  const queue = docFacts.map((s, i) => ({ s, at: docAt[i] as number, page: false }));
  queue.push({ s: pageFact, at: pageAt, page: true });
  queue.sort((x, y) => x.at - y.at);
  let text = `${name}\n\n`;
  let inParagraph = 0;
  let paragraphLen = 4 + rng.int(4);
  let start = -1;
  while (text.length < target || queue.length > 0) {
    const sep = inParagraph === 0 ? '' : inParagraph >= paragraphLen ? '\n\n' : ' ';
    if (sep === '\n\n') {
      inParagraph = 0;
      paragraphLen = 4 + rng.int(4);
    }
    const head = queue[0];
    const from = text.length + sep.length;
    let sentence = '';
    if (head && head.at <= from) {
      const end = from + head.s.length;
      const chunkOf = (x: number) => Math.floor(x / C);
      // whole inside one chunk and out of the chunk's short text; else filler first
      if (chunkOf(from) === chunkOf(end - 1) && from % C >= SHORT_TEXT_CHARS) {
        sentence = head.s;
        queue.shift();
        if (head.page) {
          if (chunkOf(from) !== factChunk) throw new Error(`page fact of ${name} slipped to chunk ${chunkOf(from)}`);
          start = from;
        }
      }
    }
    if (sentence === '') sentence = fillerSentence(rng);
    text += sep + sentence;
    inParagraph++;
  }
  return { contents: text, start, end: start + pageFact.length };
}

/** Page-only facts, pages and the URL corpus of a world. Deterministic from kb.seed. */
export function buildPageWorld(kb: KB, corpus: readonly CorpusDoc[]): PageWorld {
  const rng = new SeededRandom(kb.seed + PAGE_SEED_OFFSET);
  const facts = new Map<string, Map<string, string>>();
  const pools = new Map<string, Entity[]>();
  for (const e of kb.entities) {
    const k = `${e.split}/${e.type}`;
    const p = pools.get(k);
    if (p) p.push(e);
    else pools.set(k, [e]);
  }
  for (const e of kb.entities) {
    const r = pageRelationOf(e.type);
    // never an entity the search document names: its answer is on the page only
    const named = new Set([e.id, ...(kb.facts.get(e.id)?.values() ?? [])]);
    const pool = (pools.get(`${e.split}/${r.object}`) ?? []).filter((x) => !named.has(x.id));
    facts.set(e.id, new Map([[r.id, rng.pick(pool).id]]));
  }
  const pw: PageWorld = { facts, pages: [], places: new Map(), corpus: [], byUrl: new Map() };
  kb.entities.forEach((e, i) => {
    const doc = corpus[i] as CorpusDoc;
    if (doc.title !== e.name) throw new Error(`corpus document ${i} is not ${e.name}`);
    const docFacts = relationsOf(e.type).filter((r) => kb.facts.get(e.id)?.has(r.id)).map((r) => factSentence(kb, e.id, r.id));
    const chunks = MIN_CHUNKS + rng.int(MAX_CHUNKS - MIN_CHUNKS + 1);
    const factChunk = rng.chance(FIRST_CHUNK_SHARE) ? 0 : 1 + rng.int(chunks - 1);
    const { contents, start, end } = renderPage(rng, e.name, docFacts, pageFactSentence(kb, pw, e.id), chunks, factChunk);
    const page = { url: pageUrl(e.name), title: e.name, contents };
    pw.pages.push(page);
    pw.byUrl.set(page.url, page);
    pw.places.set(e.id, { chunk: factChunk, start, end, chunks: Math.ceil(contents.length / PAGE_CHUNK_CHARS) });
    pw.corpus.push({ id: doc.id, title: doc.title, contents: doc.contents, url: page.url });
  });
  return pw;
}

/** The object of a page-only fact, or undefined. */
export function pageFactObject(pw: PageWorld, subjectId: string, relId: string): string | undefined {
  return pw.facts.get(subjectId)?.get(relId);
}

// ---------------------------------------------------------------- page questions

/** A search relation or a page-only one. */
export function anyRelation(id: string): RelationDef {
  const r = RELATION_BY_ID.get(id) ?? PAGE_RELATION_BY_ID.get(id);
  if (!r) throw new Error(`unknown relation ${id}`);
  return r;
}

export function isPageRelation(id: string): boolean {
  return PAGE_RELATION_BY_ID.has(id);
}

/** Page questions per split: chains of 1-3 hops with exactly one page-only hop, at any position. */
export const PAGE_COUNTS: Record<Split, { hop1: number; hop2: number; hop3: number }> = {
  train: { hop1: 800, hop2: 1200, hop3: 800 },
  dev: { hop1: 30, hop2: 40, hop3: 30 },
  test: { hop1: 60, hop2: 80, hop3: 60 },
};

/** Seed offset of the page questions of split s: seed + 50 + index of s. */
const PAGE_QUESTION_SEED_OFFSET = 50;

function pageChain(kb: KB, pw: PageWorld, rng: SeededRandom, pool: readonly Entity[], hops: number): Hop[] | null {
  const pageHop = rng.int(hops);
  let cur = rng.pick(pool);
  const seen = new Set<string>([cur.id]);
  const chain: Hop[] = [];
  for (let h = 0; h < hops; h++) {
    const last = h === hops - 1;
    let r: RelationDef;
    let o: string | undefined;
    if (h === pageHop) {
      r = pageRelationOf(cur.type);
      o = pageFactObject(pw, cur.id, r.id);
    } else {
      const rels = relationsOf(cur.type).filter((x) => kb.facts.get(cur.id)?.has(x.id) && (last || (x.object !== 'year' && x.nounPhrase !== null)));
      if (rels.length === 0) return null;
      r = rng.pick(rels);
      o = kb.facts.get(cur.id)?.get(r.id);
    }
    if (o === undefined) return null;
    if (r.object !== 'year') {
      if (seen.has(o)) return null;
      seen.add(o);
    }
    chain.push({ subject: cur.id, relation: r.id, object: o });
    if (!last) cur = kb.byId.get(o) as Entity;
  }
  return chain;
}

function objectText(kb: KB, h: Hop): string {
  return anyRelation(h.relation).object === 'year' ? h.object : (kb.byId.get(h.object) as Entity).name;
}

/** Question text of a chain that may hold page relations (as `chainQuestion`). */
export function pageChainQuestion(kb: KB, chain: readonly Hop[]): string {
  let phrase = (kb.byId.get((chain[0] as Hop).subject) as Entity).name;
  chain.forEach((hop, i) => {
    if (i < chain.length - 1) phrase = (anyRelation(hop.relation).nounPhrase as (s: string) => string)(phrase);
  });
  return anyRelation((chain[chain.length - 1] as Hop).relation).question(phrase);
}

/**
 * Page questions of a split (kind `page`): every answer needs the page-only fact of one hop's
 * subject. Texts never repeat one of `taken` (the split's search questions).
 */
export function buildPageQuestions(kb: KB, pw: PageWorld, split: Split, taken: ReadonlySet<string>): Question[] {
  const counts = PAGE_COUNTS[split];
  const rng = new SeededRandom(kb.seed + PAGE_QUESTION_SEED_OFFSET + SPLITS.indexOf(split));
  const pool = kb.entities.filter((e) => e.split === split);
  const out: Question[] = [];
  const seen = new Set(taken);
  for (const [hops, n] of [[1, counts.hop1], [2, counts.hop2], [3, counts.hop3]] as const) {
    let made = 0;
    for (let tries = 0; made < n && tries < n * 200; tries++) {
      const chain = pageChain(kb, pw, rng, pool, hops);
      if (!chain) continue;
      const text = pageChainQuestion(kb, chain);
      if (seen.has(text)) continue;
      seen.add(text);
      const ans = objectText(kb, chain[chain.length - 1] as Hop);
      out.push({
        id: `${split}-page-${out.length}`, question: text, golds: [ans], split, kind: 'page', hops, objectives: 1, chains: [chain], answers: [ans],
      });
      made++;
    }
    if (made < n) throw new Error(`only ${made} of ${n} ${hops}-hop page questions in ${split}`);
  }
  return out;
}

/**
 * Public JSONL record of a page question (names instead of ids, as `questionRecord`), with
 * `pageHop` (0-based hop whose fact is on a page only) and `pageChunk` (the 1-based chunk of
 * `PAGE_CHUNK_CHARS` that states it), so an evaluation can split page questions by both.
 */
export function pageQuestionRecord(kb: KB, pw: PageWorld, q: Question): object {
  const chain = q.chains[0] as Hop[];
  const pageHop = chain.findIndex((h) => isPageRelation(h.relation));
  const place = pw.places.get((chain[pageHop] as Hop).subject) as PageFactPlace;
  return {
    id: q.id, question: q.question, golds: q.golds, split: q.split, kind: q.kind, hops: q.hops, objectives: q.objectives,
    answers: q.answers, pageHop, pageChunk: place.chunk + 1,
    chains: q.chains.map((c) => c.map((h) => ({ subject: (kb.byId.get(h.subject) as Entity).name, relation: h.relation, object: objectText(kb, h) }))),
  };
}
