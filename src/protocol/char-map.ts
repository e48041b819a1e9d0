/**
 * The character → token map of a round's decoded text (docs/algorithm.md §1, "Tags are text"):
 * which generated token produced each character of `decode(ids)`, so that tags found in the
 * text become token ranges. Built from the tokenizer's own decoding of prefixes, never from a
 * re-tokenisation, so it is exact for byte-level BPE tokens that decode to partial UTF-8: a
 * character belongs to the token whose decoding completes it, and tokens that complete no
 * character of their own (the first bytes of a multi-byte character) belong to the next one.
 * Exact when the text has no U+FFFD; around a U+FFFD (invalid UTF-8 the model wrote) which
 * token owns each byte is a best guess. Prefixes are decoded lazily and only where a lookup
 * needs them (a binary search each).
 */
import type { TextCodec } from '../contracts';

export class CharTokenMap {
  /** `decode(ids)`: the text the character offsets refer to. */
  readonly text: string;
  private readonly fixedCache = new Map<number, number>();
  private readonly emptyCache = new Map<number, boolean>();

  constructor(private readonly codec: Pick<TextCodec, 'decode'>, private readonly ids: readonly number[], text?: string) {
    this.text = text ?? codec.decode(ids);
  }

  get length(): number {
    return this.ids.length;
  }

  /**
   * Characters of the text that `ids[0..k)` already produce: the common prefix of their decoding
   * and the text (an unfinished character decodes to U+FFFD and does not match the real one).
   * Non-decreasing in k because decoding a prefix of the bytes commits a prefix of the text.
   */
  fixedChars(k: number): number {
    if (k <= 0) return 0;
    if (k >= this.ids.length) return this.text.length;
    let n = this.fixedCache.get(k);
    if (n === undefined) {
      const p = this.codec.decode(this.ids.slice(0, k));
      const t = this.text;
      n = 0;
      while (n < p.length && n < t.length && p.charCodeAt(n) === t.charCodeAt(n)) n++;
      this.fixedCache.set(k, n);
    }
    return n;
  }

  /** The token whose decoding completes character `c` (0 ≤ c < text.length): the smallest k with fixedChars(k + 1) > c. */
  tokenOf(c: number): number {
    if (!Number.isInteger(c) || c < 0 || c >= this.text.length) throw new RangeError(`character ${c} is outside the text (${this.text.length} characters)`);
    let lo = 0;
    let hi = this.ids.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.fixedChars(mid + 1) > c) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }

  /**
   * The smallest token range [start, end) whose text covers characters [a, b): a token that
   * straddles either boundary is inside. An empty character range gives the empty token range
   * right after the token that completes character a − 1.
   */
  tokenRange(a: number, b: number): [number, number] {
    if (!(Number.isInteger(a) && Number.isInteger(b) && 0 <= a && a <= b && b <= this.text.length)) {
      throw new RangeError(`[${a}, ${b}) is not a character range of the text (${this.text.length} characters)`);
    }
    if (a === b) {
      const at = a === 0 ? 0 : this.tokenOf(a - 1) + 1;
      return [at, at];
    }
    let start = this.tokenOf(a);
    // Tokens before it that complete nothing and are not empty hold the first bytes of character a.
    if (this.fixedChars(start) === a) {
      while (start > 0 && this.fixedChars(start - 1) === a && !this.isEmpty(start - 1)) start--;
    }
    return [start, this.tokenOf(b - 1) + 1];
  }

  /** A token that decodes to nothing on its own (attached to no character). */
  private isEmpty(k: number): boolean {
    let e = this.emptyCache.get(k);
    if (e === undefined) {
      e = this.codec.decode([this.ids[k]!]).length === 0;
      this.emptyCache.set(k, e);
    }
    return e;
  }
}
