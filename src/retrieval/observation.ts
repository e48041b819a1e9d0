/**
 * The tools' observations (docs/algorithm.md §1-§2): a `Retriever` answers a batch of queries
 * with ranked documents (`renderSearchObservation`) and, with pages, a URL with a page that is
 * read one chunk per access (`chunkPage`, `renderWebpage`), each turned into the
 * `<information>` block the model reads, in mempo's format (the default) or ASearcher's.
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
  /** Rendered only when the document has one. */
  url?: string | undefined;
}

/** [decided] docs/algorithm.md §1: mempo's observation text (default) or ASearcher's (`agent/asearcher.py`). */
export type ObservationFormat = 'mempo' | 'asearcher';

/**
 * Observation block for retrieved documents, no surrounding whitespace:
 * `<information>Doc 1 (Title): contents\nDoc 2 (Title) [url]: contents</information>` (the URL
 * only when the document has one). No results: `<information>No results.</information>`.
 */
export function renderObservation(docs: readonly ObservationDoc[]): string {
  const body = docs.length === 0
    ? 'No results.'
    : docs.map((d, i) => `Doc ${i + 1} (${d.title})${d.url === undefined ? '' : ` [${d.url}]`}: ${d.contents}`).join('\n');
  return `${INFORMATION_OPEN}${body}${INFORMATION_CLOSE}`;
}

/**
 * ASearcher's block: `<information>\n[Doc 1](url):\ntext\n\n[Doc 2](url):\ntext\n</information>`,
 * the text as its server returns it (Search-R1's layout: the quoted title on the first line);
 * no results: `<information>\nNo search results are found.\n</information>`.
 */
function renderAsearcherObservation(docs: readonly ObservationDoc[]): string {
  const body = docs.length === 0
    ? 'No search results are found.'
    : docs.map((d, i) => `[Doc ${i + 1}](${d.url ?? ''}):\n${d.contents}`).join('\n\n');
  return `${INFORMATION_OPEN}\n${body}\n${INFORMATION_CLOSE}`;
}

export interface ObservationOptions {
  /** Each document's contents cut to this many characters (default 512); null keeps all. */
  docMaxChars?: number | null;
  /** 'mempo' (default) or 'asearcher'. */
  format?: ObservationFormat;
}

function cut(text: string, max: number | null): string {
  return max === null || text.length <= max ? text : text.slice(0, max);
}

/**
 * `<information>Doc 1 (Title): contents\n…</information>` with each document cut; ASearcher's
 * format cuts the document as its server returns it (`"Title"\ntext`, ASearcher's `doc[:5000]`).
 */
export function renderSearchObservation(docs: readonly RetrievedDoc[], options: ObservationOptions = {}): string {
  const max = options.docMaxChars === undefined ? 512 : options.docMaxChars;
  if (options.format === 'asearcher') {
    return renderAsearcherObservation(docs.map((d) => ({
      title: d.title,
      contents: cut(d.title.length > 0 ? `"${d.title}"\n${d.contents}` : d.contents, max),
      url: d.url,
    })));
  }
  return renderObservation(docs.map((d) => ({ title: d.title, contents: cut(d.contents, max), url: d.url })));
}

/** How a page is read (docs/algorithm.md §1; ASearcher: 250,000 / 25,000 / 10). */
export interface PagingOptions {
  pageMaxChars: number;
  pageChunkChars: number;
  pageMaxChunks: number;
}

/** ASearcher's paging: the page cut to pageMaxChars, then at most pageMaxChunks chunks of pageChunkChars; a blank page has none. */
export function chunkPage(contents: string, o: PagingOptions): string[] {
  if (contents.trim().length === 0) return [];
  let rest = contents.slice(0, o.pageMaxChars);
  const chunks: string[] = [];
  while (rest.length > 0 && chunks.length < o.pageMaxChunks) {
    chunks.push(rest.slice(0, o.pageChunkChars));
    rest = rest.slice(o.pageChunkChars);
  }
  return chunks;
}

/** ASearcher's answer to an unknown URL (and mempo's to a URL read to its end). */
export const NO_PAGE_TEXT = 'No More Information is Found for this URL.';

/** One chunk of a page as the model reads it: the whole chunk (`text`), and what later windows keep of it (`shortText`). */
export interface WebpageObservation {
  text: string;
  shortText: string;
  /** The chunk shown (1-based), null when there was no page to show. */
  page: number | null;
}

/**
 * Chunk `page` (1-based) of `pages` of the page at `url`: mempo's
 * `<information>Page 2 of 5 (url): chunk</information>` or ASearcher's
 * `<information>\n>>>> Page 2 >>>>\n\nchunk\n</information>`. The short text is the same block
 * with the chunk cut to `shortTextChars` (ASearcher's `short_text`: 100); null keeps it whole.
 */
export function renderWebpage(chunk: string, page: number, pages: number, url: string, format: ObservationFormat, shortTextChars: number | null): WebpageObservation {
  const block = (c: string) => (format === 'asearcher'
    ? `${INFORMATION_OPEN}\n>>>> Page ${page} >>>>\n\n${c}\n${INFORMATION_CLOSE}`
    : `${INFORMATION_OPEN}Page ${page} of ${pages} (${url}): ${c}${INFORMATION_CLOSE}`);
  return { text: block(chunk), shortText: block(cut(chunk, shortTextChars)), page };
}

/** The observation of an access that has no page to show (unknown URL, blank page, read to its end, empty URL). */
export function renderNoPage(format: ObservationFormat): WebpageObservation {
  const text = format === 'asearcher' ? `${INFORMATION_OPEN}\n${NO_PAGE_TEXT}\n${INFORMATION_CLOSE}` : `${INFORMATION_OPEN}${NO_PAGE_TEXT}${INFORMATION_CLOSE}`;
  return { text, shortText: text, page: null };
}
