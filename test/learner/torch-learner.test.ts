/**
 * The torch reference learner (learner/mempo_learner, docs/learner.md) spawned by mempo over real
 * HTTP on 127.0.0.1: its forward is ONNX Runtime's log-probs on the same weights (within 1e-4),
 * its saved weights are what the in-process model then scores with, and a learner that dies
 * fails the call naming it. Skipped only when no Python with torch exists (CI installs one).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CausalLM } from '../../src/engines/local/causal-lm';
import { spawnLearner, type SpawnedLearner } from '../../src/learner/spawn';
import { EMBEDDED } from '../../src/paths';
import { MempoError } from '../../src/errors';
import { describeWithTorch, rng } from '../helpers';


function items(n: number, seed: number, vocab: number): Array<{ contextIds: number[]; targetIds: number[] }> {
  const r = rng(seed);
  return Array.from({ length: n }, () => ({
    contextIds: Array.from({ length: 3 + Math.floor(r() * 40) }, () => 1 + Math.floor(r() * (vocab - 1))),
    targetIds: Array.from({ length: 1 + Math.floor(r() * 30) }, () => 1 + Math.floor(r() * (vocab - 1))),
  }));
}

const maxAbsDiff = (a: Float32Array[], b: Float32Array[]) => Math.max(...a.map((x, i) => Math.max(...x.map((v, t) => Math.abs(v - b[i]![t]!)))));

describeWithTorch('torch reference learner', () => {
  let learner: SpawnedLearner;
  let model: CausalLM;
  const tmp = mkdtempSync(join(tmpdir(), 'mempo-learner-'));
  beforeAll(async () => {
    learner = await spawnLearner({ model: EMBEDDED.model(), seed: 1, threads: 2 });
    model = await CausalLM.load(EMBEDDED.model());
  }, 120_000);
  afterAll(async () => {
    await learner?.close();
    await model?.dispose();
    rmSync(tmp, { recursive: true, force: true });
  });

  it('reports the embedded model', async () => {
    const info = await learner.info();
    expect(info.protocol).toBe(1);
    expect(info.parameters).toBe(3410176); // models/mempo-tiny/config.json num_parameters
    expect(info.step).toBe(0);
  });

  it("forward = ONNX Runtime's target log-probs on the same weights, within 1e-4 (current and reference)", async () => {
    const its = items(12, 4, model.config.vocabSize);
    const ort = await model.scoreTargets(its);
    const samples = its.map((it) => ({ ids: [...it.contextIds, ...it.targetIds], targetStart: it.contextIds.length }));
    const cur = await learner.forward(samples);
    const ref = await learner.forward(samples, { policy: 'reference' });
    expect(cur.map((x) => x.length)).toEqual(its.map((it) => it.targetIds.length));
    expect(maxAbsDiff(cur, ort)).toBeLessThan(1e-4);
    expect(maxAbsDiff(ref, ort)).toBeLessThan(1e-4);
  }, 120_000);

  it('a step moves the weights; the saved model directory scores (ORT) what the learner now computes, and the reference stays', async () => {
    const its = items(6, 9, model.config.vocabSize);
    const samples = its.map((it) => ({ ids: [...it.contextIds, ...it.targetIds], targetStart: it.contextIds.length }));
    const before = await model.scoreTargets(its);
    const lp = await learner.forward(samples, { grad: true });
    await learner.backward(lp.map((x) => new Float32Array(x.length).fill(-1 / 64))); // raise the targets' log-probs
    const { gradNorm, step } = await learner.optimStep({ lr: 3e-3, weightDecay: 0, maxGradNorm: 0, betas: [0.9, 0.999], eps: 1e-8 });
    expect(step).toBe(1);
    expect(gradNorm).toBeGreaterThan(0);
    const after = await learner.forward(samples);
    const dir = join(tmp, 'step-1');
    await learner.saveWeights(dir);
    const reloaded = await CausalLM.load(dir);
    try {
      const ort = await reloaded.scoreTargets(its);
      expect(maxAbsDiff(ort, after)).toBeLessThan(1e-4);
      expect(maxAbsDiff(ort, before)).toBeGreaterThan(1e-3);
      const meanGain = ort.reduce((a, x, i) => a + x.reduce((s, v, t) => s + v - before[i]![t]!, 0), 0);
      expect(meanGain).toBeGreaterThan(0);
    } finally {
      await reloaded.dispose();
    }
    expect(maxAbsDiff(await learner.forward(samples, { policy: 'reference' }), before)).toBeLessThan(1e-4);
  }, 120_000);

  it('a backward without its forward is refused before it is sent; the learner stays up', async () => {
    await expect(learner.backward([new Float32Array(1)])).rejects.toThrow('backward needs a forward({ grad: true }) before it');
    expect((await learner.info()).step).toBe(1);
  });

  it('a learner killed during a call fails it with its exit status, and every later call', async () => {
    const l = await spawnLearner({ model: EMBEDDED.model(), seed: 1, threads: 1 });
    const big = items(64, 2, model.config.vocabSize).map((it) => ({ ids: [...it.contextIds, ...it.targetIds, ...it.contextIds, ...it.targetIds], targetStart: 1 }));
    const call = l.forward(big, { grad: true });
    setTimeout(() => process.kill(l.pid!, 'SIGKILL'), 300);
    let err: unknown;
    try {
      await call;
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(MempoError);
    expect((err as MempoError).code).toBe('ERR_LEARNER');
    expect((err as MempoError).message).toMatch(/the learner \(.* -m mempo_learner --model .*\) exited \(SIGKILL\)/);
    await expect(l.info()).rejects.toThrow('exited (SIGKILL)');
    await l.close();
  }, 120_000);
});
