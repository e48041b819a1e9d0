/**
 * The search tool (SPEC §1-§2): a `Retriever` answers a batch of queries with ranked documents,
 * and `renderSearchObservation` turns them into the `<information>` block the model reads.
 */
import { renderObservation } from '../protocol/tags';

export interface RetrievedDoc {
  title: string;
  contents: string;
  score: number;
  id?: string;
}

/** Anything that answers queries with ranked documents: local BM25, an HTTP server, a fake. */
export interface Retriever {
  /** Short description for logs and summaries ("bm25:data/world/corpus.jsonl"). */
  readonly name: string;
  /** The top `topk` documents of every query, in query order. Throws when the tool fails. */
  search(queries: readonly string[], topk: number): Promise<RetrievedDoc[][]>;
}

export interface ObservationOptions {
  /** Each document's contents cut to this many characters (default 512); null keeps all. */
  docMaxChars?: number | null;
}

/** `<information>Doc 1 (Title): contents\n…</information>` with each document cut. */
export function renderSearchObservation(docs: readonly RetrievedDoc[], options: ObservationOptions = {}): string {
  const max = options.docMaxChars === undefined ? 512 : options.docMaxChars;
  return renderObservation(docs.map((d) => ({
    title: d.title,
    contents: max === null || d.contents.length <= max ? d.contents : d.contents.slice(0, max),
  })));
}
