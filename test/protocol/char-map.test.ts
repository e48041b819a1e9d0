/**
 * The character → token map (docs/algorithm.md §1, "Tags are text") on the real Qwen3 and
 * Llama 3 tokenizers, against the byte-level reference of real-tokenizers.ts: tags whose `>`
 * merges with what follows, multi-byte characters split across tokens (partial UTF-8).
 */
import { CharTokenMap } from '../../src/protocol/char-map';
import { ByteVocab, REAL_NAMES, REAL_TOKENIZERS, byteReference, realTokenizer } from './real-tokenizers';

const TEXTS = [
  '<mem>Paris is in France.</mem><think>ok</think><search>capital of France</search>',
  '<mem></mem><think></think>\n<answer>x</answer>',
  '<mem>é 日本語 😀🙂 naïve</mem><think>…</think><answer>日本</answer>',
  ' <mem>\n a </mem>\n\n<think>t</think> <search>q</search>\n\n',
  '😀<mem>🙂</mem>😀<answer>👍🏽</answer>',
];

describe.each(REAL_NAMES)('CharTokenMap on %s', (name) => {
  const vocab = new ByteVocab(REAL_TOKENIZERS[name]);

  test.each(TEXTS)('every character range maps to the tokens that hold its bytes: %j', async (s) => {
    const tok = await realTokenizer(name);
    const ids = tok.encode(s);
    const ref = byteReference(vocab, ids);
    expect(ref.text).toBe(s);
    const map = new CharTokenMap(tok, ids);
    expect(map.text).toBe(s);
    // Offsets at character (code point) boundaries.
    const cuts = [0];
    for (const ch of s) cuts.push(cuts[cuts.length - 1]! + ch.length);
    for (let i = 0; i < cuts.length; i++) {
      for (let j = i; j < cuts.length; j++) expect([cuts[i], cuts[j], map.tokenRange(cuts[i]!, cuts[j]!)]).toEqual([cuts[i], cuts[j], ref.tokensOf(cuts[i]!, cuts[j]!)]);
    }
  });

  test('a character split over several tokens belongs to all of them', async () => {
    const tok = await realTokenizer(name);
    // Llama 3 writes each emoji as two byte tokens; whichever tokenizer, check the split if there is one.
    const ids = tok.encode('x😀y');
    const map = new CharTokenMap(tok, ids);
    const [a, b] = map.tokenRange(1, 3);
    expect(tok.decode(ids.slice(a, b))).toBe('😀');
    expect(map.tokenRange(0, 1)).toEqual([0, 1]);
    if (name === 'llama3') expect(b - a).toBe(2);
  });

  test('rejects ranges outside the text', async () => {
    const tok = await realTokenizer(name);
    const map = new CharTokenMap(tok, tok.encode('<mem>a</mem>'));
    expect(() => map.tokenRange(3, 2)).toThrow(RangeError);
    expect(() => map.tokenRange(0, 13)).toThrow('[0, 13) is not a character range of the text (12 characters)');
    expect(() => map.tokenOf(12)).toThrow('character 12 is outside the text (12 characters)');
  });
});
