/**
 * Hugging Face directories on the embedded runtime (issue 44, item 3): the test zoo's Qwen3,
 * Llama 3 and Qwen2.5 (test/python/zoo.py), exported by `python3 -m mempo_learner.export_onnx`,
 * run by CausalLM and compared with transformers itself (hf_reference.py): the logits of the
 * prompt pass and of cached decode steps within 1e-4, greedy tokens identical to
 * generate(do_sample=False), and the sampler's temperature-1 log-probs equal to transformers'
 * log_softmax at the sampled tokens within 1e-4 (PPO's ratio is 1 at step 0).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { CausalLM } from '../../../src/engines/local/causal-lm';
import { locateModelFiles } from '../../../src/engines/local/model-dir';
import { describeWithTransformers, exportHf, PY, ROOT, zoo } from './hf-helpers';

const REF = resolve(__dirname, 'hf_reference.py');
const CLI = resolve(ROOT, 'dist', 'cli', 'main.js');
const TOL = 1e-4;
const NEW_TOKENS = 16;

/** Prompts per architecture: a special token, high and low ids, two lengths (batched: one is left-padded). */
const PROMPTS: Record<string, number[][]> = {
  qwen3: [[151644, 872, 198, 9707, 1879, 0, 12345, 100000, 151643, 42], [9707, 11, 1879]],
  llama3: [[128000, 9906, 1917, 0, 12345, 100000, 128255, 7], [9906, 11, 1917]],
  'qwen2.5': [[151644, 872, 198, 9707, 1879, 0, 12345, 100000, 151935], [9707, 11, 1879]],
};

function reference(mode: 'greedy' | 'score' | 'chat', dir: string, request: unknown, out: string): void {
  const req = `${out}.request.json`;
  writeFileSync(req, JSON.stringify(request));
  const r = spawnSync(PY, [REF, mode, dir, req, out], { encoding: 'utf8', timeout: 300_000 });
  if (r.status !== 0) throw new Error(`hf_reference.py ${mode} failed (exit ${r.status}):\n${r.stderr.slice(-4000)}`);
}

function maxDiff(a: ArrayLike<number>, aOff: number, b: ArrayLike<number>, bOff: number, n: number): number {
  let m = 0;
  for (let i = 0; i < n; i++) {
    const d = Math.abs(a[aOff + i]! - b[bOff + i]!);
    if (!(d <= m)) m = d; // NaN counts as a failure
  }
  return m;
}

const ones = (n: number) => new BigInt64Array(n).fill(1n);
const range = (from: number, n: number) => BigInt64Array.from({ length: n }, (_, i) => BigInt(from + i));

describe('a Hugging Face directory without its export', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'mempo-hf-missing-'));
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ model_type: 'qwen3', num_hidden_layers: 1, num_attention_heads: 1, hidden_size: 8, vocab_size: 16, max_position_embeddings: 32 }));
    writeFileSync(join(dir, 'model.safetensors'), Buffer.alloc(16));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('is ERR_MODEL_FILE_MISSING naming the command that makes the export', async () => {
    await expect(CausalLM.load(dir)).rejects.toMatchObject({
      code: 'ERR_MODEL_FILE_MISSING',
      message: expect.stringContaining(`python3 -m mempo_learner.export_onnx ${dir}`),
    });
  });

  it('is refused as stale when its weights changed after the export', () => {
    mkdirSync(join(dir, 'onnx'));
    writeFileSync(join(dir, 'onnx', 'model.onnx'), Buffer.alloc(8));
    writeFileSync(join(dir, 'onnx', 'export.json'), JSON.stringify({ source: { 'model.safetensors': { bytes: 16, sha256: '0'.repeat(64) } } }));
    // Same size, newer than the manifest, other bytes: only the hash can tell.
    const later = new Date(Date.now() + 5000);
    writeFileSync(join(dir, 'model.safetensors'), Buffer.alloc(16, 1));
    utimesSync(join(dir, 'model.safetensors'), later, later);
    expect(() => locateModelFiles(dir)).toThrow(/stale: model\.safetensors changed after the export .*export_onnx/);
    writeFileSync(join(dir, 'model.safetensors'), Buffer.alloc(17));
    expect(() => locateModelFiles(dir)).toThrow(/stale: model\.safetensors is 17 bytes/);
  });

  it('is refused as stale when the export names a weights file that is gone, or misses one', () => {
    mkdirSync(join(dir, 'onnx'));
    writeFileSync(join(dir, 'onnx', 'model.onnx'), Buffer.alloc(8));
    writeFileSync(join(dir, 'onnx', 'export.json'), JSON.stringify({ source: { 'model-00001.safetensors': { bytes: 16, sha256: 'x' } } }));
    expect(() => locateModelFiles(dir)).toThrow(/stale: model-00001\.safetensors, which it was made from, is missing/);
    writeFileSync(join(dir, 'onnx', 'export.json'), JSON.stringify({ source: {} }));
    expect(() => locateModelFiles(dir)).toThrow(/stale: model\.safetensors is not among the files it was made from/);
  });
});

