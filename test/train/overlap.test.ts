/**
 * The overlapped loop's schedule (src/train/overlap.ts) on the embedded model (real tokenizer,
 * real generation) against an in-process learner whose "weights" are a version number written into
 * each saved directory: which version samples each step, that a rollout runs while the learner
 * updates, that a save never replaces a directory before the engine loaded it, resume, and a
 * failing learner.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { GenerateParams, GenerationRequest, Learner, LearnerSample, Question } from '../../src/contracts';
import { CausalLM } from '../../src/engines/local/causal-lm';
import { LocalModel } from '../../src/engines/local/local-model';
import { readQuestions } from '../../src/io/questions';
import { resolveOptions } from '../../src/options';
import { Bm25Retriever } from '../../src/retrieval/bm25';
import { runTraining } from '../../src/train/loop';
import type { StepMetrics } from '../../src/train/metrics';
import { resolveTrainOptions, type TrainOptionsInput } from '../../src/train/options';
import type { TrainContext } from '../../src/train/step';
import { CORPUS, MODEL_DIR } from '../pipeline/helpers';

const DATA = join(__dirname, '..', '..', 'data', 'world');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let model: CausalLM;
let local: LocalModel;
const bm25 = Bm25Retriever.fromJsonl(CORPUS);
const order: Question[] = readQuestions(join(DATA, 'train.jsonl')).slice(0, 8);
const dev: Question[] = readQuestions(join(DATA, 'dev.jsonl')).slice(0, 2);
const root = mkdtempSync(join(tmpdir(), 'mempo-overlap-'));

beforeAll(async () => {
  model = await CausalLM.load(MODEL_DIR, { sessionOptions: { intraOpNumThreads: 1 } });
  local = new LocalModel(model);
});
afterAll(async () => {
  await model.dispose();
  rmSync(root, { recursive: true, force: true });
});

type Event = { at: number; what: string; v?: number; step?: number; end?: number };

/** A learner whose weights are its update count; each optimiser step takes `stepMs`, so rollouts can overlap it. */
class VersionLearner implements Learner {
  readonly name = 'version learner';
  version = 0;
  constructor(private readonly log: Event[], private readonly stepMs: number, private readonly failAt = 0) {}
  info() { return Promise.resolve({ protocol: 1, learner: 'v', model: '', parameters: 0, device: 'cpu', dtype: 'fp32', step: this.version }); }
  forward(samples: readonly LearnerSample[]) {
    this.log.push({ at: performance.now(), what: 'forward' });
    return Promise.resolve(samples.map((s) => new Float32Array(s.ids.length - s.targetStart).fill(-1 - this.version / 10)));
  }
  backward() { return Promise.resolve(); }
  async optimStep() {
    await sleep(this.stepMs);
    if (this.failAt === this.version + 1) throw new Error(`learner broke at update ${this.failAt}`);
    this.version++;
    this.log.push({ at: performance.now(), what: 'optim', v: this.version });
    return { gradNorm: 1, step: this.version };
  }
  private write(dir: string) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'version'), String(this.version));
    this.log.push({ at: performance.now(), what: 'save', v: this.version });
  }
  saveWeights(dir: string) { this.write(dir); return Promise.resolve(); }
  saveCheckpoint(dir: string) { this.write(dir); return Promise.resolve({ step: this.version }); }
  loadCheckpoint(dir: string) { this.version = Number(readFileSync(join(dir, 'version'), 'utf8')); return Promise.resolve({ step: this.version }); }
  close() { return Promise.resolve(); }
}

interface Harness {
  log: Event[];
  ctx: TrainContext;
  /** (step of the rollout in progress, or −v for the evaluation of version v; version the engine held) for every generate call. */
  sampled: Array<{ step: number; v: number }>;
}

