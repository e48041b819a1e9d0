/**
 * Builds the shipped byte-level BPE tokenizer (`tokenizer.json`, `tokenizer_config.json`)
 * from world text. Special tokens (protocol.ts) get ids 0..12, the 256 byte symbols follow,
 * then whole-word tokens (name pieces and years, with and without a leading space), then
 * merges. `ignore_merges` makes any pre-tokenised word that is in the vocabulary one token, so
 * a name piece or a year is a single token wherever it appears: after a space, or straight
 * after a tag as in `<answer>1834</answer>`. Copying a name is then copying whole tokens.
 */
import { EOS_TOKEN, SPECIAL_TOKENS } from '../../src/protocol/tags';
import { CHAT_TEMPLATE } from '../../src/protocol/chat';

/** GPT-2's byte -> unicode table. */
export function bytesToUnicode(): string[] {
  const bs: number[] = [];
  for (let i = 33; i <= 126; i++) bs.push(i);
  for (let i = 161; i <= 172; i++) bs.push(i);
  for (let i = 174; i <= 255; i++) bs.push(i);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n);
      n++;
    }
  }
  const table: string[] = new Array(256).fill('');
  bs.forEach((b, i) => {
    table[b] = String.fromCharCode(cs[i] as number);
  });
  return table;
}

/** GPT-2 pre-tokenisation regex (the ByteLevel pre-tokenizer with use_regex = true). */
export const GPT2_SPLIT = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

export interface TokenizerBuildOptions {
  vocabSize: number;
  /** Words that get a token of their own, as " word" and "word" (name pieces, years). */
  wholeWords: readonly string[];
  minPairCount?: number;
}

function splitSpecial(text: string): string[] {
  const pieces: string[] = [];
  const rest = text;
  const re = new RegExp(SPECIAL_TOKENS.map((t) => t.replace(/[|<>/]/g, (c) => `\\${c}`)).join('|'), 'g');
  let last = 0;
  for (const m of rest.matchAll(re)) {
    const i = m.index ?? 0;
    if (i > last) pieces.push(rest.slice(last, i));
    last = i + m[0].length;
  }
  if (last < rest.length) pieces.push(rest.slice(last));
  return pieces;
}

/** Train merges; returns the tokenizer.json object. Deterministic. */
export function buildTokenizerJson(texts: readonly string[], opts: TokenizerBuildOptions): object {
  const b2u = bytesToUnicode();
  const enc = new TextEncoder();
  const toSym = (s: string): string[] => Array.from(enc.encode(s)).map((b) => b2u[b] as string);
  // word counts (already split into hard-boundary chunks)
  const counts = new Map<string, number>();
  const whole = new Set(opts.wholeWords);
  const addChunk = (chunk: string, c = 1): void => {
    if (chunk.length === 0) return;
    counts.set(chunk, (counts.get(chunk) ?? 0) + c);
  };
  for (const text of texts) {
    for (const piece of splitSpecial(text)) {
      for (const m of piece.matchAll(GPT2_SPLIT)) {
        const w = m[0];
        if (!whole.has(w.startsWith(' ') ? w.slice(1) : w)) addChunk(w);
      }
    }
  }
  const words: { sym: string[]; c: number }[] = [];
  for (const [w, c] of [...counts.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))) {
    words.push({ sym: toSym(w), c });
  }
  const vocab: Record<string, number> = {};
  SPECIAL_TOKENS.forEach((t, i) => {
    vocab[t] = i;
  });
  let next = SPECIAL_TOKENS.length;
  for (let b = 0; b < 256; b++) vocab[b2u[b] as string] = next++;
  for (const w of opts.wholeWords) {
    for (const form of [` ${w}`, w]) {
      const tok = toSym(form).join('');
      if (vocab[tok] === undefined) vocab[tok] = next++;
    }
  }
  const merges: string[] = [];
  const minPair = opts.minPairCount ?? 2;
  while (next < opts.vocabSize) {
    const pairs = new Map<string, number>();
    for (const w of words) {
      for (let i = 0; i + 1 < w.sym.length; i++) {
        const k = `${w.sym[i]} ${w.sym[i + 1]}`;
        pairs.set(k, (pairs.get(k) ?? 0) + w.c);
      }
    }
    let best = '';
    let bestC = 0;
    for (const [k, c] of pairs) {
      if (c > bestC || (c === bestC && k < best)) {
        best = k;
        bestC = c;
      }
    }
    if (bestC < minPair) break;
    const [a, b] = best.split(' ') as [string, string];
    const ab = a + b;
    if (vocab[ab] === undefined) vocab[ab] = next++;
    merges.push(best);
    for (const w of words) {
      if (w.sym.length < 2) continue;
      const out: string[] = [];
      for (let i = 0; i < w.sym.length; i++) {
        if (i + 1 < w.sym.length && w.sym[i] === a && w.sym[i + 1] === b) {
          out.push(ab);
          i++;
        } else out.push(w.sym[i] as string);
      }
      w.sym = out;
    }
  }
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: SPECIAL_TOKENS.map((t, i) => ({
      id: i,
      content: t,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: null,
    pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    post_processor: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: true },
    decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: '',
      end_of_word_suffix: '',
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: true,
      vocab,
      merges,
    },
  };
}

export function tokenizerConfigJson(modelMaxLength: number): object {
  const added: Record<string, object> = {};
  SPECIAL_TOKENS.forEach((t, i) => {
    added[String(i)] = { content: t, lstrip: false, normalized: false, rstrip: false, single_word: false, special: true };
  });
  return {
    tokenizer_class: 'PreTrainedTokenizerFast',
    add_bos_token: false,
    add_eos_token: false,
    add_prefix_space: false,
    bos_token: null,
    eos_token: EOS_TOKEN,
    pad_token: EOS_TOKEN,
    unk_token: null,
    model_max_length: modelMaxLength,
    clean_up_tokenization_spaces: false,
    additional_special_tokens: SPECIAL_TOKENS.slice(1),
    added_tokens_decoder: added,
    chat_template: CHAT_TEMPLATE,
  };
}