describeWithTransformers('Hugging Face exports on the embedded runtime vs transformers', () => {
  const work = mkdtempSync(join(tmpdir(), 'mempo-hf-onnx-'));
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  describe.each(['qwen3', 'llama3', 'qwen2.5'])('%s', (arch) => {
    let dir: string;
    let model: CausalLM;
    let ref: { tokens: number[][]; steps: number[] };
    let refLogits: Float32Array;
    const prompts = PROMPTS[arch]!;

    beforeAll(async () => {
      dir = zoo(arch, join(work, arch));
      exportHf(dir);
      reference('greedy', dir, { prompts, new_tokens: NEW_TOKENS }, join(work, `${arch}-greedy`));
      ref = JSON.parse(readFileSync(join(work, `${arch}-greedy.json`), 'utf8')) as typeof ref;
      const buf = readFileSync(join(work, `${arch}-greedy.f32`));
      refLogits = new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
      model = await CausalLM.load(dir);
    }, 600_000);
    afterAll(async () => {
      await model?.dispose();
    });

    it('loads from DIR/onnx/model.onnx with the directory\'s own tokenizer, logits selected at load', () => {
      expect(model.modelPath).toBe(join(dir, 'onnx', 'model.onnx'));
      expect(model.tokenizer?.dir).toBe(dir);
      expect(model.io.selectReason).toBeUndefined();
      expect(model.io.selectLogits).toBe(true);
    });

    it('gives transformers\' logits within 1e-4 on the prompt pass and on cached decode steps', async () => {
      const V = model.config.vocabSize;
      let off = 0;
      for (let p = 0; p < prompts.length; p++) {
        const ids = prompts[p]!;
        const n = ids.length;
        // The prompt pass: every position's logits.
        const full = await model.logitsOf(ids);
        expect(maxDiff(full, 0, refLogits, off, n * V)).toBeLessThan(TOL);
        off += n * V;
        // Then generate()'s rows: the last prompt position, then one cached step per greedy token.
        let out = await model.forward({ inputIds: BigInt64Array.from(ids, BigInt), batch: 1, seqLen: n, attentionMask: ones(n), positionIds: range(0, n), past: model.emptyCache(1), fetchPresent: true });
        const steps = ref.steps[p]!;
        expect(steps).toBeGreaterThanOrEqual(4);
        const diffs: number[] = [maxDiff(out.logits, (n - 1) * V, refLogits, off, V)];
        for (let k = 1; k < steps; k++) {
          const tok = ref.tokens[p]![k - 1]!;
          out = await model.forward({ inputIds: BigInt64Array.of(BigInt(tok)), batch: 1, seqLen: 1, attentionMask: ones(n + k), positionIds: range(n + k - 1, 1), past: out.present!, fetchPresent: true });
          diffs.push(maxDiff(out.logits, 0, refLogits, off + k * V, V));
        }
        off += steps * V;
        expect(Math.max(...diffs)).toBeLessThan(TOL);
      }
    });

    it('decodes greedily the tokens of transformers\' generate(do_sample=False), batched with left padding', async () => {
      const res = await model.generate(prompts, { maxNewTokens: NEW_TOKENS, temperature: 0, decode: false });
      expect(res.map((r) => r.tokenIds)).toEqual(ref.tokens);
      expect(ref.tokens[0]!.length).toBe(NEW_TOKENS);
    });

    it('samples at temperature 1 with log-probs equal to transformers\' log_softmax at the sampled tokens (PPO ratio 1 at step 0)', async () => {
      const res = await model.generate(prompts, { maxNewTokens: 12, temperature: 1, seed: 7, decode: false });
      const items = prompts.map((p, i) => ({ prompt: p, tokens: res[i]!.tokenIds }));
      reference('score', dir, { items }, join(work, `${arch}-score.json`));
      const want = (JSON.parse(readFileSync(join(work, `${arch}-score.json`), 'utf8')) as { logprobs: number[][] }).logprobs;
      for (let i = 0; i < prompts.length; i++) {
        expect(res[i]!.tokenIds.length).toBeGreaterThan(0);
        const got = Array.from(res[i]!.logprobs);
        expect(got).toHaveLength(want[i]!.length);
        const ratios = got.map((g, t) => Math.abs(Math.exp(g - want[i]![t]!) - 1));
        expect(maxDiff(got, 0, want[i]!, 0, got.length)).toBeLessThan(TOL);
        expect(Math.max(...ratios)).toBeLessThan(TOL);
      }
    });

    it('runs `mempo rollout --model HFDIR` end to end: prompts are the tokenizer\'s own chat template, old log-probs are transformers\'', () => {
      const out = join(work, `${arch}-rollout`);
      const system = 'Answer with a search, then the answer.';
      const r = spawnSync(process.execPath, [CLI, 'rollout', '--model', dir, '--limit', '2', '--group-size', '2', '--max-turns', '2', '--max-round-tokens', '16',
        '--max-response-tokens', '64', '--seed', '3', '--threads', '1', '--quiet', '--no-report', '--system-prompt', system, '--out', out], { encoding: 'utf8', timeout: 300_000 });
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
      const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as { trajectories: number; backendErrors: number; tokensGenerated: number };
      expect(summary).toMatchObject({ trajectories: 4, backendErrors: 0 });
      expect(summary.tokensGenerated).toBeGreaterThan(0);
      const records = readFileSync(join(out, 'batch.jsonl'), 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as {
        question: string; promptIds: number[]; responseIds: number[]; oldLogp: number[]; rounds: { start: number; end: number }[];
      });
      expect(records).toHaveLength(4);
      // The prompt: transformers' apply_chat_template of the same messages, with the generation prompt.
      reference('chat', dir, { conversations: records.map((rec) => [{ role: 'system', content: system }, { role: 'user', content: rec.question }]) }, join(work, `${arch}-chat.json`));
      const chat = (JSON.parse(readFileSync(join(work, `${arch}-chat.json`), 'utf8')) as { ids: number[][] }).ids;
      records.forEach((rec, i) => expect(rec.promptIds).toEqual(chat[i]));
      // The first round was sampled right after the prompt: its old log-probs are transformers' at temperature 1.
      const items = records.map((rec) => ({ prompt: rec.promptIds, tokens: rec.responseIds.slice(rec.rounds[0]!.start, rec.rounds[0]!.end) }));
      expect(items.every((it) => it.tokens.length > 0)).toBe(true);
      reference('score', dir, { items }, join(work, `${arch}-rollout-score.json`));
      const want = (JSON.parse(readFileSync(join(work, `${arch}-rollout-score.json`), 'utf8')) as { logprobs: number[][] }).logprobs;
      records.forEach((rec, i) => {
        const got = rec.oldLogp.slice(rec.rounds[0]!.start, rec.rounds[0]!.end);
        expect(maxDiff(got, 0, want[i]!, 0, got.length)).toBeLessThan(TOL);
      });
    });
  });
});
