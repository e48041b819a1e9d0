/**
 * The local page tool (docs/algorithm.md §1): ASearcher's pages JSONL, one `{ url, title,
 * contents }` per line (`tools/local_retrieval_server.py`, `PageAccess`), looked up by URL. A
 * `Bm25Retriever` given a `PageStore` answers `access`, and `mempo serve-retriever --pages FILE`
 * serves it as `POST /access`.
 */
import { z } from 'zod';
import { MempoError } from '../errors';
import { readJsonlLines } from '../io/jsonl';
import type { Page } from '../contracts';

export const pageLineSchema = z.object({
  url: z.string().min(1),
  title: z.string().default(''),
  contents: z.string(),
});

/** ASearcher's one rewrite of a URL before the lookup (MediaWiki's `index.php/Title` → `index.php?title=Title`). */
export function normalizePageUrl(url: string): string {
  return url.includes('index.php/') ? url.replace('index.php/', 'index.php?title=') : url;
}

export class PageStore {
  readonly name: string;
  readonly size: number;
  private readonly pages = new Map<string, Page>();

  constructor(pages: readonly Page[], name = 'pages') {
    this.name = name;
    pages.forEach((p, i) => {
      if (this.pages.has(p.url)) throw new MempoError('ERR_INVALID_INPUT', `${name}: page ${i + 1} repeats the url ${JSON.stringify(p.url)}`);
      this.pages.set(p.url, { url: p.url, title: p.title, contents: p.contents });
    });
    this.size = this.pages.size;
  }

  /** Loads and validates a pages JSONL file; a repeated url is an error naming both lines. */
  static fromJsonl(file: string): PageStore {
    const lines = readJsonlLines(file, pageLineSchema, 'pages file');
    const seen = new Map<string, number>();
    for (const { line, value } of lines) {
      const prev = seen.get(value.url);
      if (prev !== undefined) throw new MempoError('ERR_INVALID_INPUT', `${file}:${line}: field "url": ${JSON.stringify(value.url)} repeats line ${prev}`);
      seen.set(value.url, line);
    }
    return new PageStore(lines.map((l) => l.value), `pages:${file}`);
  }

  /** The page at `url`, or null. */
  get(url: string): Page | null {
    return this.pages.get(normalizePageUrl(url)) ?? null;
  }

  /** The page of every URL, in order, null where there is none (the `Retriever.access` contract). */
  access(urls: readonly string[]): Promise<Array<Page | null>> {
    return Promise.resolve(urls.map((u) => this.get(u)));
  }
}
