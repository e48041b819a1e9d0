/**
 * Tool parsing of one round's generated text (SPEC §1): `<mem>`, `<think>`, then one
 * `<search>` or `<answer>`. Never throws on model output: unclosed or repeated tags, text
 * outside tags, a search with an empty query, ... are each recorded as a violation of the round.
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
  | 'empty-answer'
  | 'model-wrote-information';

export interface Violation {
  code: ViolationCode;
  message: string;
}

export type RoundActionKind = 'search' | 'answer';

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

const TAG_RE = /<(\/?)(mem|think|search|answer|information)>/g;

interface Block {
  name: string;
  content: string;
  closed: boolean;
}

/** Parses one round of generated text. */
export function parseRoundOutput(text: string): ParsedRoundOutput {
  const violations: Violation[] = [];
  const add = (code: ViolationCode, message: string) => violations.push({ code, message });
  const blocks: Block[] = [];
  let open: { name: string; start: number } | null = null;
  let pos = 0;
  let outside = '';
  for (const m of text.matchAll(TAG_RE)) {
    const idx = m.index ?? 0;
    const close = m[1] === '/';
    const name = m[2] ?? '';
    if (open === null) {
      outside += text.slice(pos, idx);
      if (close) {
        add('stray-close-tag', `</${name}> without an opening <${name}>`);
      } else {
        open = { name, start: idx + m[0].length };
      }
    } else if (close && name === open.name) {
      blocks.push({ name, content: text.slice(open.start, idx), closed: true });
      open = null;
    } else if (close) {
      add('stray-close-tag', `</${name}> while <${open.name}> is open`);
    } else {
      add('nested-tag', `<${name}> inside <${open.name}>`);
      add('unclosed-tag', `<${open.name}> is not closed`);
      blocks.push({ name: open.name, content: text.slice(open.start, idx), closed: false });
      open = { name, start: idx + m[0].length };
    }
    pos = idx + m[0].length;
  }
  if (open !== null) {
    add('unclosed-tag', `<${open.name}> is not closed`);
    blocks.push({ name: open.name, content: text.slice(open.start), closed: false });
  } else {
    outside += text.slice(pos);
  }
  if (outside.trim().length > 0) add('text-outside-tags', `text outside tags: ${JSON.stringify(clip(outside.trim(), 40))}`);

  const counts = new Map<string, number>();
  for (const b of blocks) counts.set(b.name, (counts.get(b.name) ?? 0) + 1);
  for (const [name, n] of counts) if (n > 1) add('repeated-tag', `<${name}> appears ${n} times`);
  if (counts.has('information')) add('model-wrote-information', 'the model wrote an <information> block');

  const first = (name: string): Block | undefined => blocks.find((b) => b.name === name && b.closed);
  const mem = first('mem');
  const think = first('think');
  const actions = blocks.filter((b) => b.closed && (b.name === 'search' || b.name === 'answer'));
  const act = actions[0];
  if (mem === undefined) add('missing-mem', 'no closed <mem>');
  if (think === undefined) add('missing-think', 'no closed <think>');
  if (act === undefined) add('no-action', 'no closed <search> or <answer>');
  if (actions.length > 1) add('two-actions', `${actions.length} actions in one round`);
  // Order: mem, think, action (by first appearance of each closed block).
  const order = ['mem', 'think', act?.name ?? ''].filter((n) => n !== '');
  const seen = blocks.filter((b) => b.closed && order.includes(b.name)).map((b) => b.name);
  const firstSeen = seen.filter((n, i) => seen.indexOf(n) === i);
  if (firstSeen.join() !== order.filter((n) => firstSeen.includes(n)).join()) {
    add('tag-order', `tags in the order ${firstSeen.map((n) => `<${n}>`).join(', ')}; expected <mem>, <think>, then <search> or <answer>`);
  }
  let search: string | null = null;
  let answer: string | null = null;
  if (act?.name === 'search') {
    search = act.content.trim();
    if (search.length === 0) add('empty-query', 'the search query is empty');
  } else if (act?.name === 'answer') {
    answer = act.content.trim();
    if (answer.length === 0) add('empty-answer', 'the answer is empty');
  }
  return {
    mem: mem?.content ?? null,
    think: think?.content ?? null,
    search,
    answer,
    action: act === undefined ? null : (act.name as RoundActionKind),
    violations,
  };
}

function clip(s: string, n: number): string {
  return s.length > n ? `${s.slice(0, n)}…` : s;
}