function harness(train: TrainOptionsInput, opts: { stepMs?: number; failAt?: number } = {}): Harness {
  const log: Event[] = [];
  const base = join(root, 'base');
  mkdirSync(base, { recursive: true });
  writeFileSync(join(base, 'version'), '0');
  let engine = 0; // the version the "engine" holds: what the last sync read
  let rolling = 0;
  const sampled: Harness['sampled'] = [];
  // The embedded model, each call recorded with the version the engine holds.
  const generator = Object.create(local) as LocalModel;
  generator.generate = (reqs: readonly GenerationRequest[], p: GenerateParams) => {
    sampled.push({ step: rolling, v: engine });
    const e: Event = { at: performance.now(), what: 'generate', v: engine, step: rolling };
    log.push(e);
    return local.generate(reqs, p).finally(() => { e.end = performance.now(); });
  };
  const learner = new VersionLearner(log, opts.stepMs ?? 0, opts.failAt ?? 0);
  const ctx: TrainContext = {
    generator, scorer: null, retriever: bm25, learner,
    sync: (dir: string) => {
      engine = Number(readFileSync(join(dir, 'version'), 'utf8'));
      log.push({ at: performance.now(), what: 'sync', v: engine });
      return Promise.resolve();
    },
    pipeline: resolveOptions({ rollout: { groupSize: 2, maxTurns: 2, maxResponseTokens: 96, seed: 3 }, memory: { enabled: false } }),
    train: resolveTrainOptions({ questionsPerStep: 1, evalEvery: 2, loss: { klCoef: 0 }, ...train }),
    dev,
    baseWeights: base,
    // Only the sampling side's phases: an evaluation of version v is recorded as step −v.
    onPhase: (step, phase) => {
      if (phase === 'rollout') rolling = step;
      if (phase === 'eval') rolling = -step;
    },
  };
  return { log, ctx, sampled };
}

const withoutTimes = (ms: readonly StepMetrics[]) => ms.map(({ wallMs: _w, ...rest }) => rest);

