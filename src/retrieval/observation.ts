/**
 * The search tool's observation (docs/algorithm.md §1-§2): a `Retriever` answers a batch of
 * queries with ranked documents, and `renderSearchObservation` turns them into the
 * `<information>` block the model reads.
 */
import type { RetrievedDoc } from '../contracts';
import { INFORMATION_CLOSE, INFORMATION_OPEN } from '../protocol/tags';

/**
 * Search-R1's corpus layout (wiki-18: `{ id, contents: "\"Title\"\ntext" }`): a document without
 * a title has it on the first line of `contents`, in quotes. Returns the title once and the text
 * without it; contents without a line break have no title.
 */
export function splitTitle(contents: string): { title: string; contents: string } {
  const nl = contents.indexOf('\n');
  if (nl < 0) return { title: '', contents };
  return { title: contents.slice(0, nl).trim().replace(/^"(.*)"$/, '$1'), contents: contents.slice(nl + 1).trim() };
}

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
