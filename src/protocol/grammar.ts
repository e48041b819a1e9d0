/**
 * The one round grammar (docs/algorithm.md §1). A round's generated text is
 *
 *   round  := ws MEM ws THINK ws ACTION ws
 *   MEM    := <mem> text </mem>          THINK := <think> text </think>
 *   ACTION := <search> query </search>  |  <access> url </access>  |  <answer> answer </answer>
 *             (query, url, answer not blank)
 *
 * where `text` holds no protocol tag and `ws` is whitespace only. `<access>` is an action only in
 * the grammar of an agent with the page tool (`ACCESS_GRAMMAR`); in `SEARCH_GRAMMAR`, the
 * default, it is text, so an agent without pages reads and reports rounds exactly as before.
 * A reading round (`tool.pageReading: 'queue'`, a round started while chunks of a page are
 * queued) is `ws MEM ws THINK ws` and stops at `</think>` (`READING_STOP_STRINGS`): its grammar
 * (`grammarFor(access, true)`) still lexes the action tags, but an action in it is a violation
 * (`action-while-reading`). `checkRound` reads a round
 * once (tag lexer → top-level blocks) and reports that reading two ways: every violation
 * (`parseRoundOutput`, the per-round statistics) and where the round first leaves the grammar
 * (the reason `validateFormat` gives). A round is valid exactly when it has no violation; the
 * loose `parseRound` reads the same blocks.
 */

export type ViolationCode =
  | 'unclosed-tag'
  | 'stray-close-tag'
  | 'nested-tag'
  | 'repeated-tag'
  | 'text-outside-tags'
  | 'missing-mem'
  | 'missing-think'
  | 'tag-order'
  | 'no-action'
  | 'two-actions'
  | 'empty-query'
  | 'empty-url'
  | 'empty-answer'
  | 'model-wrote-information'
  | 'action-while-reading';

export interface Violation {
  code: ViolationCode;
  message: string;
}

export const TAG_NAMES = ['mem', 'think', 'search', 'access', 'answer', 'information'] as const;
export type TagName = (typeof TAG_NAMES)[number];
export type ActionName = 'search' | 'access' | 'answer';

export interface TagToken {
  name: TagName;
  close: boolean;
  /** Offset of `<` and one past `>`. */
  index: number;
  end: number;
}

/** One block position of a round: which tags may fill it, and what its absence is. */
export interface GrammarSlot {
  names: readonly TagName[];
  /** The violation when the round has no closed block of this slot. */
  missing: ViolationCode;
  /** Where the slot's block is expected, for the first-deviation reason. */
  where: string;
}

/** The round grammar of an agent with the given actions (its tools and `answer`). */
export interface Grammar {
  readonly actions: readonly ActionName[];
  /** Matches the grammar's tags; anything else, `<b>` say, is text. */
  readonly tagRe: RegExp;
  /** The blocks of a round, in order. */
  readonly slots: readonly GrammarSlot[];
  /** A reading round's grammar: no action slot, and an action (still a tag) is a violation. */
  readonly reading: boolean;
}

function grammarOf(actions: readonly ActionName[], reading: boolean): Grammar {
  const names: TagName[] = ['mem', 'think', ...actions, 'information'];
  const slots: GrammarSlot[] = [
    { names: ['mem'], missing: 'missing-mem', where: 'to open the round' },
    { names: ['think'], missing: 'missing-think', where: 'after </mem>' },
  ];
  if (!reading) slots.push({ names: actions, missing: 'no-action', where: 'after </think>' });
  return { actions, tagRe: new RegExp(`<(/?)(${names.join('|')})>`, 'g'), slots, reading };
}

/** The search agent's grammar (the default): actions `<search>` and `<answer>`. */
export const SEARCH_GRAMMAR: Grammar = grammarOf(['search', 'answer'], false);
/** The grammar of an agent with the page tool (`tool.access`): `<search>`, `<access>` or `<answer>`. */
export const ACCESS_GRAMMAR: Grammar = grammarOf(['search', 'access', 'answer'], false);
const READING_GRAMMARS = { search: grammarOf(['search', 'answer'], true), access: grammarOf(['search', 'access', 'answer'], true) };

