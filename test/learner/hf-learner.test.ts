/**
 * The torch learner on Hugging Face weights (learner/mempo_learner/hf.py, docs/learner.md "Hugging
 * Face models"), spawned by mempo (src/learner/spawn.ts) over real HTTP: a tiny Qwen3 of the test
 * zoo (test/python/zoo.py: real vocabulary, random weights built by transformers). Its forward is
 * transformers' own log-probs (computed here by a separate Python, one sample at a time), a step
 * moves the weights, and the directory it saves loads in transformers with the learner's numbers.
 * Needs a Python with torch >= 2.2 and transformers (requirements.txt): skipped with a printed
 * reason without one, a failure under CI (which installs it).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnLearner, type SpawnedLearner } from '../../src/learner/spawn';
import { rng } from '../helpers';

const ROOT = join(__dirname, '..', '..');
const PROBE = 'import sys, torch, transformers; v = tuple(int(x) for x in torch.__version__.split(".")[:2]); sys.exit(0 if v >= (2, 2) else 1)';

/** The first of MEMPO_PYTHON, python3 that imports torch >= 2.2 and transformers (MEMPO_PYTHON may be Debian's, for the embedded model); else null. */
function hfPython(): string | null {
  const candidates = [process.env['MEMPO_PYTHON'], 'python3'].filter((p): p is string => Boolean(p));
  return candidates.find((py) => spawnSync(py, ['-c', PROBE], { stdio: 'ignore', timeout: 120_000 }).status === 0) ?? null;
}

/** transformers' own log-probs: AutoModelForCausalLM on each sample alone (no padding), log_softmax at its targets. */
const REFERENCE = `
import json, sys, torch
from transformers import AutoModelForCausalLM
req = json.load(sys.stdin)
m = AutoModelForCausalLM.from_pretrained(req["model"], dtype=torch.float32, use_safetensors=True).eval()
out = {"parameters": sum(p.numel() for p in m.parameters()), "logp": []}
with torch.no_grad():
    for s in req["samples"]:
        x = torch.tensor([s["ids"]])
        lp = torch.log_softmax(m(input_ids=x).logits[0], -1)
        t = s["targetStart"]
        out["logp"].append(lp[torch.arange(t - 1, x.shape[1] - 1), x[0, t:]].tolist())
print(json.dumps(out))
`;

interface Reference { parameters: number; logp: number[][] }

function reference(py: string, model: string, samples: Array<{ ids: number[]; targetStart: number }>): Reference {
  const out = execFileSync(py, ['-c', REFERENCE], { input: JSON.stringify({ model, samples }), encoding: 'utf8', timeout: 120_000, maxBuffer: 64 << 20, stdio: ['pipe', 'pipe', 'ignore'] });
  return JSON.parse(out) as Reference;
}

function samplesOf(seed: number, vocab: number, lengths: number[], starts: number[]): Array<{ ids: number[]; targetStart: number }> {
  const r = rng(seed);
  return lengths.map((n, i) => ({ ids: Array.from({ length: n }, () => Math.floor(r() * vocab)), targetStart: starts[i]! }));
}

const maxAbsDiff = (a: ArrayLike<number>[], b: ArrayLike<number>[]) => {
  let m = 0;
  a.forEach((x, i) => {
    expect(x.length).toBe(b[i]!.length);
    for (let t = 0; t < x.length; t++) m = Math.max(m, Math.abs(x[t]! - b[i]![t]!));
  });
  return m;
};

const python = hfPython();
const describeHf = python !== null ? describe : process.env['CI'] ? describe : describe.skip;
if (python === null && !process.env['CI']) console.warn('hf learner: skipped, no python3 with torch >= 2.2 and transformers (pip install -r requirements.txt)');

describeHf('torch learner on a Hugging Face Qwen3 directory', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'mempo-hf-learner-'));
  const model = join(tmp, 'qwen3');
  const VOCAB = 151936; // test/python/zoo.py's Qwen3 config: the real vocabulary
  let learner: SpawnedLearner;
  beforeAll(async () => {
    if (python === null) throw new Error('no python3 with torch >= 2.2 and transformers under CI (pip install -r requirements.txt)');
    execFileSync(python, [join(ROOT, 'test', 'python', 'zoo.py'), 'qwen3', model], { stdio: 'ignore', timeout: 300_000 });
    learner = await spawnLearner({ model, python, seed: 1, threads: 1, device: 'cpu' });
  }, 300_000);
  afterAll(async () => {
    await learner?.close();
    rmSync(tmp, { recursive: true, force: true });
  });

  it("forward (current and reference, a padded batch) = transformers' log_softmax at the targets, within 2e-5", async () => {
    const samples = samplesOf(3, VOCAB, [31, 4, 17, 2], [5, 1, 16, 1]);
    const want = reference(python!, model, samples);
    const info = await learner.info();
    expect(info.parameters).toBe(want.parameters);
    expect(info.step).toBe(0);
    expect(maxAbsDiff(await learner.forward(samples), want.logp)).toBeLessThan(2e-5);
    expect(maxAbsDiff(await learner.forward(samples, { policy: 'reference' }), want.logp)).toBeLessThan(2e-5);
  }, 300_000);

  it('backward + optim_step move the weights; save_weights is a directory transformers loads with the learner\'s log-probs; a checkpoint loads back', async () => {
    const samples = samplesOf(5, VOCAB, [23, 9, 14], [3, 2, 10]);
    const before = await learner.forward(samples, { grad: true });
    await learner.backward(before.map((x) => new Float32Array(x.length).fill(-1 / 16))); // raise the targets' log-probs
    const { gradNorm, step } = await learner.optimStep({ lr: 1e-3, weightDecay: 0.1, maxGradNorm: 1, betas: [0.9, 0.999], eps: 1e-8 });
    expect(step).toBe(1);
    expect(gradNorm).toBeGreaterThan(1); // so that clipping acted
    const after = await learner.forward(samples);
    expect(maxAbsDiff(after, before)).toBeGreaterThan(1e-3);
    const mean = (xs: Float32Array[]) => xs.reduce((a, x) => a + x.reduce((s, v) => s + v, 0), 0);
    expect(mean(after)).toBeGreaterThan(mean(before));

    const dir = join(tmp, 'step-1');
    await learner.saveWeights(dir);
    const names = readdirSync(dir);
    for (const f of ['model.safetensors', 'config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json', 'manifest.json']) expect(names).toContain(f);
    expect(names.filter((n) => /\.(bin|pt|pth)$/.test(n))).toEqual([]);
    expect(maxAbsDiff(reference(python!, dir, samples).logp, after)).toBeLessThan(2e-5);

    const ck = join(tmp, 'ck-1');
    expect(await learner.saveCheckpoint(ck)).toEqual({ step: 1 });
    expect(existsSync(join(ck, 'learner.safetensors'))).toBe(true);
    expect(await learner.loadCheckpoint(ck)).toEqual({ step: 1 });
    expect(maxAbsDiff(await learner.forward(samples), after)).toBe(0);
  }, 300_000);
});
