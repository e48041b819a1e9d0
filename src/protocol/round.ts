/**
 * One round's text (docs/algorithm.md §1): rendering it in the canonical layout and reading it
 * back, both by the round grammar of `grammar.ts`. The readers never throw on model output:
 * unclosed or repeated tags, text outside tags, a blank query, ... are violations of the round.
 */
import { ANSWER_CLOSE, ANSWER_OPEN, MEM_CLOSE, MEM_OPEN, SEARCH_CLOSE, SEARCH_OPEN, THINK_CLOSE, THINK_OPEN } from './tags';
import { checkRound, firstClosed, type ActionName, type Violation } from './grammar';

export type { Violation, ViolationCode } from './grammar';

/** Memory text of round 1 (nothing found yet). */
export const EMPTY_MEMORY = 'none';

export type RoundAction = { kind: 'search'; query: string } | { kind: 'answer'; answer: string };

/** Build one round's generated text in the canonical layout. */
export function renderRound(mem: string, think: string, action: RoundAction): string {
  const act = action.kind === 'search'
    ? `${SEARCH_OPEN}${action.query}${SEARCH_CLOSE}`
    : `${ANSWER_OPEN}${action.answer}${ANSWER_CLOSE}`;
  return `${MEM_OPEN}${mem}${MEM_CLOSE}${THINK_OPEN}${think}${THINK_CLOSE}${act}`;
}

export interface ParsedRound {
  mem: string | null;
  think: string | null;
  search: string | null;
  answer: string | null;
}

/** Loose read of one round: the untrimmed content of the first closed block of each tag; no validation. */
export function parseRound(text: string): ParsedRound {
  const { blocks } = checkRound(text);
  const content = (name: 'mem' | 'think' | ActionName) => firstClosed(blocks, [name])?.content ?? null;
  return { mem: content('mem'), think: content('think'), search: content('search'), answer: content('answer') };
}

export type RoundActionKind = ActionName;

export interface ParsedRoundOutput {
  /** Content of the first closed `<mem>` (untrimmed), or null. */
  mem: string | null;
  think: string | null;
  /** Trimmed query of the first closed `<search>`, or null. */
  search: string | null;
  /** Trimmed content of the first closed `<answer>`, or null. */
  answer: string | null;
  /** The round's action: the first closed search or answer; null when there is none. */
  action: RoundActionKind | null;
  violations: Violation[];
}

/** Parses one round of generated text, with every violation of the round grammar. */
export function parseRoundOutput(text: string): ParsedRoundOutput {
  const { blocks, violations } = checkRound(text);
  const act = firstClosed(blocks, ['search', 'answer']);
  const action = act === undefined ? null : (act.name as ActionName);
  return {
    mem: firstClosed(blocks, ['mem'])?.content ?? null,
    think: firstClosed(blocks, ['think'])?.content ?? null,
    search: action === 'search' ? act!.content.trim() : null,
    answer: action === 'answer' ? act!.content.trim() : null,
    action,
    violations,
  };
}
