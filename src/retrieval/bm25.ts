/**
 * The embedded retriever: BM25 (minisearch's BM25+, k1 1.2, b 0.7, delta 0.5) over a JSONL
 * corpus of `{ id, title, contents, url? }` lines, fields `title` and `contents` searched
 * together. A line without `title` is in Search-R1's wiki-18 layout (`{ id, contents:
 * "\"Title\"\ntext" }`): its title is the first line of `contents`, kept once. Given a `PageStore`
 * it is also the page tool (`access`, docs/algorithm.md §1).
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import MiniSearch from 'minisearch';
import { z } from 'zod';
import { MempoError } from '../errors';
import { readJsonlLines } from '../io/jsonl';
import type { Page, RetrievedDoc, Retriever } from '../contracts';
import { splitTitle } from './observation';
import type { PageStore } from './pages';

export const corpusLineSchema = z.object({
  id: z.preprocess((v) => (typeof v === 'number' && Number.isInteger(v) ? String(v) : v), z.string().min(1)),
  title: z.string().optional(),
  contents: z.string(),
  url: z.string().optional(),
}).transform(({ id, title, contents, url }) => ({
  id,
  ...(title === undefined ? splitTitle(contents) : { title, contents }),
  ...(url !== undefined ? { url } : {}),
}));

export type CorpusDocument = z.output<typeof corpusLineSchema>;

/** Longest stretch of queries answered without yielding to the event loop, in ms. */
const SLICE_MS = 5;

export interface Bm25Options {
  /** BM25 parameters (minisearch defaults). */
  k?: number;
  b?: number;
  d?: number;
  /** Weight of a title match relative to a contents match (default 1). */
  titleBoost?: number;
}

export class Bm25Retriever implements Retriever {
  readonly name: string;
  readonly size: number;
  private readonly index: MiniSearch<CorpusDocument>;
  private readonly docs: Map<string, CorpusDocument>;
  private readonly options: Required<Bm25Options>;
  /** The page tool, when the retriever was given pages. */
  readonly access?: (urls: readonly string[]) => Promise<Array<Page | null>>;

  constructor(docs: readonly CorpusDocument[], options: Bm25Options = {}, name = 'bm25', readonly pages: PageStore | null = null) {
    this.name = name;
    if (pages !== null) this.access = (urls) => pages.access(urls);
    this.options = { k: options.k ?? 1.2, b: options.b ?? 0.7, d: options.d ?? 0.5, titleBoost: options.titleBoost ?? 1 };
    this.docs = new Map();
    docs.forEach((doc, i) => {
      if (this.docs.has(doc.id)) {
        throw new MempoError('ERR_INVALID_INPUT', `${name}: document ${i + 1} repeats the id ${JSON.stringify(doc.id)}`);
      }
      this.docs.set(doc.id, doc);
    });
    this.size = docs.length;
    this.index = new MiniSearch<CorpusDocument>({ fields: ['title', 'contents'], idField: 'id' });
    this.index.addAll(docs as CorpusDocument[]);
  }

  /** Loads and validates a JSONL corpus (`{ id, title, contents }` per line), with `pages` the page tool. */
  static fromJsonl(file: string, options: Bm25Options = {}, pages: PageStore | null = null): Bm25Retriever {
    const lines = readJsonlLines(file, corpusLineSchema, 'corpus');
    const seen = new Map<string, number>();
    for (const { line, value } of lines) {
      const prev = seen.get(value.id);
      if (prev !== undefined) throw new MempoError('ERR_INVALID_INPUT', `${file}:${line}: field "id": ${JSON.stringify(value.id)} repeats line ${prev}`);
      seen.set(value.id, line);
    }
    return new Bm25Retriever(lines.map((l) => l.value), options, `bm25:${file}`, pages);
  }

  /**
   * One list of hits per query. BM25 is synchronous: the queries are answered in slices of about
   * SLICE_MS with a turn of the event loop between them, so that a long request (many or long
   * queries) does not stall the other requests of `mempo serve-retriever`.
   */
  async search(queries: readonly string[], topk: number): Promise<RetrievedDoc[][]> {
    const qs = [...queries];
    const out: RetrievedDoc[][] = [];
    let since = performance.now();
    for (const q of qs) {
      if (performance.now() - since >= SLICE_MS) {
        await nextTurn();
        since = performance.now();
      }
      out.push(this.searchOne(q, topk));
    }
    return out;
  }

  searchOne(query: string, topk: number): RetrievedDoc[] {
    if (query.trim().length === 0) return [];
    const hits = this.index.search(query, {
      combineWith: 'OR',
      prefix: false,
      fuzzy: false,
      boost: { title: this.options.titleBoost },
      bm25: { k: this.options.k, b: this.options.b, d: this.options.d },
    });
    return hits.slice(0, topk).map((h) => {
      const doc = this.docs.get(String(h.id))!;
      return { id: doc.id, title: doc.title, contents: doc.contents, score: h.score, ...(doc.url !== undefined ? { url: doc.url } : {}) };
    });
  }
}
