/**
 * The page tool's scripted world, shared by the access and chunk-queue suites: one search document
 * and its three-chunk page, and what the tool shows of them, written out by hand (mempo's
 * observation format), never produced by the code under test.
 */
import { renderPrompt as renderPromptWith } from '../../src/protocol/chat';
import type { Page } from '../../src/contracts';

// The page-tool agent's system message, written out (docs/algorithm.md §1): with tool.access it replaces the search-only one.
export const ACCESS_PROMPT = 'Answer with search and pages. Each turn: memory of facts found, thoughts, then a search, a page access or the answer.';
export const renderPrompt = (question: string) => renderPromptWith(question, ACCESS_PROMPT);
export const URL_M = 'https://world.wiki/Mamek';
export const URL_X = 'https://world.wiki/Nowhere';
// Three chunks of 60, 60 and 20 characters; the fact (Thersekle) is only in chunk 2, past its first 20 characters.
export const C1 = 'Mamek is an old city with a river and many bridges to see'.padEnd(60, '.');
export const C2 = 'Mamek lies in the land of Thersekle, by the sea, maps say'.padEnd(60, '.');
export const C3 = 'The end of the page.';
export const PAGE: Page = { url: URL_M, title: 'Mamek', contents: C1 + C2 + C3 };
export const DOC = { id: 'd1', title: 'Mamek', contents: 'Mamek is a city. Its page says more.', url: URL_M };
// What the tool shows.
export const SEARCH_OBS = `<information>Doc 1 (Mamek) [${URL_M}]: Mamek is a city. Its page says more.</information>`;
export const P1 = `<information>Page 1 of 3 (${URL_M}): ${C1}</information>`;
export const P2 = `<information>Page 2 of 3 (${URL_M}): ${C2}</information>`;
export const P3 = `<information>Page 3 of 3 (${URL_M}): ${C3}</information>`;
export const NONE = '<information>No More Information is Found for this URL.</information>';
