/**
 * @jest-environment ./test/runtime-environment.js
 *
 * Logits only where they are read (src/engines/local/onnx-select.ts): the load-time rewrite on
 * the embedded model (a torch export: MatMul with a tied-embedding initializer) and on a
 * tools/real-vocab directory (optimum layout, Transpose of the embedding, plus the script's
 * ScatterElements bonus), compared with the same model loaded with `selectLogits: false` (the
 * exported graph, full logits) in the same process.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CausalLM } from '../../../src/engines/local/causal-lm';
import { rewriteSelectLogits } from '../../../src/engines/local/onnx-select';
import { fields, firstString, Msg } from '../../../src/engines/local/onnx-wire';
import { scoreTargets } from '../../../src/engines/local/scorer';
import type { ForwardInput, ForwardModel, ScoreOptions } from '../../../src/engines/local/types';
import { buildRealVocabModel } from '../../../tools/real-vocab/build';
import { decoderGraph } from '../../../tools/real-vocab/graph';
import { encodeModel } from '../../../tools/real-vocab/onnx';
import { MODEL_DIR, maxAbsDiff, modelCopy, randomIds, referenceLogprobs } from './helpers';

type Item = { contextIds: number[]; targetIds: number[] };

/**
 * MemPO-shaped: trajectories whose round contexts are prefixes of each other (tail passes),
 * memory contexts sharing the prompt, and lone items of different lengths.
 */
function memoItems(vocab: number, lo: number): Item[] {
  const ids = (n: number, seed: number) => randomIds(n, seed, lo, vocab);
  const out: Item[] = [];
  for (let q = 0; q < 3; q++) {
    const prompt = ids(20 + 7 * q, 10 + q);
    const r1 = [...prompt, ...ids(15 + q, 20 + q)];
    const r2 = [...r1, ...ids(30 - 5 * q, 30 + q)];
    const target = ids(2 + q, 40 + q);
    out.push({ contextIds: r1, targetIds: target }, { contextIds: r2, targetIds: target });
    out.push({ contextIds: [...prompt, ...ids(6, 50 + q)], targetIds: ids(3, 60 + q) });
  }
  for (const [n, t] of [[1, 1], [4, 6], [57, 2]] as const) out.push({ contextIds: ids(n, 70 + n), targetIds: ids(t, 80 + n) });
  return out;
}

/** `model` as a ForwardModel that records each pass's selected rows and output size. */
function spied(model: CausalLM, passes: { at: number | undefined; tokens: number; floats: number }[]): ForwardModel {
  return {
    modelPath: model.modelPath, config: model.config, io: model.io, tokenizer: model.tokenizer,
    padTokenId: model.padTokenId, eosTokenIds: model.eosTokenIds, emptyCache: (b) => model.emptyCache(b),
    forward: async (input: ForwardInput) => {
      const out = await model.forward(input);
      passes.push({ at: input.logitsAt?.length, tokens: input.batch * input.seqLen, floats: out.logits.length });
      return out;
    },
  };
}

async function expectSameScores(sel: CausalLM, full: CausalLM, items: Item[], options: ScoreOptions): Promise<void> {
  const a = await sel.scoreTargetsWithStats(items, options);
  const b = await full.scoreTargetsWithStats(items, options);
  for (let i = 0; i < items.length; i++) {
    expect(a.results[i]).toHaveLength(items[i]!.targetIds.length);
    expect(maxAbsDiff(a.results[i]!, b.results[i]!)).toBeLessThan(1e-5);
  }
  if (options.sharePrefixes !== false) expect(a.stats.sharedItems).toBeGreaterThan(0);
}

/** `src` with initializer `name` moved to the external data file `location` (as optimum writes large models). */
function withExternalData(src: Uint8Array, name: string, location: string): { model: Uint8Array; data: Uint8Array } {
  const m = fields(src);
  const gf = m.find((f) => f.no === 7)!;
  const graph = new Msg();
  let data: Uint8Array | undefined;
  for (const x of fields(gf.body)) {
    if (x.no !== 5 || firstString(fields(x.body), 8) !== name) {
      graph.raw(gf.body, x);
      continue;
    }
    const t = new Msg();
    for (const y of fields(x.body)) if (y.no === 9) data = y.body; else t.raw(x.body, y);
    for (const [k, v] of [['location', location], ['offset', '0'], ['length', String(data!.length)]]) t.msg(13, new Msg().str(1, k!).str(2, v!));
    graph.msg(5, t.int(14, 1));
  }
  const model = new Msg();
  for (const x of m) if (x === gf) model.msg(7, graph); else model.raw(src, x);
  return { model: model.finish(), data: Uint8Array.from(data!) };
}

