/**
 * Mem spans from the decoded text (docs/algorithm.md §1, "Tags are text"): on Qwen3 and Llama 3,
 * where `<mem>` is three tokens and `>` merges with its neighbours (`></`, `>\n`, `><`), against
 * the byte-level reference; and on the embedded tokenizer (single-token tags) the id fast path
 * gives exactly what the text rule gives.
 */
import { locateMem, memTagChars, memTokensFromText } from '../../src/protocol/mem-tokens';
import { CharTokenMap } from '../../src/protocol/char-map';
import { protocolIds } from '../../src/pipeline/trajectory';
import type { TextCodec } from '../../src/contracts';
import { tokenizer } from '../pipeline/helpers';
import { ByteVocab, REAL_NAMES, REAL_TOKENIZERS, byteReference, realTokenizer } from './real-tokenizers';

/** Rounds where every tag meets a neighbour it may merge with, and tags split over tokens. */
const ROUNDS = [
  '<mem>Paris</mem><think>t</think><search>q</search>',
  '<mem></mem><answer>x</answer>',
  '<mem>a</mem>\n<think>b</think>\n<search>c</search>\n\n',
  '<mem>\nfacts\n</mem>\n\n<think>\n</think><answer>Bob</answer>',
  'x<mem>>a<</mem>>',
  '😀<mem>日本😀</mem>😀<think>t</think><answer>y</answer>',
  '<think>no memory</think><search>q</search>',
  '<mem>unclosed<think>t</think>',
  '<mem>one</mem><mem>two</mem><think>t</think><answer>z</answer>',
  ' </mem><mem> x </mem>',
];

/** The reference: tags found by plain string search, characters → tokens through the token bytes. */
function referenceSpans(s: string, ref: ReturnType<typeof byteReference>): { inclusive: [number, number]; content: [number, number] } | null {
  const open = s.indexOf('<mem>');
  if (open < 0) return null;
  const close = s.indexOf('</mem>', open + 5);
  if (close < 0) return null;
  return { inclusive: ref.tokensOf(open, close + 6), content: ref.tokensOf(open + 5, close) };
}

describe.each(REAL_NAMES)('mem spans on %s (multi-token tags)', (name) => {
  const vocab = new ByteVocab(REAL_TOKENIZERS[name]);

  test('the tags are not single tokens and merge with their neighbours', async () => {
    const tok = await realTokenizer(name);
    expect(tok.tokenId('<mem>')).toBeUndefined();
    expect(protocolIds(tok).memTags).toBeUndefined();
    const pieces = tok.encode('</mem><answer>x</answer>\n').map((id) => tok.piece(id));
    expect(pieces.some((p) => p.includes('>') && p.length > 1)).toBe(true);
    expect(pieces.join('')).toBe('</mem><answer>x</answer>\n');
  });

  test.each(ROUNDS)('inclusive and content spans equal the reference: %j', async (s) => {
    const tok = await realTokenizer(name);
    const ids = tok.encode(s);
    const ref = byteReference(vocab, ids);
    const want = referenceSpans(s, ref);
    expect(locateMem(tok, ids, s)).toEqual(want);
    expect(locateMem(tok, ids, s, protocolIds(tok).memTags)).toEqual(want);
    if (want === null) return;
    // The spans cover their text; the inclusive span ends with the token that completes </mem>.
    const inc = tok.decode(ids.slice(...want.inclusive));
    expect(inc).toContain(s.slice(s.indexOf('<mem>'), s.indexOf('</mem>', s.indexOf('<mem>')) + 6));
    expect(tok.decode(ids.slice(0, want.inclusive[1]))).toContain('</mem>');
    expect(tok.decode(ids.slice(0, want.inclusive[1] - 1)).includes(s.slice(0, s.indexOf('</mem>', s.indexOf('<mem>')) + 6))).toBe(false);
  });
});

/** The embedded tokenizer with its tags hidden from `tokenId`: the text rule only. */
function textOnly(codec: TextCodec): TextCodec {
  return { encode: (t) => codec.encode(t), decode: (ids) => codec.decode(ids), tokenId: () => undefined };
}

describe('single-token tags (models/mempo-tiny): the fast path is the text rule', () => {
  test('protocolIds: the mem ids on the embedded tokenizer, none once they are hidden', async () => {
    const tok = await tokenizer();
    expect(protocolIds(tok).memTags).toEqual({ open: tok.tokenId('<mem>'), close: tok.tokenId('</mem>') });
    expect(protocolIds(textOnly(tok)).memTags).toBeUndefined();
  });

  test('the same spans by ids and by text, for every round shape', async () => {
    const tok = await tokenizer();
    const ids = protocolIds(tok).memTags!;
    const more = ['<mem>Mamek is a city in Thersekle.</mem><think>Find it.</think><search>Mamek</search>', '<mem>a</mem><mem>b</mem>', '<mem>é😀</mem>'];
    for (const s of [...ROUNDS, ...more]) {
      const toks = tok.encode(s);
      const text = tok.decode(toks);
      const slow = memTokensFromText(new CharTokenMap(tok, toks, text));
      expect([s, locateMem(tok, toks, text, ids)]).toEqual([s, slow]);
    }
    // `<mem>` spelt with ordinary tokens is still a tag: the fast path steps aside.
    const spelt = [...tok.encode('<'), ...tok.encode('mem'), ...tok.encode('>'), ...tok.encode('a'), tok.tokenId('</mem>')!];
    const text = tok.decode(spelt);
    if (text === '<mem>a</mem>') expect(locateMem(tok, spelt, text, ids)).toEqual(memTokensFromText(new CharTokenMap(tok, spelt, text)));
  });

  test('memTagChars: the first <mem> and the first </mem> after it', () => {
    expect(memTagChars('</mem><mem>a</mem></mem>')).toEqual({ open: 6, close: 12 });
    expect(memTagChars('<mem>a')).toBeNull();
    expect(memTagChars('a</mem>')).toBeNull();
  });
});

describe('protocolIds', () => {
  test('a tokenizer that cannot encode a tag is a clear error', async () => {
    const tok = await tokenizer();
    const lossy: TextCodec = { encode: (t) => tok.encode(t.replace(/</g, '')), decode: (ids) => tok.decode(ids), tokenId: () => undefined };
    expect(() => protocolIds(lossy)).toThrow("The tokenizer cannot encode the agent protocol's tag <mem>: its ids decode to \"mem>\"");
    expect(() => protocolIds(lossy)).toThrow(expect.objectContaining({ code: 'ERR_TOKENIZER_PROTOCOL' }));
  });
});
