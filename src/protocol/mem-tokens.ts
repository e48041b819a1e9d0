/**
 * Where a round's `<mem>` … `</mem>` is in its tokens (docs/algorithm.md §1, "Tags are text"):
 * the tags are found in the round's decoded text (the first `<mem>` and the first `</mem>` after
 * it) and turned into token ranges by the character → token map: the smallest token range
 * covering the tags and what is between them (`inclusive`), or only what is between them
 * (`content`); a token that straddles a boundary is inside. With single-token tags (the
 * embedded model) the ids give the same ranges without decoding prefixes (the fast path).
 */
import type { TextCodec } from '../contracts';
import { CharTokenMap } from './char-map';
import { MEM_CLOSE, MEM_OPEN } from './tags';

/** Round-relative token ranges, [start, end), of one round's mem block. */
export interface MemTokens {
  /** Tokens covering `<mem>` … `</mem>`: the first token of `<mem>` to the token that completes `</mem>`. */
  inclusive: [number, number];
  /** Tokens covering the text between the tags; empty when that text is. */
  content: [number, number];
}

/** Ids of `<mem>` and `</mem>` when each is one token decoding to exactly the tag. */
export interface MemTagIds {
  open: number;
  close: number;
}

/** Character offsets of the round's first `<mem>` and of the first `</mem>` after it, or null. */
export function memTagChars(text: string): { open: number; close: number } | null {
  const open = text.indexOf(MEM_OPEN);
  if (open < 0) return null;
  const close = text.indexOf(MEM_CLOSE, open + MEM_OPEN.length);
  return close < 0 ? null : { open, close };
}

/** The text rule: tags found in `map.text`, mapped to tokens. */
export function memTokensFromText(map: CharTokenMap): MemTokens | null {
  const at = memTagChars(map.text);
  if (at === null) return null;
  const openEnd = at.open + MEM_OPEN.length;
  return {
    inclusive: map.tokenRange(at.open, at.close + MEM_CLOSE.length),
    content: map.tokenRange(openEnd, at.close),
  };
}

function count(text: string, s: string): number {
  let n = 0;
  for (let i = text.indexOf(s); i >= 0; i = text.indexOf(s, i + s.length)) n++;
  return n;
}

function countId(ids: readonly number[], id: number): number {
  let n = 0;
  for (const x of ids) if (x === id) n++;
  return n;
}

/**
 * The fast path, or undefined where it might differ from the text rule: every tag in the text
 * must be its single id (the k-th `<mem>` of the text is the k-th id), the text must have no
 * U+FFFD, and the tokens just inside the tags must decode to something on their own.
 */
function memTokensFromIds(codec: Pick<TextCodec, 'decode'>, ids: readonly number[], text: string, tagIds: MemTagIds): MemTokens | null | undefined {
  if (text.includes('\uFFFD')) return undefined;
  if (count(text, MEM_OPEN) !== countId(ids, tagIds.open) || count(text, MEM_CLOSE) !== countId(ids, tagIds.close)) return undefined;
  const a = ids.indexOf(tagIds.open);
  const b = a < 0 ? -1 : ids.indexOf(tagIds.close, a + 1);
  if (b < 0) return null;
  if (b > a + 1 && (codec.decode([ids[a + 1]!]).length === 0 || codec.decode([ids[b - 1]!]).length === 0)) return undefined;
  return { inclusive: [a, b + 1], content: [a + 1, b] };
}

/**
 * The mem block of a round whose generated `ids` decode to `text`; `tagIds` enables the fast
 * path for tokenizers with single-token tags. Both give the same ranges (test/protocol/mem-tokens.test.ts).
 */
export function locateMem(codec: Pick<TextCodec, 'decode'>, ids: readonly number[], text: string, tagIds?: MemTagIds): MemTokens | null {
  if (tagIds !== undefined) {
    const fast = memTokensFromIds(codec, ids, text, tagIds);
    if (fast !== undefined) return fast;
  }
  return memTokensFromText(new CharTokenMap(codec, ids, text));
}
