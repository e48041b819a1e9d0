/**
 * @jest-environment ./test/runtime-environment.js
 *
 * Weight sync in process: `CausalLM.reload` / `LocalModel.reload` take a model directory with new
 * initializer bytes (test/engines/local/reweighted.ts); a mismatched one is refused and the old
 * weights stay; calls in flight finish on the old session.
 */
import { rmSync, unlinkSync, writeFileSync, appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { CausalLM } from '../../../src/engines/local/causal-lm';
import { LocalModel } from '../../../src/engines/local/local-model';
import { MODEL_DIR, maxAbsDiff, randomIds } from './helpers';
import { editConfig, modelDirCopy, reweightedModel } from './reweighted';

const ITEMS = [
  { contextIds: randomIds(12, 1), targetIds: randomIds(6, 2) },
  { contextIds: randomIds(30, 3), targetIds: randomIds(4, 4) },
];
const PROMPTS = [{ ids: randomIds(10, 5) }, { ids: randomIds(7, 6) }];
const GEN = { maxNewTokens: 12, temperature: 1, seed: 77, eosTokenIds: [] as number[], decode: false };

let reweighted: string;
const tmp: string[] = [];
let model: CausalLM;
let base: { scores: Float32Array[]; tokens: number[][]; logprobs: Float32Array[] };
let fresh: { scores: Float32Array[]; tokens: number[][]; logprobs: Float32Array[] };

async function outputs(m: CausalLM) {
  const scores = await m.scoreTargets(ITEMS);
  const gen = await m.generate(PROMPTS, GEN);
  return { scores, tokens: gen.map((g) => g.tokenIds), logprobs: gen.map((g) => g.logprobs) };
}

beforeAll(async () => {
  reweighted = reweightedModel();
  tmp.push(reweighted);
  model = await CausalLM.load(MODEL_DIR);
  base = await outputs(model);
  // The reference for the new weights: a model loaded from scratch from the reweighted directory.
  const other = await CausalLM.load(reweighted);
  fresh = await outputs(other);
  await other.dispose();
});
afterAll(async () => {
  await model.dispose();
  for (const d of tmp) rmSync(d, { recursive: true, force: true });
});

describe('CausalLM.reload', () => {
  it('the reweighted directory really changes the outputs (the fixture is not a no-op)', () => {
    expect(maxAbsDiff(base.scores[0]!, fresh.scores[0]!)).toBeGreaterThan(1e-2);
    expect(base.tokens).not.toEqual(fresh.tokens);
  });

  it('serves the new weights after a reload, exactly as a fresh load of them, and the old ones after reloading back', async () => {
    const r = await model.reload(reweighted);
    expect(r.modelPath).toBe(join(reweighted, 'model.onnx'));
    expect(r.ms).toBeGreaterThan(0);
    expect(model.dir).toBe(reweighted);
    const after = await outputs(model);
    expect(after.scores).toEqual(fresh.scores);
    expect(after.tokens).toEqual(fresh.tokens);
    expect(after.logprobs).toEqual(fresh.logprobs);
    await model.reload(MODEL_DIR);
    const back = await outputs(model);
    expect(back.scores).toEqual(base.scores);
    expect(back.tokens).toEqual(base.tokens);
    expect(back.logprobs).toEqual(base.logprobs);
  });

  it.each([
    ['num_hidden_layers', 5],
    ['vocab_size', 4096],
    ['num_attention_heads', 8],
    ['hidden_size', 512],
    ['max_position_embeddings', 1024],
  ])('refuses a config.json with another %s, naming it, and keeps the old weights', async (key, value) => {
    const dir = reweightedModel({ edit: (d) => editConfig(d, key, value) });
    tmp.push(dir);
    await expect(model.reload(dir)).rejects.toThrow(new RegExp(`config\\.json ${key} is ${value}`));
    expect(model.dir).toBe(MODEL_DIR);
    expect(await model.scoreTargets(ITEMS)).toEqual(base.scores);
  });

  it('refuses another tokenizer (tokenizer.json bytes differ, or the file is missing) and keeps the old weights', async () => {
    const changed = reweightedModel({ edit: (d) => appendFileSync(join(d, 'tokenizer.json'), '\n') });
    const missing = reweightedModel({ edit: (d) => unlinkSync(join(d, 'tokenizer.json')) });
    tmp.push(changed, missing);
    await expect(model.reload(changed)).rejects.toThrow(/tokenizer\.json differs from the loaded model's/);
    await expect(model.reload(missing)).rejects.toThrow(/tokenizer\.json is missing/);
    expect(await model.scoreTargets(ITEMS)).toEqual(base.scores);
  });

  it('refuses a missing or corrupt model.onnx, naming the file, and keeps the old weights', async () => {
    const noOnnx = modelDirCopy((d) => unlinkSync(join(d, 'model.onnx')));
    const corrupt = modelDirCopy((d) => writeFileSync(join(d, 'model.onnx'), Buffer.from('not an onnx file')));
    tmp.push(noOnnx, corrupt);
    await expect(model.reload(noOnnx)).rejects.toThrow(/Missing ONNX model/);
    await expect(model.reload(corrupt)).rejects.toThrow(`${join(corrupt, 'model.onnx')} is not an ONNX model: field 13: wire type 6 (not a protobuf wire type) at byte 0 (protobuf)`);
    await expect(model.reload('/nonexistent/mempo-model')).rejects.toThrow(/directory \/nonexistent\/mempo-model does not exist/);
    await expect(model.reload('')).rejects.toThrow(/dir/);
    expect(await model.scoreTargets(ITEMS)).toEqual(base.scores);
  });

  it('a generation in flight finishes on the old weights; calls after the reload use the new ones', async () => {
    const long = { ...GEN, maxNewTokens: 150 };
    const m = await CausalLM.load(MODEL_DIR);
    try {
      const reference = await m.generate(PROMPTS, long);
      let done = false;
      const inFlight = m.generate(PROMPTS, long).then((r) => {
        done = true;
        return r;
      });
      await new Promise((r) => setTimeout(r, 20));
      await m.reload(reweighted);
      // The reload finished while the generation was still running (150 steps take far longer than a session build).
      expect(done).toBe(false);
      expect(await m.scoreTargets(ITEMS)).toEqual(fresh.scores);
      const old = await inFlight;
      expect(old.map((g) => g.tokenIds)).toEqual(reference.map((g) => g.tokenIds));
      expect(old.map((g) => g.logprobs)).toEqual(reference.map((g) => g.logprobs));
    } finally {
      await m.dispose();
    }
  });

  it('a dispose while a call is in flight lets the call finish, then later calls fail with ERR_DISPOSED', async () => {
    const m = await CausalLM.load(MODEL_DIR);
    const inFlight = m.generate(PROMPTS, { ...GEN, maxNewTokens: 40 });
    await m.dispose();
    expect((await inFlight).map((g) => g.tokenIds)).toEqual((await model.generate(PROMPTS, { ...GEN, maxNewTokens: 40 })).map((g) => g.tokenIds));
    await expect(m.scoreTargets(ITEMS)).rejects.toMatchObject({ code: 'ERR_DISPOSED' });
    await expect(m.reload(reweighted)).rejects.toMatchObject({ code: 'ERR_DISPOSED' });
  });
});

describe('LocalModel.reload', () => {
  it('changes what score returns, and reloading the original gives the original numbers back exactly', async () => {
    const lm = await LocalModel.load(MODEL_DIR);
    try {
      const items = ITEMS;
      const before = await lm.score(items);
      await lm.reload(reweighted);
      const after = await lm.score(items);
      expect(maxAbsDiff(after[0]!, before[0]!)).toBeGreaterThan(1e-2);
      after.forEach((a, i) => expect(maxAbsDiff(a, fresh.scores[i]!)).toBeLessThan(1e-5));
      await lm.reload(MODEL_DIR);
      expect(await lm.score(items)).toEqual(before);
    } finally {
      await lm.dispose();
    }
  });
});
