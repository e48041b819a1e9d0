/**
 * @jest-environment ./test/runtime-environment.js
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CausalLM } from '../../../src/engines/local/causal-lm';
import { MempoError } from '../../../src/errors';
import { Tokenizer } from '../../../src/engines/local/tokenizer';
import { checkModelIO, type ModelConfig } from '../../../src/engines/local/model-dir';
import { MAX_POS, MODEL_CONFIG, MODEL_DIR, VOCAB, modelCopy } from './helpers';

let model: CausalLM;
const temps: string[] = [];
beforeAll(async () => {
  model = await CausalLM.load(MODEL_DIR);
});
afterAll(async () => {
  await model.dispose();
  for (const d of temps) rmSync(d, { recursive: true, force: true });
});
function copy(options: Parameters<typeof modelCopy>[0]): string {
  const d = modelCopy(options);
  temps.push(d);
  return d;
}

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(MempoError);
    return (err as MempoError).code;
  }
  return undefined;
}

describe('model directories the runtime cannot use', () => {
  it('names a missing directory', async () => {
    await expect(CausalLM.load('/nonexistent/mempo-model')).rejects.toThrow(
      'Missing model directory: directory /nonexistent/mempo-model does not exist',
    );
  });

  it('names an eos_token_id outside the vocabulary (config.json)', async () => {
    const d = copy({ editConfig: (c) => (c['eos_token_id'] = 99999) });
    await expect(CausalLM.load(d)).rejects.toThrow(`${join(d, 'config.json')}: eos_token_id 99999 is outside the vocabulary (vocab_size ${VOCAB} in ${join(d, 'config.json')})`);
  });

  it('names a missing config.json', async () => {
    const d = copy({ omit: ['config.json'] });
    await expect(CausalLM.load(d)).rejects.toThrow(`Missing model config: ${join(d, 'config.json')} does not exist`);
  });

  it('names both places an ONNX file may be', async () => {
    const d = copy({ omit: ['model.onnx'] });
    await expect(CausalLM.load(d)).rejects.toThrow(
      `Missing ONNX model: neither ${join(d, 'model.onnx')} nor ${join(d, 'onnx', 'model.onnx')} exists (pass modelFile to choose another file)`,
    );
    await expect(CausalLM.load(d, { modelFile: 'decoder.onnx' })).rejects.toThrow(`Missing ONNX model: ${join(d, 'decoder.onnx')} does not exist`);
  });

  it('names missing tokenizer files, and loads without a tokenizer when asked', async () => {
    const d = copy({ omit: ['tokenizer.json'] });
    await expect(CausalLM.load(d)).rejects.toThrow(`Missing tokenizer file: ${join(d, 'tokenizer.json')} does not exist`);
    const e = copy({ omit: ['tokenizer_config.json'] });
    await expect(Tokenizer.load(e)).rejects.toThrow(`Missing tokenizer config: ${join(e, 'tokenizer_config.json')} does not exist`);
    const bare = await CausalLM.load(d, { tokenizer: false });
    expect(bare.tokenizer).toBeUndefined();
    await expect(bare.generate([[1, 2]], { maxNewTokens: 2, stop: ['</search>'] })).rejects.toThrow(
      'Stop strings need a tokenizer but the model was loaded without one',
    );
    const [r] = await bare.generate([[1, 2]], { maxNewTokens: 2, seed: 1 });
    expect(r!.text).toBeUndefined();
    await bare.dispose();
  });

  it('says when the tokenizer has no chat template, and reads chat_template.jinja', async () => {
    const d = copy({ omit: ['tokenizer_config.json'] });
    const cfg = JSON.parse(readFileSync(join(MODEL_DIR, 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
    const template = cfg['chat_template'] as string;
    delete cfg['chat_template'];
    writeFileSync(join(d, 'tokenizer_config.json'), JSON.stringify(cfg));
    const bare = await Tokenizer.load(d);
    expect(() => bare.renderChat([{ role: 'user', content: 'Q' }])).toThrow(
      `The tokenizer in ${d} has no chat_template (tokenizer_config.json or chat_template.jinja)`,
    );
    expect(bare.renderChat([{ role: 'user', content: 'Q' }], { chatTemplate: template })).toContain('Q');
    writeFileSync(join(d, 'chat_template.jinja'), template);
    const withFile = await Tokenizer.load(d);
    expect(withFile.renderChat([{ role: 'user', content: 'Q' }])).toBe(model.tokenizer!.renderChat([{ role: 'user', content: 'Q' }]));
    expect(() => withFile.renderChat([{ role: 'user' } as never])).toThrow(
      'Expected { role: string, content: string } for messages[0] but received a value of type object',
    );
  });

  it('lists the inputs and outputs the model lacks for the layers config.json declares', async () => {
    const L = MODEL_CONFIG.num_hidden_layers;
    const d = copy({ editConfig: (c) => (c['num_hidden_layers'] = L + 1) });
    const err = CausalLM.load(d);
    await expect(err).rejects.toThrow(
      `The ONNX model ${join(d, 'model.onnx')} does not fit the text-generation-with-past contract ` +
        `(config.json: ${L + 1} layers, ${MODEL_CONFIG.num_key_value_heads} kv heads, head_dim ${MODEL_CONFIG.head_dim}, vocab ${VOCAB}): ` +
        `missing inputs past_key_values.${L}.key, past_key_values.${L}.value; missing outputs present.${L}.key, present.${L}.value`,
    );
    const fewer = copy({ editConfig: (c) => (c['num_hidden_layers'] = L - 1) });
    await expect(CausalLM.load(fewer)).rejects.toThrow(
      `unsupported inputs past_key_values.${L - 1}.key, past_key_values.${L - 1}.value`,
    );
    expect(await codeOf(CausalLM.load(d))).toBe('ERR_MODEL_IO');
  });

  it('reports dimensions that contradict config.json', async () => {
    const d = copy({ editConfig: (c) => (c['vocab_size'] = 2 * VOCAB) });
    await expect(CausalLM.load(d)).rejects.toThrow(`logits dimension 2 is ${VOCAB}, config.json implies ${2 * VOCAB}`);
    const H = MODEL_CONFIG.num_key_value_heads;
    const h = copy({ editConfig: (c) => (c['num_key_value_heads'] = H * 2) });
    await expect(CausalLM.load(h)).rejects.toThrow(`past_key_values.0.key dimension 1 is ${H}, config.json implies ${H * 2}`);
  });

  it('names a config.json field it needs', async () => {
    const d = copy({ editConfig: (c) => delete c['max_position_embeddings'] });
    await expect(CausalLM.load(d)).rejects.toThrow(
      `Expected a positive integer "max_position_embeddings" or "n_positions" or "max_sequence_length" or "seq_length" in ${join(d, 'config.json')}`,
    );
  });

  it('accepts a model without position_ids and rejects one without logits', () => {
    const config = { numLayers: 1, numKvHeads: 2, headDim: 8, vocabSize: 10, maxPositions: 16, eosTokenIds: [], padTokenId: 0, raw: {} } as ModelConfig;
    const ins = ['input_ids', 'attention_mask', 'past_key_values.0.key', 'past_key_values.0.value'];
    const outs = ['logits', 'present.0.key', 'present.0.value'];
    expect(checkModelIO('m.onnx', config, ins, outs).hasPositionIds).toBe(false);
    expect(checkModelIO('m.onnx', config, [...ins, 'position_ids', 'use_cache_branch'], outs)).toMatchObject({ hasPositionIds: true, hasUseCacheBranch: true });
    expect(() => checkModelIO('m.onnx', config, ins, outs.slice(1))).toThrow(/: missing output logits$/);
    expect(() => checkModelIO('m.onnx', config, [...ins, 'token_type_ids'], outs)).toThrow(/: unsupported input token_type_ids$/);
    expect(() =>
      checkModelIO('m.onnx', config, ins, outs, [{ name: 'past_key_values.0.key', isTensor: true, type: 'float16', shape: ['b', 2, 'p', 8] }]),
    ).toThrow(/past_key_values.0.key has element type float16, expected float32$/);
  });

  it('refuses to run a disposed model', async () => {
    const m = await CausalLM.load(MODEL_DIR, { tokenizer: model.tokenizer! });
    await m.dispose();
    expect(await codeOf(m.scoreTargets([{ contextIds: [1], targetIds: [2] }]))).toBe('ERR_DISPOSED');
  });
});

describe('scoring inputs the runtime rejects', () => {
  const ok = { contextIds: [1, 2, 3], targetIds: [9, 20, 10] };

  it('names an item with empty targets', async () => {
    await expect(model.scoreTargets([ok, { contextIds: [1, 2], targetIds: [] }])).rejects.toThrow(
      'items[1].targetIds is empty; there is nothing to score',
    );
    expect(await codeOf(model.scoreTargets([{ contextIds: [1], targetIds: [] }]))).toBe('ERR_EMPTY_TARGET');
  });

  it('names an item with an empty context', async () => {
    await expect(model.scoreTargets([{ contextIds: [], targetIds: [3] }])).rejects.toThrow(
      'items[0].contextIds is empty; the first target token needs at least one context token',
    );
  });

  it('names the item and position of a token id outside the vocabulary', async () => {
    await expect(model.scoreTargets([ok, ok, { contextIds: [1, VOCAB], targetIds: [3] }])).rejects.toThrow(
      `Expected a token id in [0, ${VOCAB}) for items[2].contextIds[1] but received ${VOCAB}`,
    );
    await expect(model.scoreTargets([{ contextIds: [1], targetIds: [5, -1] }])).rejects.toThrow(
      `Expected a token id in [0, ${VOCAB}) for items[0].targetIds[1] but received -1`,
    );
    await expect(model.scoreTargets([{ contextIds: [1.5], targetIds: [5] }])).rejects.toThrow(
      `Expected a token id in [0, ${VOCAB}) for items[0].contextIds[0] but received 1.5`,
    );
    expect(await codeOf(model.scoreTargets([{ contextIds: [NaN], targetIds: [5] }]))).toBe('ERR_TOKEN_OUT_OF_VOCAB');
  });

  it('names an item longer than the model maximum unless truncation is asked for', async () => {
    const long = { contextIds: new Array(MAX_POS - 2).fill(5), targetIds: [9, 7, 10] };
    await expect(model.scoreTargets([ok, long])).rejects.toThrow(
      `items[1] has ${MAX_POS - 2} context + 3 target tokens = ${MAX_POS + 1}, more than the model's maximum length ${MAX_POS} (pass truncate: 'left' to drop the oldest context tokens)`,
    );
    const tooLongTarget = { contextIds: [1], targetIds: new Array(MAX_POS).fill(5) };
    await expect(model.scoreTargets([tooLongTarget], { truncate: 'left' })).rejects.toThrow(
      `items[0] has 1 context + ${MAX_POS} target tokens = ${MAX_POS + 1}, more than the model's maximum length ${MAX_POS}`,
    );
  });

  it('rejects malformed arguments with the package wording', async () => {
    await expect(model.scoreTargets('x' as never)).rejects.toThrow('Expected an array of { contextIds, targetIds } for items but received "x"');
    await expect(model.scoreTargets([{ contextIds: 'abc', targetIds: [1] } as never])).rejects.toThrow(
      'Expected an array of token ids for items[0].contextIds but received "abc"',
    );
    await expect(model.scoreTargets([ok], { padding: 'middle' as never })).rejects.toThrow(
      `Expected 'right' or 'left' for options.padding but received "middle"`,
    );
    await expect(model.scoreTargets([ok], { maxBatchTokens: 0 })).rejects.toThrow('Expected a positive integer for options.maxBatchTokens but received 0');
  });

  it('returns an empty list for no items', async () => {
    await expect(model.scoreTargets([])).resolves.toEqual([]);
  });
});

describe('generation inputs the runtime rejects', () => {
  it('names an empty prompt, an out-of-vocabulary id and a prompt that leaves no room', async () => {
    await expect(model.generate([[1, 2], []], { maxNewTokens: 4 })).rejects.toThrow(
      'prompts[1] is empty; a prompt needs at least one token',
    );
    await expect(model.generate([[1, 99999]], { maxNewTokens: 4 })).rejects.toThrow(
      `Expected a token id in [0, ${VOCAB}) for prompts[0][1] but received 99999`,
    );
    await expect(model.generate([[1], new Array(MAX_POS).fill(7)], { maxNewTokens: 4 })).rejects.toThrow(
      `prompts[1] has ${MAX_POS} tokens but the model's maximum length is ${MAX_POS} (room for at least one new token is needed; pass truncate: 'left' to keep the last tokens)`,
    );
    const [r] = await model.generate([new Array(MAX_POS).fill(7)], { maxNewTokens: 4, truncate: 'left', seed: 1, eosTokenIds: [] });
    expect(r!.promptLength).toBe(MAX_POS - 1);
    expect(r!.finishReason).toBe('context');
    expect(r!.tokenIds).toHaveLength(1);
  });

  it('rejects bad sampling options with the package wording', async () => {
    const p = [[1, 2, 3]];
    await expect(model.generate(p, {} as never)).rejects.toThrow('Expected a non-negative integer for options.maxNewTokens but received undefined');
    await expect(model.generate(p, { maxNewTokens: 2, temperature: -1 })).rejects.toThrow(
      'Expected a finite number >= 0 for options.temperature but received -1',
    );
    await expect(model.generate(p, { maxNewTokens: 2, topP: 0 })).rejects.toThrow('Expected a number in (0, 1] for options.topP but received 0');
    await expect(model.generate(p, { maxNewTokens: 2, topK: 1.5 })).rejects.toThrow('Expected a non-negative integer for options.topK but received 1.5');
    await expect(model.generate(p, { maxNewTokens: 2, stop: [''] })).rejects.toThrow(
      'Expected an array of non-empty strings for options.stop but received an array of length 1',
    );
    await expect(model.generate([{ ids: [1], maxNewTokens: -2 }], { maxNewTokens: 2 })).rejects.toThrow(
      'Expected a non-negative integer for prompts[0].maxNewTokens but received -2',
    );
  });
});
