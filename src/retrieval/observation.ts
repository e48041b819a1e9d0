/**
 * The search tool (SPEC §1-§2): a `Retriever` answers a batch of queries with ranked documents,
 * and `renderSearchObservation` turns them into the `<information>` block the model reads.
 */
import type { RetrievedDoc } from '../contracts';
import { renderObservation } from '../protocol/tags';

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
