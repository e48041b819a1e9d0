/**
 * The page tool's paging and observations (docs/algorithm.md §1), against ASearcher's
 * `agent/asearcher.py` (`consume_tool_response`): a page cut to 250,000 characters, at most 10
 * chunks of 25,000, each `<information>\n>>>> Page k >>>>\n\n…\n</information>` with a short text of
 * its first 100 characters; mempo's own format beside it; the local pages JSONL.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chunkPage, NO_PAGE_TEXT, renderNoPage, renderSearchObservation, renderWebpage } from '../../src/retrieval/observation';
import { PageStore } from '../../src/retrieval/pages';
import { Bm25Retriever } from '../../src/retrieval/bm25';
import { resolveOptions } from '../../src/options';

const ASEARCHER = { pageMaxChars: 250_000, pageChunkChars: 25_000, pageMaxChunks: 10 };

/** ASearcher's loop, transcribed from agent/asearcher.py (the reference the code must agree with). */
function asearcherJobs(page: string): Array<{ text: string; short_text: string }> {
  const jobs: Array<{ text: string; short_text: string }> = [];
  if (page.trim() === '') return [{ text: '<information>\nNo More Information is Found for this URL.\n</information>', short_text: '' }];
  let p = page.slice(0, 250000);
  while (p.length > 0 && jobs.length < 10) {
    const len = Math.min(25000, p.length);
    jobs.push({
      text: `<information>\n>>>> Page ${jobs.length + 1} >>>>\n\n${p.slice(0, len)}\n</information>`,
      short_text: `<information>\n>>>> Page ${jobs.length + 1} >>>>\n\n${p.slice(0, 100)}\n</information>`,
    });
    p = p.slice(len);
  }
  return jobs;
}

describe('paging as ASearcher', () => {
  test('the defaults are ASearcher\'s: 250,000 characters, chunks of 25,000, at most 10', () => {
    const t = resolveOptions({}).tool;
    expect([t.pageMaxChars, t.pageChunkChars, t.pageMaxChunks]).toEqual([250_000, 25_000, 10]);
    expect([t.access, t.observationFormat]).toEqual([false, 'mempo']);
  });

  test.each([
    ['a short page', 'abc '.repeat(10)],
    ['a page of 2.5 chunks', Array.from({ length: 62_500 }, (_, i) => String.fromCharCode(97 + (i % 26))).join('')],
    ['a page past 250,000 characters', Array.from({ length: 300_001 }, (_, i) => String.fromCharCode(65 + ((i * 7) % 26))).join('')],
    ['exactly one chunk', 'z'.repeat(25_000)],
  ])('%s: the same chunks, texts and short texts as asearcher.py', (_name, page) => {
    const chunks = chunkPage(page, ASEARCHER);
    const ours = chunks.map((c, i) => renderWebpage(c, i + 1, chunks.length, 'https://x', 'asearcher', 100));
    expect(ours.map((o) => ({ text: o.text, short_text: o.shortText }))).toEqual(asearcherJobs(page));
    expect(ours.map((o) => o.page)).toEqual(chunks.map((_c, i) => i + 1));
  });

  test('a page of 300,000 characters is read as 10 chunks ending at character 250,000', () => {
    const page = Array.from({ length: 300_000 }, (_, i) => String(i % 10)).join('');
    const chunks = chunkPage(page, ASEARCHER);
    expect(chunks).toHaveLength(10);
    expect(chunks.every((c) => c.length === 25_000)).toBe(true);
    expect(chunks.join('')).toBe(page.slice(0, 250_000));
  });

  test('a blank page has no chunks; no page answers ASearcher\'s sentence in either format', () => {
    expect(chunkPage(' \n\t', ASEARCHER)).toEqual([]);
    expect(asearcherJobs(' ')[0]!.text).toBe(renderNoPage('asearcher').text);
    expect(renderNoPage('mempo')).toEqual({ text: `<information>${NO_PAGE_TEXT}</information>`, shortText: `<information>${NO_PAGE_TEXT}</information>`, page: null });
  });

  test("mempo's format: the chunk with its page number, count and URL; the short text keeps the first characters", () => {
    const o = renderWebpage('0123456789abcdef', 2, 3, 'https://world.wiki/Mamek', 'mempo', 10);
    expect(o).toEqual({
      text: '<information>Page 2 of 3 (https://world.wiki/Mamek): 0123456789abcdef</information>',
      shortText: '<information>Page 2 of 3 (https://world.wiki/Mamek): 0123456789</information>',
      page: 2,
    });
    expect(renderWebpage('abc', 1, 1, 'u', 'mempo', null).shortText).toBe('<information>Page 1 of 1 (u): abc</information>');
  });
});

