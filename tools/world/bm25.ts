/**
 * The world's own BM25 (minisearch-flavoured: BM25+ with k1 = 1.2, b = 0.7, delta = 0.5, fields
 * `title` and `contents` scored separately and summed, terms = lower-cased words split on
 * whitespace and punctuation, OR semantics). It produces the oracle observations, so its
 * ranking is frozen into data/world/oracle-dev.jsonl and, through the flawed trajectories the
 * tokenizer is trained on, into models/mempo-tiny/tokenizer.json. It is not the rollouts'
 * retriever (src/retrieval/bm25.ts, minisearch), which counts field lengths in distinct terms
 * and multiplies a score by the number of query terms matched: both rank the same document
 * first for every oracle query, but documents 2-3 differ in about half of them
 * (test/tools/world-data.test.ts checks the rank-1 agreement).
 */
import type { CorpusDoc } from './kb';

export function bm25Tokenize(text: string): string[] {
  return text
    .split(/[\n\r\p{Z}\p{P}]+/u)
    .filter((t) => t.length > 0)
    .map((t) => t.toLowerCase());
}

interface FieldIndex {
  postings: Map<string, Map<number, number>>; // term -> doc -> tf
  lengths: number[];
  avgLen: number;
}

export interface SearchHit {
  index: number;
  id: string;
  score: number;
}

export class Bm25 {
  readonly docs: readonly CorpusDoc[];
  private fields: FieldIndex[];
  constructor(docs: readonly CorpusDoc[], readonly k1 = 1.2, readonly b = 0.7, readonly delta = 0.5) {
    this.docs = docs;
    this.fields = [
      this.index(docs.map((d) => d.title)),
      this.index(docs.map((d) => d.contents)),
    ];
  }

  private index(texts: string[]): FieldIndex {
    const postings = new Map<string, Map<number, number>>();
    const lengths: number[] = [];
    texts.forEach((t, i) => {
      const toks = bm25Tokenize(t);
      lengths.push(toks.length);
      for (const tok of toks) {
        let p = postings.get(tok);
        if (!p) {
          p = new Map();
          postings.set(tok, p);
        }
        p.set(i, (p.get(i) ?? 0) + 1);
      }
    });
    const avgLen = lengths.reduce((a, x) => a + x, 0) / Math.max(1, lengths.length);
    return { postings, lengths, avgLen };
  }

  search(query: string, k = 3): SearchHit[] {
    const terms = [...new Set(bm25Tokenize(query))];
    const scores = new Map<number, number>();
    const N = this.docs.length;
    for (const f of this.fields) {
      for (const term of terms) {
        const p = f.postings.get(term);
        if (!p) continue;
        const idf = Math.log(1 + (N - p.size + 0.5) / (p.size + 0.5));
        for (const [doc, tf] of p) {
          const len = f.lengths[doc] ?? 0;
          const norm = tf * (this.k1 + 1) / (tf + this.k1 * (1 - this.b + this.b * len / f.avgLen));
          scores.set(doc, (scores.get(doc) ?? 0) + idf * (norm + this.delta));
        }
      }
    }
    return [...scores.entries()]
      .sort((a, b) => b[1] - a[1] || a[0] - b[0])
      .slice(0, k)
      .map(([index, score]) => ({ index, id: (this.docs[index] as CorpusDoc).id, score }));
  }
}