describe('selected logits on the embedded model', () => {
  let sel: CausalLM;
  let full: CausalLM;
  beforeAll(async () => {
    sel = await CausalLM.load(MODEL_DIR);
    full = await CausalLM.load(MODEL_DIR, { selectLogits: false });
  });
  afterAll(async () => {
    await sel?.dispose();
    await full?.dispose();
  });
  const V = () => sel.config.vocabSize;

  it('rewrites the graph at load; selectLogits: false keeps the export', () => {
    expect(sel.io.selectLogits).toBe(true);
    expect(sel.io.selectReason).toBeUndefined();
    expect(full.io.selectLogits).toBe(false);
    expect(full.io.selectReason).toMatch(/selectLogits: false/);
  });

  it.each([
    ['right', true],
    ['left', true],
    ['right', false],
    ['left', false],
  ] as const)('scores within 1e-5 of full logits (padding %s, prefix sharing %s)', async (padding, sharePrefixes) => {
    await expectSameScores(sel, full, memoItems(V(), 13), { padding, sharePrefixes });
  });

  it('matches teacher forcing one sequence at a time, and the per-call selectLogits: false', async () => {
    const items = memoItems(V(), 13);
    const got = await sel.scoreTargets(items);
    const off = await sel.scoreTargets(items, { selectLogits: false });
    for (let i = 0; i < items.length; i++) {
      const ref = await referenceLogprobs(full, items[i]!.contextIds, items[i]!.targetIds);
      expect(maxAbsDiff(got[i]!, ref)).toBeLessThan(1e-4);
      expect(maxAbsDiff(got[i]!, off[i]!)).toBeLessThan(1e-5);
    }
  });

  it('fetches only the target rows; maxLogitsBytes then bounds targets, not tokens', async () => {
    const items = memoItems(V(), 13);
    const targets = items.reduce((a, it) => a + it.targetIds.length, 0);
    const passes: { at: number | undefined; tokens: number; floats: number }[] = [];
    const cap = 6; // the longest target: an item is never split
    const { results, stats } = await scoreTargets(spied(sel, passes), items, { maxLogitsBytes: cap * V() * 4 });
    expect(passes.length).toBe(stats.microBatches);
    expect(passes.reduce((a, p) => a + (p.at ?? NaN), 0)).toBe(targets);
    for (const p of passes) {
      expect(p.at).toBeLessThanOrEqual(cap);
      expect(p.floats).toBe(p.at! * V());
    }
    expect(Math.max(...passes.map((p) => p.tokens))).toBeGreaterThan(cap); // full logits would cap a pass at 6 tokens
    // Other micro-batches than the default's: the scorer's own batching tolerance (scorer.test.ts).
    const ref = await full.scoreTargets(items);
    for (let i = 0; i < items.length; i++) expect(maxAbsDiff(results[i]!, ref[i]!)).toBeLessThan(1e-4);
    passes.length = 0;
    await scoreTargets(spied(sel, passes), items, { selectLogits: false });
    expect(passes.every((p) => p.at === undefined && p.floats === p.tokens * V())).toBe(true);
  });

  it('generates the same tokens with a fixed seed, prefilling only the last positions', async () => {
    const prompts = [randomIds(9, 1), randomIds(30, 2), randomIds(9, 1), randomIds(3, 3), randomIds(17, 4)];
    const opts = { maxNewTokens: 12, seed: 7, eosTokenIds: [], decode: false };
    const a = await sel.generate(prompts, opts);
    const b = await full.generate(prompts, opts);
    const chunked = { ...opts, maxLogitsBytes: 3 * V() * 4 * 4 }; // 4 unique prompts: 3 columns per prefill pass
    const c = await full.generate(prompts, chunked);
    const d = await sel.generate(prompts, chunked);
    for (let i = 0; i < prompts.length; i++) {
      expect(a[i]!.tokenIds).toEqual(b[i]!.tokenIds);
      expect(c[i]!.tokenIds).toEqual(b[i]!.tokenIds);
      expect(d[i]!.tokenIds).toEqual(b[i]!.tokenIds);
      expect(maxAbsDiff(a[i]!.logprobs, b[i]!.logprobs)).toBeLessThan(1e-5);
      expect(maxAbsDiff(d[i]!.logprobs, c[i]!.logprobs)).toBeLessThan(1e-5);
    }
    const passes: { at: number | undefined; tokens: number; floats: number }[] = [];
    const { generate } = await import('../../../src/engines/local/generate');
    await generate(spied(sel, passes), prompts.slice(0, 2), { ...opts, maxNewTokens: 2 });
    expect(passes[0]).toEqual({ at: 2, tokens: 2 * 30, floats: 2 * V() });
    passes.length = 0;
    await generate(spied(sel, passes), prompts.slice(0, 2), { ...opts, maxNewTokens: 1, maxLogitsBytes: 2 * 10 * V() * 4 });
    expect(passes).toEqual([0, 0].map(() => ({ at: 0, tokens: 20, floats: 0 })).concat([{ at: 2, tokens: 20, floats: 2 * V() }]));
  });

  it('forward: logitsAt picks rows in order on both graphs; out of range is a clear error', async () => {
    const ids = randomIds(6, 9);
    const input = (logitsAt?: number[]): ForwardInput => ({
      inputIds: BigInt64Array.from([...ids, ...ids.slice(0, 3), 0, 0, 0].map(BigInt)), batch: 2, seqLen: 6,
      attentionMask: BigInt64Array.from([1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0].map(BigInt)),
      positionIds: BigInt64Array.from([0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5].map(BigInt)),
      past: sel.emptyCache(2), fetchPresent: false, logitsAt,
    });
    const all = (await full.forward(input())).logits;
    const at = [8, 0, 5, 8];
    const rows = Float32Array.from(at.flatMap((r) => Array.from(all.subarray(r * V(), (r + 1) * V()))));
    expect(maxAbsDiff((await sel.forward(input(at))).logits, rows)).toBeLessThan(1e-5);
    expect(maxAbsDiff((await full.forward(input(at))).logits, rows)).toBe(0);
    expect(maxAbsDiff((await sel.forward(input())).logits, all)).toBeLessThan(1e-5);
    for (const m of [sel, full]) {
      await expect(m.forward(input([3, 12]))).rejects.toThrow(/logitsAt\[1\] is 12, not a position of the pass's 2 × 6 = 12 positions/);
      await expect(m.forward(input([-1]))).rejects.toMatchObject({ code: 'ERR_INVALID_ARGUMENT' });
      await expect(m.forward(input([1.5]))).rejects.toThrow(/logitsAt\[0\] is 1.5/);
    }
  });

  it('a reload rewrites the new file too', async () => {
    const dir = modelCopy();
    const m = await CausalLM.load(MODEL_DIR);
    try {
      await m.reload(dir);
      expect(m.io.selectLogits).toBe(true);
      const items = memoItems(V(), 13).slice(0, 4);
      const [a, b] = [await m.scoreTargets(items), await full.scoreTargets(items)];
      for (let i = 0; i < items.length; i++) expect(maxAbsDiff(a[i]!, b[i]!)).toBeLessThan(1e-5);
    } finally {
      await m.dispose();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('selected logits on a real-vocabulary directory (V = 151,936)', () => {
  let tmp: string;
  let sel: CausalLM;
  let full: CausalLM;
  beforeAll(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'mempo-select-'));
    const dir = buildRealVocabModel(join(tmp, 'model')).dir; // with the script's ScatterElements bonus
    sel = await CausalLM.load(dir, { sessionOptions: { intraOpNumThreads: 1 } });
    full = await CausalLM.load(dir, { selectLogits: false, sessionOptions: { intraOpNumThreads: 1 } });
  });
  afterAll(async () => {
    await sel?.dispose();
    await full?.dispose();
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  });

  it('rewrites the graph through the ScatterElements bonus', () => {
    expect(sel.io.selectLogits).toBe(true);
  });

  it.each([
    ['right', true],
    ['left', false],
  ] as const)('scores within 1e-5 of full logits (padding %s, prefix sharing %s)', async (padding, sharePrefixes) => {
    await expectSameScores(sel, full, memoItems(151669, 100), { padding, sharePrefixes });
  });

  it('generates the same tokens with a fixed seed (the script bonus applies at the selected rows)', async () => {
    const tok = sel.tokenizer!;
    const prompts = [tok.encode('<|im_start|>user\nWhere?<|im_end|>\n<|im_start|>assistant\n'), randomIds(12, 5, 100, 151669)];
    const opts = { maxNewTokens: 10, seed: 3, eosTokenIds: [], decode: false };
    const [a, b] = [await sel.generate(prompts, opts), await full.generate(prompts, opts)];
    for (let i = 0; i < prompts.length; i++) {
      expect(a[i]!.tokenIds).toEqual(b[i]!.tokenIds);
      expect(maxAbsDiff(a[i]!.logprobs, b[i]!.logprobs)).toBeLessThan(1e-5);
    }
    expect(tok.decode(a[0]!.tokenIds)).toContain('<mem>facts</mem>');
  });

  it('a graph with its weights in an external data file is rewritten too', async () => {
    const dir = join(tmp, 'external');
    buildRealVocabModel(dir, { script: false });
    const { model, data } = withExternalData(readFileSync(join(dir, 'model.onnx')), 'embed', 'model.onnx_data');
    writeFileSync(join(dir, 'model.onnx'), model);
    writeFileSync(join(dir, 'model.onnx_data'), data);
    copyFileSync(join(dir, 'model.onnx'), join(dir, 'copy.onnx'));
    const m = await CausalLM.load(dir, { sessionOptions: { intraOpNumThreads: 1 } });
    const f = await CausalLM.load(dir, { selectLogits: false, sessionOptions: { intraOpNumThreads: 1 } });
    try {
      expect(m.io.selectLogits).toBe(true);
      await expectSameScores(m, f, memoItems(151669, 100), {});
      expect(readFileSync(join(dir, 'model.onnx')).equals(readFileSync(join(dir, 'copy.onnx')))).toBe(true);
      rmSync(join(dir, 'model.onnx_data'));
      await expect(CausalLM.load(dir)).rejects.toThrow(/could not open/); // the export itself needs it too
    } finally {
      await m.dispose();
      await f.dispose();
    }
  });

  it('a graph whose logits come from an op the rewrite does not know loads on full logits and still scores', async () => {
    const dir = join(tmp, 'model');
    const g = decoderGraph({ vocabSize: sel.config.vocabSize, hidden: 16, heads: 2, layers: 1, seed: 1234 });
    const nodes = g.nodes.map((n) => (n.outputs[0] === 'logits' ? { ...n, outputs: ['logits_mm'] } : n));
    const crafted = { ...g, nodes: [...nodes, { op: 'LogSoftmax', inputs: ['logits_mm'], outputs: ['logits'], attrs: { axis: { int: -1 } } }] };
    writeFileSync(join(tmp, 'crafted.onnx'), encodeModel(crafted));
    const m = await CausalLM.load(dir, { modelFile: join(tmp, 'crafted.onnx'), sessionOptions: { intraOpNumThreads: 1 } });
    try {
      expect(m.io.selectLogits).toBe(false);
      expect(m.io.selectReason).toMatch(/logits come from a LogSoftmax node .*which the rewrite does not handle/);
      const items = memoItems(151669, 100).slice(6, 9);
      const got = await m.scoreTargets(items);
      for (let i = 0; i < items.length; i++) {
        const ref = await referenceLogprobs(m, items[i]!.contextIds, items[i]!.targetIds);
        expect(maxAbsDiff(got[i]!, ref)).toBeLessThan(1e-4);
      }
    } finally {
      await m.dispose();
    }
  });
});

describe('rewriteSelectLogits', () => {
  it('reports a reason for bytes that are not a model, never throws', () => {
    expect(rewriteSelectLogits(Uint8Array.of(0x0a, 0xff))).toEqual({
      reason: 'the file is not a readable ONNX model (field 1 length: truncated varint at byte 1)',
      malformed: 'field 1 length: truncated varint at byte 1',
    });
    expect(rewriteSelectLogits(new Uint8Array(0)).reason).toMatch(/no graph/);
  });

  it('leaves the file on disk unchanged', () => {
    const before = readFileSync(join(MODEL_DIR, 'model.onnx'));
    const r = rewriteSelectLogits(before);
    expect(r.bytes).toBeDefined();
    expect(readFileSync(join(MODEL_DIR, 'model.onnx')).equals(before)).toBe(true);
  });
});
