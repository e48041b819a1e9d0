/**
 * Outcome reward (docs/algorithm.md §3, verl/Search-R1 `qa_em` semantics): answer extraction, SQuAD-style
 * normalisation, exact match, token F1 and item F1, the round-format check and the final score.
 */
import { checkOptions, optBoolean, optEnum, optNumber, typeError } from '../validate';
import { responseFormatError } from '../protocol/response';
import { grammarFor } from '../protocol/grammar';

const ANSWER_RE = /<answer>([\s\S]*?)<\/answer>/g;

/** Content of the last `<answer>…</answer>`, trimmed; null when there is none. */
export function extractSolution(text: string): string | null {
  if (typeof text !== 'string') throw typeError('a string', 'text', text);
  let last: string | null = null;
  for (const m of text.matchAll(ANSWER_RE)) last = m[1] ?? '';
  return last === null ? null : last.trim();
}

const ASCII_PUNCT = /[!"#$%&'()*+,\-./:;<=>?@[\\\]^_`{|}~]/g;

/** lowercase → drop ASCII punctuation → drop articles → collapse whitespace; True/False → yes/no. */
export function normalizeAnswer(s: string): string {
  if (typeof s !== 'string') throw typeError('a string', 's', s);
  const bare = s.trim().toLowerCase();
  const text = bare === 'true' ? 'yes' : bare === 'false' ? 'no' : s;
  return text
    .toLowerCase()
    .replace(ASCII_PUNCT, '')
    .replace(/\b(a|an|the)\b/g, ' ')
    .split(/\s+/)
    .filter((w) => w.length > 0)
    .join(' ');
}

function goldList(golds: unknown): string[] {
  const list = typeof golds === 'string' ? [golds] : golds;
  if (!Array.isArray(list) || list.length === 0 || !list.every((g) => typeof g === 'string')) {
    throw typeError('a string or a non-empty array of strings', 'golds', golds);
  }
  return list as string[];
}

/** 1 when the normalised prediction equals any normalised gold, else 0 (null prediction: 0). */
export function emCheck(pred: string | null, golds: string | readonly string[]): 0 | 1 {
  const list = goldList(golds);
  if (pred === null) return 0;
  if (typeof pred !== 'string') throw typeError('a string or null', 'pred', pred);
  const p = normalizeAnswer(pred);
  return list.some((g) => normalizeAnswer(g) === p) ? 1 : 0;
}

function multisetF1(pred: readonly string[], gold: readonly string[]): number {
  if (pred.length === 0 || gold.length === 0) return pred.length === gold.length ? 1 : 0;
  const counts = new Map<string, number>();
  for (const t of gold) counts.set(t, (counts.get(t) ?? 0) + 1);
  let common = 0;
  for (const t of pred) {
    const c = counts.get(t) ?? 0;
    if (c > 0) {
      common++;
      counts.set(t, c - 1);
    }
  }
  if (common === 0) return 0;
  const precision = common / pred.length;
  const recall = common / gold.length;
  return (2 * precision * recall) / (precision + recall);
}

/** Token-level F1 over normalised whitespace tokens, max over golds (null prediction: 0). */
export function f1Score(pred: string | null, golds: string | readonly string[]): number {
  const list = goldList(golds);
  if (pred === null) return 0;
  if (typeof pred !== 'string') throw typeError('a string or null', 'pred', pred);
  const p = normalizeAnswer(pred).split(' ').filter(Boolean);
  let best = 0;
  for (const g of list) best = Math.max(best, multisetF1(p, normalizeAnswer(g).split(' ').filter(Boolean)));
  return best;
}

/** The comma-separated items of an answer, each normalised; empty items dropped. */
function answerItems(s: string): string[] {
  return s.split(',').map(normalizeAnswer).filter((w) => w.length > 0);
}

/**
 * F1 over the comma-separated items of the prediction and of each gold (a multiset; an item matches only
 * whole, after normalizeAnswer), best over the golds. A one-item answer to a one-item gold scores its EM:
 * a name copied half right earns nothing, where token F1 gives it 0.5; an answer to several objectives
 * earns the share it named exactly.
 */
export function itemF1(pred: string | null, golds: string | readonly string[]): number {
  const list = goldList(golds);
  if (pred === null) return 0;
  if (typeof pred !== 'string') throw typeError('a string or null', 'pred', pred);
  const p = answerItems(pred);
  let best = 0;
  for (const g of list) best = Math.max(best, multisetF1(p, answerItems(g)));
  return best;
}

/** The outcome metrics of computeScore (`reward.metric`). */
export const METRICS = ['em', 'f1', 'item-f1'] as const;
export type Metric = (typeof METRICS)[number];

/** `round`: the 1-based round of the first error (0: the response has no round). */
export type FormatResult = { valid: true } | { valid: false; reason: string; round: number };

/** `opts.reading`: the 1-based rounds that read a queued chunk; absent, none. */
function readingRounds(o: Record<string, unknown>): Set<number> {
  const v = o['reading'];
  if (v === undefined) return new Set();
  if (!Array.isArray(v) || !v.every((r) => Number.isInteger(r) && (r as number) >= 1)) throw typeError('an array of round numbers (integers >= 1)', 'opts.reading', v);
  return new Set(v as number[]);
}

/**
 * The response is rounds of the one round grammar (docs/algorithm.md §1, src/protocol/grammar.ts):
 * `<mem>…</mem> <think>…</think>` then exactly one non-blank `<search>…</search>`,
 * `<access>…</access>` (with `access`: an agent with the page tool; else `<access>` is text) or
 * `<answer>…</answer>`; a search or access may be followed by one `<information>…</information>`
 * observation; nothing but whitespace outside tags; no nested tags; an answer only in the last
 * round. With `requireAnswer` the response must also end with an answer round. `reading` names
 * the reading rounds of `tool.pageReading: 'queue'` (`RoundTrace.reading`): each is
 * `<mem>…</mem> <think>…</think>` with no action, ends at its first `</think>` and may be followed
 * by an observation (the next queued chunk).
 */
export function validateFormat(response: string, opts?: { requireAnswer?: boolean; access?: boolean; reading?: readonly number[] }): FormatResult {
  if (typeof response !== 'string') throw typeError('a string', 'response', response);
  const o = checkOptions(opts, 'opts', ['requireAnswer', 'access', 'reading']);
  const requireAnswer = optBoolean(o, 'requireAnswer', 'opts', false);
  const access = optBoolean(o, 'access', 'opts', false);
  const error = responseFormatError(response, requireAnswer, grammarFor(access), readingRounds(o));
  return error === null ? { valid: true } : { valid: false, reason: error.reason, round: error.round };
}

export interface ComputeScoreOptions {
  /** Score of a response whose format is invalid (default 0). */
  formatScore?: number;
  /** 'em' (default, docs/algorithm.md §3), 'f1' (token F1) or 'item-f1' (F1 over the answer's comma-separated items). */
  metric?: Metric;
  /** Passed to validateFormat (default false). */
  requireAnswer?: boolean;
  /** Passed to validateFormat: the agent has the page tool, `<access>` is an action (default false). */
  access?: boolean;
  /** Passed to validateFormat: the reading rounds (1-based) of `tool.pageReading: 'queue'` (default none). */
  reading?: readonly number[];
}

/** emCheck(extractSolution(response), golds) when the format is valid, else formatScore. */
export function computeScore(response: string, golds: string | readonly string[], opts?: ComputeScoreOptions): number {
  const o = checkOptions(opts, 'opts', ['formatScore', 'metric', 'requireAnswer', 'access', 'reading']);
  const formatScore = optNumber(o, 'formatScore', 'opts', 0, Number.isFinite, 'a finite number');
  const metric = optEnum(o, 'metric', 'opts', METRICS, 'em');
  const requireAnswer = optBoolean(o, 'requireAnswer', 'opts', false);
  const access = optBoolean(o, 'access', 'opts', false);
  goldList(golds);
  const reading = o['reading'] as readonly number[] | undefined;
  if (!validateFormat(response, { requireAnswer, access, ...(reading !== undefined ? { reading } : {}) }).valid) return formatScore;
  const pred = extractSolution(response);
  return metric === 'em' ? emCheck(pred, golds) : metric === 'f1' ? f1Score(pred, golds) : itemF1(pred, golds);
}