describe('overlapped steps (asyncLevel > 0)', () => {
  it("step s samples with version max(0, s−1−N) only; step s+1's rollout runs during step s's update", async () => {
    for (const N of [1, 2]) {
      const h = harness({ steps: 5, asyncLevel: N, oldLogp: 'sampler' }, { stepMs: 400 });
      const ms = await runTraining(h.ctx, { out: join(root, `sched-${N}`), order, resume: false });
      expect(ms.map((m) => m.step)).toEqual([0, 1, 2, 3, 4, 5]);
      const want = [1, 2, 3, 4, 5].map((s) => Math.max(0, s - 1 - N));
      expect(ms.slice(1).map((m) => m.samplerVersion)).toEqual(want);
      // every generate call of rollout s ran on that version (the engine never changed mid-rollout)
      for (const { step, v } of h.sampled.filter((x) => x.step > 0)) expect(v).toBe(want[step - 1]);
      // the evaluations (steps 2, 4) ran on their own version
      const evals = h.sampled.filter((x) => x.step < 0);
      expect([...new Set(evals.map((x) => x.step))]).toEqual([-2, -4]);
      for (const { step, v } of evals) expect(v).toBe(-step);
      // overlap: a generate call of a later step runs while update k runs (from its forward to its optimiser step)
      const overlapped = h.log.filter((e) => e.what === 'optim').filter((o) => {
        const from = h.log.filter((e) => e.what === 'forward' && e.at < o.at).at(-1)!.at;
        return h.log.some((e) => e.what === 'generate' && (e.step ?? 0) > o.v! && e.at < o.at && e.end! > from);
      });
      expect(overlapped.length).toBeGreaterThanOrEqual(3);
      // a save of version k into weights/ comes after the engine loaded every version < k it needed
      const at = (what: string, v: number) => h.log.findIndex((e) => e.what === what && e.v === v);
      for (const v of want.filter((x) => x > 0)) expect(at('sync', v)).toBeLessThan(at('save', v + 1));
    }
  }, 60_000);

  it('with asyncLevel 0 the same harness runs one step after another: each step samples with the previous version', async () => {
    const h = harness({ steps: 3 }, { stepMs: 50 });
    const ms = await runTraining(h.ctx, { out: join(root, 'sync'), order, resume: false });
    expect(ms.slice(1).map((m) => m.samplerVersion)).toEqual([undefined, undefined, undefined]);
    for (const { step, v } of h.sampled.filter((x) => x.step > 0)) expect(v).toBe(step - 1);
    for (const { step, v } of h.sampled.filter((x) => x.step < 0)) expect(v).toBe(-step);
  }, 60_000);

  it('resumed from checkpoint 2, step 3 resamples with checkpoint 1 and the run repeats the uninterrupted one; without checkpoint 1, a notice and version 2', async () => {
    const train = { asyncLevel: 1, oldLogp: 'sampler' as const, keepCheckpoints: 2 };
    const full = harness({ ...train, steps: 4 });
    const ref = await runTraining(full.ctx, { out: join(root, 'full'), order, resume: false });
    const cut = join(root, 'cut');
    await runTraining(harness({ ...train, steps: 2 }).ctx, { out: cut, order, resume: false });
    const again = harness({ ...train, steps: 4 });
    const notices: string[] = [];
    const resumed = await runTraining(again.ctx, { out: cut, order, resume: true, notice: (m) => notices.push(m) });
    expect(notices).toEqual([]);
    expect(withoutTimes(resumed)).toEqual(withoutTimes(ref));

    // Resumed from checkpoint 1: step 2 samples with the starting model; version 1 is no rollout's, yet a save waits for it.
    const one = join(root, 'one');
    await runTraining(harness({ ...train, steps: 1 }).ctx, { out: one, order, resume: false });
    const fromOne = await runTraining(harness({ ...train, steps: 2 }).ctx, { out: one, order, resume: true, notice: (m) => notices.push(m) });
    expect(withoutTimes(fromOne)).toEqual(withoutTimes(ref.slice(0, 3)));

    const lean = join(root, 'lean');
    await runTraining(harness({ ...train, keepCheckpoints: 1, steps: 2 }).ctx, { out: lean, order, resume: false });
    const h = harness({ ...train, keepCheckpoints: 1, steps: 3 });
    const got = await runTraining(h.ctx, { out: lean, order, resume: true, notice: (m) => notices.push(m) });
    expect(notices).toEqual([expect.stringMatching(/^resuming an overlapped run: the weights of step 1 are no longer on disk .*so step 3 samples with step 2's/)]);
    expect(got.at(-1)!.samplerVersion).toBe(2);
  }, 90_000);

  it('a learner that fails mid-run rejects the run with its error; the rollout side stops, nothing hangs', async () => {
    const h = harness({ steps: 6, asyncLevel: 1, oldLogp: 'sampler', evalEvery: 0 }, { stepMs: 100, failAt: 2 });
    await expect(runTraining(h.ctx, { out: join(root, 'fail'), order, resume: false })).rejects.toThrow('learner broke at update 2');
    const started = new Set(h.sampled.map((x) => x.step));
    expect(Math.max(...started)).toBeLessThanOrEqual(3);
    const lines = readFileSync(join(root, 'fail', 'metrics.jsonl'), 'utf8').trim().split('\n');
    expect(lines.map((l) => (JSON.parse(l) as StepMetrics).step)).toEqual([1]);
  }, 60_000);

  it('asyncLevel above 0 with learner-recomputed old log-probs is refused naming both options', () => {
    expect(() => resolveTrainOptions({ asyncLevel: 1 })).toThrow(/^Invalid training option train\.oldLogp: asyncLevel above 0 needs oldLogp 'sampler'/);
    expect(resolveTrainOptions({ asyncLevel: 1, oldLogp: 'sampler' }).asyncLevel).toBe(1);
    expect(resolveTrainOptions({}).asyncLevel).toBe(0);
  });
});
