/**
 * One table of round texts with what each reader must say, written by hand: the violation codes
 * of parseRoundOutput, the reason of validateFormat, and the loose parseRound (mem, think,
 * search, answer). Used by test/protocol/grammar.test.ts and test/kernels/outcome-reward.test.ts.
 */
import type { ViolationCode } from '../../src/protocol/grammar';

/** validateFormat's verdict for a hand-written reason: invalid in the round the reason names ("round N: …"; none: 0). */
export function verdict(reason: string | null): { valid: true } | { valid: false; reason: string; round: number } {
  if (reason === null) return { valid: true };
  return { valid: false, reason, round: Number(/^round (\d+): /.exec(reason)?.[1] ?? 0) };
}

export interface RoundCase {
  name: string;
  text: string;
  codes: ViolationCode[];
  /** null: valid. */
  reason: string | null;
  loose: [string | null, string | null, string | null, string | null];
}

const M = '<mem>a</mem>';
const T = '<think>b</think>';

export const ROUND_CASES: RoundCase[] = [
  { name: 'valid search round', text: `${M}${T}<search>q</search>`, codes: [], reason: null, loose: ['a', 'b', 'q', null] },
  { name: 'valid answer round with whitespace', text: ` ${M}\n${T} <answer> A </answer>\n`, codes: [], reason: null, loose: ['a', 'b', null, ' A '] },
  { name: 'empty query', text: `${M}${T}<search> </search>`, codes: ['empty-query'], reason: 'round 1: the search query is empty', loose: ['a', 'b', ' ', null] },
  { name: 'empty answer', text: `${M}${T}<answer></answer>`, codes: ['empty-answer'], reason: 'round 1: the answer is empty', loose: ['a', 'b', null, ''] },
  {
    name: 'repeated tag', text: `${M}${T}<think>c</think><search>q</search>`, codes: ['repeated-tag'],
    reason: 'round 1: expected <search> or <answer> after </think> but found <think>', loose: ['a', 'b', 'q', null],
  },
  {
    name: 'wrong order', text: `${T}${M}<search>q</search>`, codes: ['tag-order'],
    reason: 'round 1: expected <mem> to open the round but found <think>', loose: ['a', 'b', 'q', null],
  },
  {
    name: 'text before the round', text: `x${M}${T}<search>q</search>`, codes: ['text-outside-tags'],
    reason: 'round 1: text outside tags before <mem>', loose: ['a', 'b', 'q', null],
  },
  {
    name: 'text after the action', text: `${M}${T}<search>q</search>tail`, codes: ['text-outside-tags'],
    reason: 'round 1: text outside tags at the end', loose: ['a', 'b', 'q', null],
  },
  {
    name: 'unclosed action', text: `${M}${T}<search>q`, codes: ['unclosed-tag', 'no-action'],
    reason: 'round 1: <search> is not closed', loose: ['a', 'b', null, null],
  },
  {
    name: 'nested tag', text: `<mem>a${T}</mem><search>q</search>`, codes: ['nested-tag', 'unclosed-tag', 'stray-close-tag', 'missing-mem'],
    reason: 'round 1: <mem> is not closed before <think>', loose: [null, 'b', 'q', null],
  },
  {
    name: 'information written by the model', text: `${M}${T}<information>doc</information><search>q</search>`, codes: ['model-wrote-information'],
    reason: 'round 1: expected <search> or <answer> after </think> but found <information>', loose: ['a', 'b', 'q', null],
  },
  {
    name: 'answer not last', text: `${M}${T}<answer>x</answer><search>q</search>`, codes: ['two-actions'],
    reason: 'round 2: text after the answer round', loose: ['a', 'b', 'q', 'x'],
  },
  {
    name: 'two searches', text: `${M}${T}<search>q</search><search>r</search>`, codes: ['repeated-tag', 'two-actions'],
    reason: 'round 2: expected <mem> to open the round but found <search>', loose: ['a', 'b', 'q', null],
  },
  {
    name: 'missing think', text: `${M}<search>q</search>`, codes: ['missing-think'],
    reason: 'round 1: expected <think> after </mem> but found <search>', loose: ['a', null, 'q', null],
  },
  {
    name: 'no action', text: `${M}${T}`, codes: ['no-action'],
    reason: 'round 1: expected <search> or <answer> after </think> but the response ended', loose: ['a', 'b', null, null],
  },
  {
    name: 'stray closing tag', text: `</think>${M}${T}<search>q</search>`, codes: ['stray-close-tag'],
    reason: 'round 1: expected <mem> to open the round but found </think>', loose: ['a', 'b', 'q', null],
  },
  {
    name: 'empty text', text: '', codes: ['missing-mem', 'missing-think', 'no-action'],
    reason: 'empty response: expected <mem> to open the round', loose: [null, null, null, null],
  },
  {
    name: 'text without tags', text: 'just text', codes: ['text-outside-tags', 'missing-mem', 'missing-think', 'no-action'],
    reason: 'no tags: expected <mem> to open the round', loose: [null, null, null, null],
  },
];