describe('search observations with URLs', () => {
  const docs = [
    { title: 'Mamek', contents: 'Mamek is a city in Thersekle.', score: 2, url: 'https://world.wiki/Mamek' },
    { title: 'Other', contents: 'Nothing here.', score: 1 },
  ];

  test('mempo format: a URL is shown only when the document has one', () => {
    expect(renderSearchObservation(docs)).toBe('<information>Doc 1 (Mamek) [https://world.wiki/Mamek]: Mamek is a city in Thersekle.\nDoc 2 (Other): Nothing here.</information>');
  });

  test("asearcher format: [Doc k](url): and the document as ASearcher's server returns it, cut to docMaxChars", () => {
    expect(renderSearchObservation(docs, { format: 'asearcher', docMaxChars: 5000 })).toBe(
      '<information>\n[Doc 1](https://world.wiki/Mamek):\n"Mamek"\nMamek is a city in Thersekle.\n\n[Doc 2]():\n"Other"\nNothing here.\n</information>',
    );
    expect(renderSearchObservation(docs, { format: 'asearcher', docMaxChars: 12 })).toBe('<information>\n[Doc 1](https://world.wiki/Mamek):\n"Mamek"\nMame\n\n[Doc 2]():\n"Other"\nNoth\n</information>');
    expect(renderSearchObservation([], { format: 'asearcher' })).toBe('<information>\nNo search results are found.\n</information>');
  });
});

describe('PageStore (pages JSONL)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mempo-pages-'));

  test('looks pages up by URL, null for an unknown one, with ASearcher\'s index.php rewrite', async () => {
    const file = join(dir, 'pages.jsonl');
    writeFileSync(file, [
      { url: 'https://world.wiki/Mamek', title: 'Mamek', contents: 'Mamek is a city.' },
      { url: 'https://w.org/index.php?title=Hub', title: 'Hub', contents: 'A hub.', extra: 1 },
    ].map((l) => JSON.stringify(l)).join('\n'));
    const store = PageStore.fromJsonl(file);
    expect(store.size).toBe(2);
    expect(await store.access(['https://world.wiki/Mamek', 'https://nowhere', 'https://w.org/index.php/Hub'])).toEqual([
      { url: 'https://world.wiki/Mamek', title: 'Mamek', contents: 'Mamek is a city.' },
      null,
      { url: 'https://w.org/index.php?title=Hub', title: 'Hub', contents: 'A hub.' },
    ]);
    const bm25 = new Bm25Retriever([{ id: '1', title: 'Mamek', contents: 'Mamek is a city.' }], {}, 'bm25', store);
    expect(await bm25.access!(['https://world.wiki/Mamek'])).toEqual([store.get('https://world.wiki/Mamek')]);
    expect(new Bm25Retriever([{ id: '1', title: 'Mamek', contents: 'Mamek is a city.' }]).access).toBeUndefined();
  });

  test('a repeated URL or a line without contents is an error naming the line and field', () => {
    const rep = join(dir, 'rep.jsonl');
    writeFileSync(rep, `${JSON.stringify({ url: 'u', title: 'A', contents: 'a' })}\n${JSON.stringify({ url: 'u', title: 'B', contents: 'b' })}\n`);
    expect(() => PageStore.fromJsonl(rep)).toThrow(`${rep}:2: field "url": "u" repeats line 1`);
    const bad = join(dir, 'bad.jsonl');
    writeFileSync(bad, `${JSON.stringify({ url: 'u', title: 'A' })}\n`);
    expect(() => PageStore.fromJsonl(bad)).toThrow(/bad\.jsonl:1: .*contents/);
  });
});
