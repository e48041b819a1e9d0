/**
 * One round's text (docs/algorithm.md §1): rendering it in the canonical layout and reading it
 * back, both by the round grammar of `grammar.ts`. The readers never throw on model output:
 * unclosed or repeated tags, text outside tags, a blank query, ... are violations of the round.
 */
import { ACCESS_CLOSE, ACCESS_OPEN, ANSWER_CLOSE, ANSWER_OPEN, MEM_CLOSE, MEM_OPEN, SEARCH_CLOSE, SEARCH_OPEN, THINK_CLOSE, THINK_OPEN } from './tags';
import { checkRound, firstClosed, SEARCH_GRAMMAR, type ActionName, type Grammar, type Violation } from './grammar';

export type { Grammar, Violation, ViolationCode } from './grammar';

/** Memory text of round 1 (nothing found yet). */
export const EMPTY_MEMORY = 'none';

export type RoundAction = { kind: 'search'; query: string } | { kind: 'access'; url: string } | { kind: 'answer'; answer: string };

/** Build one round's generated text in the canonical layout; `action` null: a reading round (`<mem>`, `<think>`, no action). */
export function renderRound(mem: string, think: string, action: RoundAction | null): string {
  const act = action === null
    ? ''
    : action.kind === 'search'
      ? `${SEARCH_OPEN}${action.query}${SEARCH_CLOSE}`
      : action.kind === 'access'
        ? `${ACCESS_OPEN}${action.url}${ACCESS_CLOSE}`
        : `${ANSWER_OPEN}${action.answer}${ANSWER_CLOSE}`;
  return `${MEM_OPEN}${mem}${MEM_CLOSE}${THINK_OPEN}${think}${THINK_CLOSE}${act}`;
}

export interface ParsedRound {
  mem: string | null;
  think: string | null;
  search: string | null;
  /** Only in `ACCESS_GRAMMAR` (an agent with the page tool); else `<access>` is text and this is null. */
  access: string | null;
  answer: string | null;
}

/** Loose read of one round: the untrimmed content of the first closed block of each tag; no validation. */
export function parseRound(text: string, grammar: Grammar = SEARCH_GRAMMAR): ParsedRound {
  const { blocks } = checkRound(text, grammar);
  const content = (name: 'mem' | 'think' | ActionName) => firstClosed(blocks, [name])?.content ?? null;
  return { mem: content('mem'), think: content('think'), search: content('search'), access: content('access'), answer: content('answer') };
}

export type RoundActionKind = ActionName;

export interface ParsedRoundOutput {
  /** Content of the first closed `<mem>` (untrimmed), or null. */
  mem: string | null;
  think: string | null;
  /** Trimmed query of the first closed `<search>`, or null. */
  search: string | null;
  /** Trimmed URL of the first closed `<access>` (`ACCESS_GRAMMAR` only), or null. */
  access: string | null;
  /** Trimmed content of the first closed `<answer>`, or null. */
  answer: string | null;
  /** The round's action: the first closed action block; null when there is none. */
  action: RoundActionKind | null;
  violations: Violation[];
}

/** Parses one round of generated text, with every violation of the round grammar. */
export function parseRoundOutput(text: string, grammar: Grammar = SEARCH_GRAMMAR): ParsedRoundOutput {
  const { blocks, violations } = checkRound(text, grammar);
  const act = firstClosed(blocks, grammar.actions);
  const action = act === undefined ? null : (act.name as ActionName);
  return {
    mem: firstClosed(blocks, ['mem'])?.content ?? null,
    think: firstClosed(blocks, ['think'])?.content ?? null,
    search: action === 'search' ? act!.content.trim() : null,
    access: action === 'access' ? act!.content.trim() : null,
    answer: action === 'answer' ? act!.content.trim() : null,
    action,
    violations,
  };
}
