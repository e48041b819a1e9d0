/**
 * Stop strings on decoded text (docs/algorithm.md §1, "Tags are text"): on Qwen3 and Llama 3
 * `</search>` / `</answer>` are several tokens and the last one may carry more (`>\n\n`, `><`);
 * the matcher stops at the token that completes the stop string and keeps it whole. On the
 * embedded tokenizer the single-token stops matched by id give the same stops as the text path.
 */
import { StopMatcher, type StopTokenizer } from '../../../src/engines/local/stop';
import type { Tokenizer } from '../../../src/engines/local/tokenizer';
import { STOP_STRINGS } from '../../../src/protocol/tags';
import { REAL_NAMES, realTokenizer } from '../../protocol/real-tokenizers';
import { tokenizer } from '../../pipeline/helpers';

/** Feeds `ids` one token at a time; the index of the first hit and the hit. */
function firstStop(m: StopMatcher, ids: readonly number[]): { at: number; stop: string | undefined; kind: string } | null {
  for (let k = 1; k <= ids.length; k++) {
    const hit = m.check(ids.slice(0, k));
    if (hit !== null) return { at: k - 1, stop: hit.stop, kind: hit.kind };
  }
  return null;
}

/** The reference: the first token whose prefix's decoded text contains a stop string. */
function referenceStop(tok: Tokenizer, ids: readonly number[]): { at: number; stop: string } | null {
  for (let k = 1; k <= ids.length; k++) {
    const text = tok.decode(ids.slice(0, k));
    for (const s of STOP_STRINGS) if (text.includes(s)) return { at: k - 1, stop: s };
  }
  return null;
}

const TEXTS = [
  '<mem>a</mem><think>b</think><search>capital</search>\n\nmore text',
  '<mem>a</mem><think>b</think><answer>Paris</answer><mem>',
  '<mem>a</mem><think>b</think><search>x</search><search>y</search>',
  '<mem>日本😀</mem><think>😀</think><answer>😀</answer>😀',
  '<think>no stop here</think> </search',
];

describe.each(REAL_NAMES)('stop strings across token boundaries on %s', (name) => {
  test.each(TEXTS)('stops at the token that completes the stop string, kept whole: %j', async (s) => {
    const tok = await realTokenizer(name);
    const ids = tok.encode(s);
    const m = new StopMatcher(tok, STOP_STRINGS, [tok.eosTokenId!]);
    const got = firstStop(m, ids);
    const want = referenceStop(tok, ids);
    expect(got === null ? null : { at: got.at, stop: got.stop }).toEqual(want);
    if (want !== null) {
      expect(got!.kind).toBe('stop');
      // Kept whole: the output ends with the completing token, whatever follows the stop inside it.
      expect(tok.decode(ids.slice(0, want.at + 1)).startsWith(s.slice(0, s.indexOf(want.stop) + want.stop.length))).toBe(true);
      expect(tok.decode(ids.slice(0, want.at)).includes(want.stop)).toBe(false);
    }
  });

  test('the stop strings are several tokens and the last merges with what follows', async () => {
    const tok = await realTokenizer(name);
    for (const s of STOP_STRINGS) expect(tok.tokenId(s)).toBeUndefined();
    const ids = tok.encode('</search>\n\n');
    expect(tok.piece(ids[ids.length - 1]!)).toBe('>\n\n');
  });
});

/** The tokenizer with its single-token tags hidden: only the text path is left. */
function hideTags(tok: Tokenizer): StopTokenizer {
  return {
    tokenId: (s: string) => (s.startsWith('<') && !s.startsWith('<|') ? undefined : tok.tokenId(s)),
    isSpecial: (id: number) => tok.isSpecial(id),
    piece: (id: number) => tok.piece(id),
    decode: (ids: ArrayLike<number>, o?: { skipSpecialTokens?: boolean }) => tok.decode(ids, o),
  };
}

describe('single-token stops (models/mempo-tiny): ids and text agree', () => {
  test('the same stop at the same token on every prefix', async () => {
    const tok = await tokenizer();
    const eos = [tok.eosTokenId!];
    const byId = new StopMatcher(tok, STOP_STRINGS, eos);
    const byText = new StopMatcher(hideTags(tok), STOP_STRINGS, eos);
    expect(tok.tokenId('</search>')).toBeDefined();
    for (const s of [...TEXTS, '<mem>x</mem><think>y</think><search>z</search><|endoftext|>', '</answer>', 'a<|endoftext|></search>']) {
      const ids = tok.encode(s);
      for (let k = 1; k <= ids.length; k++) expect([s, k, byText.check(ids.slice(0, k))]).toEqual([s, k, byId.check(ids.slice(0, k))]);
    }
  });
});
