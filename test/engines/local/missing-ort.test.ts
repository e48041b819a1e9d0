/**
 * Without onnxruntime-node (an optional dependency: `npm install mempo --omit=optional`) the
 * local engine says so and names the install command, before it reads the model; the tokenizer,
 * the `--server` path and `mempo export`'s, needs neither ONNX Runtime nor transformers.js.
 * Both packages are made unloadable here the way Node reports a missing package.
 */
import { resolve } from 'node:path';
import { readFileSync } from 'node:fs';

/** What `require` throws for a package that is not installed. */
function mockNotInstalled(name: string): Error {
  return Object.assign(new Error(`Cannot find module '${name}'\nRequire stack:\n- ${__filename}`), { code: 'MODULE_NOT_FOUND' });
}
let mockOrtError: Error | undefined;
// The factories run when the code under test first requires the package (jest.mock is hoisted).
jest.mock('onnxruntime-node', () => {
  throw mockOrtError ?? mockNotInstalled('onnxruntime-node');
});
jest.mock('@huggingface/transformers', () => {
  throw mockNotInstalled('@huggingface/transformers');
});

import { CausalLM } from '../../../src/engines/local/causal-lm';
import { LocalModel } from '../../../src/engines/local/local-model';
import { Tokenizer } from '../../../src/engines/local/tokenizer';
import { MempoError } from '../../../src/errors';

const ROOT = resolve(__dirname, '..', '..', '..');
const MODEL = resolve(ROOT, 'models', 'mempo-tiny');
const range = (JSON.parse(readFileSync(resolve(ROOT, 'package.json'), 'utf8')) as { optionalDependencies: Record<string, string> }).optionalDependencies['onnxruntime-node'];

describe('the local engine without onnxruntime-node', () => {
  it('LocalModel.load and CausalLM.load say it is missing and how to install it, before reading the model', async () => {
    for (const load of [() => LocalModel.load(MODEL), () => CausalLM.load(MODEL), () => CausalLM.load(resolve(ROOT, 'no-such-model'))]) {
      const err = await load().then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(MempoError);
      expect((err as MempoError).code).toBe('ERR_MISSING_DEPENDENCY');
      expect((err as MempoError).message).toContain(`Run: npm install onnxruntime-node@${range}`);
      expect((err as MempoError).message).toMatch(/optional dependency of mempo that is not installed/);
    }
  });

  it('a package that is there but does not load is named with its own error', async () => {
    mockOrtError = new Error('libonnxruntime.so.1: cannot open shared object file: No such file or directory');
    const err = await CausalLM.load(MODEL).then(() => undefined, (e: unknown) => e);
    expect((err as MempoError).code).toBe('ERR_MISSING_DEPENDENCY');
    expect((err as MempoError).message).toContain('onnxruntime-node is installed but does not load (libonnxruntime.so.1: cannot open shared object file');
  });

  it('the tokenizer and its chat template work without ONNX Runtime and without transformers.js', async () => {
    const tok = await Tokenizer.load(MODEL);
    expect(tok.encode('<mem>')).toHaveLength(1);
    expect(tok.renderChat([{ role: 'user', content: 'hi' }])).toBe('<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n');
    expect(tok.decode(tok.applyChatTemplate([{ role: 'user', content: 'hi' }]))).toBe('<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n');
  });
});
