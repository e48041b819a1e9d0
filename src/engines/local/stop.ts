/**
 * Stop conditions checked after every sampled token, cheaply:
 * - stop token ids (eos, and stop strings that are exactly one token such as `</search>`) are
 *   matched on ids;
 * - other stop strings are matched on decoded text, but only when the new token's own text
 *   contains the last character of some stop string, and then only on the decoded tail of the
 *   sequence (a few tokens), never the whole response.
 * Either way the token that completes a stop string is kept whole (characters after the stop
 * string inside it stay in the output) and ids are never edited (docs/algorithm.md §1); a stop
 * string that is one token gives the same stops both ways (test/engines/local/stop.test.ts).
 */
import type { Tokenizer } from './tokenizer';

/** What the matcher reads from a tokenizer (a test may hide the single-token tags to force the text path). */
export type StopTokenizer = Pick<Tokenizer, 'tokenId' | 'isSpecial' | 'piece' | 'decode'>;

export interface StopHit {
  kind: 'eos' | 'stop';
  /** The stop string matched (kind 'stop'). */
  stop?: string;
}

export class StopMatcher {
  private readonly eos: Set<number>;
  private readonly idStops = new Map<number, string>();
  private readonly textStops: string[];
  private readonly lastChars: Set<string>;
  private readonly tailTokens: number;

  constructor(
    private readonly tokenizer: StopTokenizer | undefined,
    stops: readonly string[],
    eosIds: readonly number[],
    stopTokenIds: readonly number[] = [],
  ) {
    this.eos = new Set(eosIds);
    for (const id of stopTokenIds) this.idStops.set(id, tokenizer?.piece(id) ?? `<token ${id}>`);
    const textStops: string[] = [];
    for (const s of stops) {
      if (tokenizer === undefined) throw new Error('stop strings need a tokenizer');
      const id = tokenizer.tokenId(s);
      if (id !== undefined && tokenizer.isSpecial(id)) {
        // A special token is never split by the tokenizer and the model can only write it as that id.
        this.idStops.set(id, s);
      } else {
        if (id !== undefined) this.idStops.set(id, s);
        textStops.push(s);
      }
    }
    this.textStops = textStops;
    this.lastChars = new Set(textStops.map((s) => s[s.length - 1]!));
    this.tailTokens = textStops.reduce((m, s) => Math.max(m, s.length), 0) + 1;
  }

  /** Checks the sequence `ids` whose last element was just sampled. */
  check(ids: readonly number[]): StopHit | null {
    const last = ids[ids.length - 1];
    if (last === undefined) return null;
    const byId = this.idStops.get(last);
    if (byId !== undefined) return { kind: 'stop', stop: byId };
    if (this.eos.has(last)) return { kind: 'eos' };
    if (this.textStops.length === 0 || this.tokenizer === undefined) return null;
    const piece = this.tokenizer.piece(last);
    let candidate = false;
    for (const ch of this.lastChars) {
      if (piece.includes(ch)) {
        candidate = true;
        break;
      }
    }
    if (!candidate) return null;
    const from = Math.max(0, ids.length - this.tailTokens);
    const tail = this.tokenizer.decode(ids.slice(from));
    let before: string | undefined;
    for (const s of this.textStops) {
      const i = tail.lastIndexOf(s);
      if (i < 0) continue;
      // Only a stop string that the new token completes (one that ended earlier is not this token's).
      before ??= this.tokenizer.decode(ids.slice(from, ids.length - 1));
      let fixed = 0;
      while (fixed < before.length && before.charCodeAt(fixed) === tail.charCodeAt(fixed)) fixed++;
      if (i + s.length > fixed) return { kind: 'stop', stop: s };
    }
    return null;
  }
}
