/**
 * The whole response stream (docs/algorithm.md §1-§2): rounds, each followed by the
 * `<information>` observation of its search (or access). A round ends where its generation
 * stops, at the first closing action tag (a reading round, `tool.pageReading: 'queue'`, at its
 * first `</think>`), and is checked by the round grammar (`checkRound`); an observation is tool
 * output and is skipped whole, whatever it contains.
 */
import { checkRound, isAction, lexTags, readingGrammarOf, SEARCH_GRAMMAR, type Grammar, type TagToken } from './grammar';

/** The first format error: the 1-based round it lies in (0: the response has no round) and "round N: …". */
export interface FormatError {
  round: number;
  reason: string;
}

/**
 * The first format error of `response`, or null when every round is valid,
 * only tool rounds (search, access) and reading rounds are followed by an observation, nothing but whitespace lies between them,
 * an answer round is the last round and, with `requireAnswer`, there is one. `reading`: the
 * 1-based rounds that read a queued chunk (the rollout knows them; the text alone does not).
 */
export function responseFormatError(response: string, requireAnswer: boolean, grammar: Grammar = SEARCH_GRAMMAR, reading: ReadonlySet<number> = new Set()): FormatError | null {
  const at = (r: number, what: string): FormatError => ({ round: r, reason: `round ${r}: ${what}` });
  const tags = lexTags(response, grammar);
  const blank = (from: number, to?: number) => response.slice(from, to).trim().length === 0;
  let i = 0;
  let pos = 0;
  let round = 0;
  let answered = false;
  while (i < tags.length) {
    if (answered) return at(round + 1, 'text after the answer round');
    round++;
    const reads = reading.has(round);
    const ends = reads ? (t: TagToken) => t.close && t.name === 'think' : (t: TagToken) => t.close && isAction(t.name);
    let j = i;
    while (j < tags.length && !ends(tags[j]!)) j++;
    const stop: TagToken | undefined = tags[j];
    const end = stop === undefined ? response.length : stop.end;
    const { deviation } = checkRound(response.slice(pos, end), reads ? readingGrammarOf(grammar) : grammar);
    if (deviation !== null) return at(round, deviation);
    answered = stop?.name === 'answer';
    pos = end;
    i = j + 1;
    const next = tags[i];
    if (answered || next === undefined || next.close || next.name !== 'information') continue;
    if (!blank(pos, next.index)) return at(round, 'text outside tags before <information>');
    let k = i + 1;
    while (k < tags.length && !(tags[k]!.close && tags[k]!.name === 'information')) k++;
    if (k === tags.length) return at(round, '<information> is not closed');
    pos = tags[k]!.end;
    i = k + 1;
  }
  if (!blank(pos)) return round === 0 ? { round: 0, reason: 'no tags: expected <mem> to open the round' } : at(round, 'text outside tags at the end');
  if (round === 0) return { round: 0, reason: 'empty response: expected <mem> to open the round' };
  if (requireAnswer && !answered) return at(round, 'the response ends without an <answer> round');
  return null;
}
