/** Locations of the embedded model, corpus, question splits and learner (relative to the package root). */
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** The package root: the directory holding package.json above this file (src/ or dist/). */
export function packageRoot(): string {
  let dir = resolve(__dirname);
  for (let i = 0; i < 5; i++) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'models'))) return dir;
    dir = resolve(dir, '..');
  }
  return resolve(__dirname, '..', '..');
}

/** The installed package's version (its package.json). */
export function packageVersion(): string {
  return (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version: string }).version;
}

/**
 * The embedded assets inside the installed package: `EMBEDDED.model()`, `.corpus()`,
 * `.split('train' | 'dev' | 'test' | 'train-pages' | 'dev-pages' | 'test-pages')`, the page world's
 * `.corpusPages()` (the corpus with each document's URL) and `.pages()` (the page tool's pages,
 * built for `tool.pageChunkChars` 1,000), `.learner()`.
 */
export const EMBEDDED = {
  model: () => join(packageRoot(), 'models', 'mempo-tiny'),
  corpus: () => join(packageRoot(), 'data', 'world', 'corpus.jsonl'),
  corpusPages: () => join(packageRoot(), 'data', 'world', 'corpus-pages.jsonl'),
  pages: () => join(packageRoot(), 'data', 'world', 'pages.jsonl'),
  /** The page world's meta-data: its `paging` ({ pageMaxChars, pageChunkChars, pageMaxChunks }) is what the pages were built for. */
  pagesMeta: () => join(packageRoot(), 'data', 'world', 'meta-pages.json'),
  split: (name: string) => join(packageRoot(), 'data', 'world', `${name}.jsonl`),
  /** The torch reference learner's Python package folder (PYTHONPATH), docs/learner.md. */
  learner: () => join(packageRoot(), 'learner'),
};
