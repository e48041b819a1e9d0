/**
 * The search tool's observation (docs/algorithm.md §1-§2): a `Retriever` answers a batch of
 * queries with ranked documents, and `renderSearchObservation` turns them into the
 * `<information>` block the model reads.
 */
import type { RetrievedDoc } from '../contracts';
import { INFORMATION_CLOSE, INFORMATION_OPEN } from '../protocol/tags';

/** Number of documents the retriever returns per search. */
export const DEFAULT_TOPK = 3;

export interface ObservationDoc {
  title: string;
  contents: string;
}

/**
 * Observation block for retrieved documents, no surrounding whitespace:
 * `<information>Doc 1 (Title): contents\nDoc 2 (Title): contents</information>`.
 * No results: `<information>No results.</information>`.
 */
export function renderObservation(docs: readonly ObservationDoc[]): string {
  const body = docs.length === 0
    ? 'No results.'
    : docs.map((d, i) => `Doc ${i + 1} (${d.title}): ${d.contents}`).join('\n');
  return `${INFORMATION_OPEN}${body}${INFORMATION_CLOSE}`;
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