/** The grammar of an agent with (`access`) or without the page tool; with `reading`, of its reading rounds. */
export function grammarFor(access: boolean, reading = false): Grammar {
  if (reading) return access ? READING_GRAMMARS.access : READING_GRAMMARS.search;
  return access ? ACCESS_GRAMMAR : SEARCH_GRAMMAR;
}

/** The reading-round variant of `grammar` (the same actions). */
export function readingGrammarOf(grammar: Grammar): Grammar {
  return grammarFor(grammar.actions.includes('access'), true);
}

/** Where a reading round's generation stops (ASearcher's stop while its chunk queue is not empty). */
export const READING_STOP_STRINGS = ['</think>'] as const;

/** The protocol tags of `text` in `grammar`, in order (anything else, `<b>` say, is text). */
export function lexTags(text: string, grammar: Grammar = SEARCH_GRAMMAR): TagToken[] {
  const out: TagToken[] = [];
  for (const m of text.matchAll(grammar.tagRe)) {
    const index = m.index ?? 0;
    out.push({ name: m[2] as TagName, close: m[1] === '/', index, end: index + m[0].length });
  }
  return out;
}

export function tagText(t: TagToken): string {
  return `<${t.close ? '/' : ''}${t.name}>`;
}

/** The empty-action rule, the same for every reader: a blank query, URL or answer is a violation. */
const EMPTY_ACTION: Readonly<Record<ActionName, Violation>> = {
  search: { code: 'empty-query', message: 'the search query is empty' },
  access: { code: 'empty-url', message: 'the access URL is empty' },
  answer: { code: 'empty-answer', message: 'the answer is empty' },
};

export function isAction(name: TagName): name is ActionName {
  return name === 'search' || name === 'access' || name === 'answer';
}

/** A top-level block: from an opening tag to its closing tag (or to where reading gave up). */
export interface Block {
  name: TagName;
  content: string;
  closed: boolean;
}

/** The first closed block whose name is one of `names`. */
export function firstClosed(blocks: readonly Block[], names: readonly TagName[]): Block | undefined {
  return blocks.find((b) => b.closed && names.includes(b.name));
}

interface Reading {
  tags: TagToken[];
  blocks: Block[];
  /** Lexical faults (stray, nested, unclosed tags) in text order. */
  faults: Violation[];
  /** All text outside top-level blocks. */
  outside: string;
}

/** Reads `text` into top-level blocks; an opening tag inside an open block closes it unclosed. */
function readBlocks(text: string, grammar: Grammar): Reading {
  const tags = lexTags(text, grammar);
  const faults: Violation[] = [];
  const add = (code: ViolationCode, message: string) => faults.push({ code, message });
  const blocks: Block[] = [];
  let open: { name: TagName; start: number } | null = null;
  let pos = 0;
  let outside = '';
  for (const t of tags) {
    if (open === null) {
      outside += text.slice(pos, t.index);
      if (t.close) add('stray-close-tag', `</${t.name}> without an opening <${t.name}>`);
      else open = { name: t.name, start: t.end };
    } else if (t.close && t.name === open.name) {
      blocks.push({ name: t.name, content: text.slice(open.start, t.index), closed: true });
      open = null;
    } else if (t.close) {
      add('stray-close-tag', `</${t.name}> while <${open.name}> is open`);
    } else {
      add('nested-tag', `<${t.name}> inside <${open.name}>`);
      add('unclosed-tag', `<${open.name}> is not closed`);
      blocks.push({ name: open.name, content: text.slice(open.start, t.index), closed: false });
      open = { name: t.name, start: t.end };
    }
    pos = t.end;
  }
  if (open !== null) {
    add('unclosed-tag', `<${open.name}> is not closed`);
    blocks.push({ name: open.name, content: text.slice(open.start), closed: false });
  } else {
    outside += text.slice(pos);
  }
  return { tags, blocks, faults, outside };
}

/** Every way the blocks differ from the grammar's slots (besides the lexical faults). */
function blockViolations(r: Reading, grammar: Grammar): Violation[] {
  const slots = grammar.slots;
  const out: Violation[] = [];
  const add = (code: ViolationCode, message: string) => out.push({ code, message });
  const outside = r.outside.trim();
  if (outside.length > 0) add('text-outside-tags', `text outside tags: ${JSON.stringify(clip(outside, 40))}`);
  const counts = new Map<TagName, number>();
  for (const b of r.blocks) counts.set(b.name, (counts.get(b.name) ?? 0) + 1);
  for (const [name, n] of counts) if (n > 1) add('repeated-tag', `<${name}> appears ${n} times`);
  if (counts.has('information')) add('model-wrote-information', 'the model wrote an <information> block');

  const found = slots.map((s) => firstClosed(r.blocks, s.names));
  slots.forEach((s, i) => {
    if (found[i] === undefined) add(s.missing, `no closed <${s.names.join('> or <')}>`);
  });
  const actions = r.blocks.filter((b) => b.closed && isAction(b.name));
  if (actions.length > 1) add('two-actions', `${actions.length} actions in one round`);
  if (grammar.reading && actions.length > 0) add('action-while-reading', `<${actions[0]!.name}> in a reading round (chunks of a page are queued)`);
  // Order: by first appearance of each slot's closed block.
  const expected = found.flatMap((b) => (b === undefined ? [] : [b.name]));
  const seen = r.blocks.filter((b) => b.closed && expected.includes(b.name)).map((b) => b.name);
  const firstSeen = seen.filter((n, i) => seen.indexOf(n) === i);
  if (firstSeen.join() !== expected.join()) {
    add('tag-order', `tags in the order ${firstSeen.map((n) => `<${n}>`).join(', ')}; expected <mem>, <think>${grammar.reading ? '' : `, then <${grammar.actions.join('> or <')}>`}`);
  }
  const act = actions[0];
  if (act !== undefined && isAction(act.name) && act.content.trim().length === 0) out.push({ ...EMPTY_ACTION[act.name] });
  return out;
}

/**
 * Where `text` first leaves the grammar, read left to right (the wording of `validateFormat`'s
 * reasons); null when it never does, which is exactly when `checkRound` finds no violation.
 */
export function firstDeviation(text: string, grammar: Grammar = SEARCH_GRAMMAR, tags: readonly TagToken[] = lexTags(text, grammar)): string | null {
  let pos = 0;
  let i = 0;
  const blankTo = (to: number) => text.slice(pos, to).trim().length === 0;
  for (const slot of grammar.slots) {
    const expected = `<${slot.names.join('> or <')}> ${slot.where}`;
    const open = tags[i];
    if (open === undefined) return `expected ${expected} but the response ended`;
    if (!blankTo(open.index)) return `text outside tags before ${tagText(open)}`;
    if (open.close || !slot.names.includes(open.name)) return `expected ${expected} but found ${tagText(open)}`;
    const close = tags[i + 1];
    if (close === undefined) return `<${open.name}> is not closed`;
    if (!close.close || close.name !== open.name) return `<${open.name}> is not closed before ${tagText(close)}`;
    if (isAction(open.name) && text.slice(open.end, close.index).trim().length === 0) return EMPTY_ACTION[open.name].message;
    pos = close.end;
    i += 2;
  }
  const extra = tags[i];
  if (extra !== undefined) return grammar.reading ? `${tagText(extra)} after </think> in a reading round` : `${tagText(extra)} after the round's action`;
  if (!blankTo(text.length)) return 'text outside tags at the end';
  return null;
}

export interface RoundCheck {
  /** Top-level blocks in text order. */
  blocks: Block[];
  /** Every violation; empty exactly when the round is format-valid. */
  violations: Violation[];
  /** Where the round first leaves the grammar; null exactly when `violations` is empty. */
  deviation: string | null;
}

/** Reads one round's generated text against `grammar`. */
export function checkRound(text: string, grammar: Grammar = SEARCH_GRAMMAR): RoundCheck {
  const r = readBlocks(text, grammar);
  const violations = [...r.faults, ...blockViolations(r, grammar)];
  const first = violations[0];
  const deviation = first === undefined ? null : firstDeviation(text, grammar, r.tags) ?? first.message;
  return { blocks: r.blocks, violations, deviation };
}

function clip(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n)}…` : s;
}
