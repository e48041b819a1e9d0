/**
 * `mempo train` as a library (docs/algorithm.md §9): steps until `train.steps`, a metrics line and
 * (every `checkpointEvery` steps) a checkpoint per step; `resume` continues from the newest
 * complete checkpoint that verifies (`resumePoint`: its files, and the run's settings and data,
 * src/train/checkpoint.ts), and with the same seed reproduces the uninterrupted run's metrics (each
 * step samples with mixSeed(seed, step); the learner restores its weights, optimiser and RNG).
 * `train.asyncLevel` > 0 overlaps the rollouts with the updates (src/train/overlap.ts).
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Question } from '../contracts';
import { MempoError } from '../errors';
import { JsonlWriter, writeFileAtomic } from '../io/write';
import { checkpointDir, checkpoints, ensureRunDir, finishCheckpoint, metricsPath, pruneCheckpoints, readMetrics, resumePoint, runContents, trainSettings, verifyCheckpoint, type ResumePoint } from './checkpoint';
import { evalMetrics, type StepMetrics } from './metrics';
import { runOverlapped } from './overlap';
import { evaluate, runStep, stepQuestions, type TrainContext } from './step';

export interface TrainRun {
  out: string;
  /** The training questions in the run's (seeded) order. */
  order: readonly Question[];
  resume: boolean;
  /**
   * What identifies the run, recorded in every checkpoint's trainer.json; `resume` refuses other
   * settings. Default: trainSettings(ctx.pipeline, ctx.train, order, ctx.dev).
   */
  settings?: Record<string, unknown>;
  /** The checkpoint to continue from, when the caller chose it already (`resumePoint`); else `resume` chooses it. */
  from?: ResumePoint;
  /** Messages for the user: a checkpoint that did not verify and was skipped, settings an older checkpoint did not record. */
  notice?(message: string): void;
  onStepDone?(m: StepMetrics, all: readonly StepMetrics[]): void;
}

/** One whole, fsync'd line (a failed write is cut back to the last whole line). */
function appendLine(file: string, value: unknown): void {
  const w = new JsonlWriter(file, true);
  try {
    w.write([value]);
  } finally {
    w.close();
  }
}

/** `err` with `what` in front of its message (the file or directory it was about), its code kept. */
function naming(what: string, err: unknown): Error {
  const e = err as Error & { code?: unknown };
  return new MempoError(e instanceof MempoError ? e.code : 'ERR_RESUME', `${what}: ${e.message}`);
}

/** Where a run starts: step 1, or after the checkpoint `resumePoint` chose (whose weights the learner and engines then load). */
async function startingPoint(ctx: TrainContext, run: TrainRun, settings: Record<string, unknown>): Promise<{ start: number; metrics: StepMetrics[] }> {
  const file = metricsPath(run.out);
  if (!run.resume) {
    const held = runContents(run.out);
    if (held.length > 0) throw new MempoError('ERR_RESUME', `${run.out} holds a training run (metrics.jsonl or checkpoints/); pass --resume to continue it or --force to start over (it holds ${held.join(', ')})`);
    return { start: 1, metrics: [] };
  }
  // Refuses (no complete checkpoint, none that verifies, other settings) before anything is loaded or cut.
  const from = run.from ?? resumePoint(run.out, settings, run.notice ?? (() => undefined));
  try {
    await ctx.learner.loadCheckpoint(from.dir);
    await ctx.sync(from.dir);
  } catch (err) {
    throw naming(`resuming from ${from.dir}`, err);
  }
  const metrics = readMetrics(run.out, from.step);
  writeFileAtomic(file, metrics.map((m) => `${JSON.stringify(m)}\n`).join(''));
  return { start: from.step + 1, metrics };
}

/**
 * A learner's save that failed on a full disk says so first, whatever words the learner used
 * (the reference learner answers `no_space`, docs/learner.md), with what to do next.
 */
async function save(out: string, dir: string, write: (dir: string) => Promise<unknown>): Promise<void> {
  try {
    await write(dir);
  } catch (err) {
    const msg = (err as Error).message;
    if (!/\bno_space\b|\bENOSPC\b|no space left on device/i.test(msg)) throw err;
    throw new MempoError(err instanceof MempoError ? err.code : 'ERR_LEARNER', `No space left on device: the learner could not write ${dir} (${msg}); free some space and rerun with --resume: ${out} keeps its complete checkpoints`);
  }
}

/** A step-0 line: the starting policy's evaluation, so that curves start before the first update. */
function baseline(ev: StepMetrics['eval'], lr: number): StepMetrics {
  const none = { mean: null, std: null };
  return {
    step: 0, questions: 0, trajectories: 0, trained: 0, meanScore: null, em: null, formatValidRate: null, memoryReward: none,
    pFull: null, pMem: null, outcomeAdvantage: none, memoryAdvantage: none, loss: null, clipFrac: null, approxKl: null,
    klRef: null, gradNorm: null, lr, tokens: { generated: 0, trained: 0 }, wallMs: {}, eval: ev,
  };
}

export async function runTraining(ctx: TrainContext, run_: TrainRun): Promise<StepMetrics[]> {
  // Absolute: the learner writes checkpoints from its own working directory (it refuses relative paths).
  const run = { ...run_, out: resolve(run_.out) };
  ensureRunDir(run.out);
  const file = metricsPath(run.out);
  const settings = run.settings ?? trainSettings(ctx.pipeline, ctx.train, run.order, ctx.dev);
  const { start, metrics } = await startingPoint(ctx, run, settings);
  const o = ctx.train;
  if (start === 1 && o.evalEvery > 0 && ctx.dev.length > 0) {
    ctx.onPhase?.(0, 'eval');
    const m = baseline(evalMetrics(await evaluate(ctx, 0)), o.optim.lr);
    appendLine(file, m);
    metrics.push(m);
    run.onStepDone?.(m, metrics);
  }
  const saveWeights = async (step: number): Promise<string> => {
    if (step % o.checkpointEvery !== 0 && step !== o.steps) {
      const dir = join(run.out, 'weights');
      await save(run.out, dir, (d) => ctx.learner.saveWeights(d));
      return dir;
    }
    ctx.onPhase?.(step, 'checkpoint');
    const dir = checkpointDir(run.out, step);
    await save(run.out, dir, (d) => ctx.learner.saveCheckpoint(d));
    return dir;
  };
  const commit = (m: StepMetrics) => {
    appendLine(file, m);
    // Complete only once its metrics line is in: a kill before this redoes the step from the previous checkpoint.
    if (existsSync(checkpointDir(run.out, m.step))) {
      finishCheckpoint(checkpointDir(run.out, m.step), { step: m.step, seed: o.seed, settings });
      pruneCheckpoints(run.out, o.keepCheckpoints);
    }
    metrics.push(m);
    run.onStepDone?.(m, metrics);
  };
  if (o.asyncLevel > 0) {
    await runOverlapped(ctx, { start, order: run.order, priorWeights: (v) => priorWeights(ctx, run.out, v), saveWeights, commit, notice: run.notice ?? (() => undefined) });
    return metrics;
  }
  for (let step = start; step <= o.steps; step++) commit(await runStep(ctx, step, stepQuestions(run.order, step, o.questionsPerStep), saveWeights));
  return metrics;
}

/** Version v's model directory for a resumed overlapped run: the starting model for 0, else checkpoint v when complete and verified; null when gone. */
function priorWeights(ctx: TrainContext, out: string, v: number): string | null {
  if (v === 0) return ctx.baseWeights ?? null;
  const c = checkpoints(out).find((x) => x.step === v);
  return c !== undefined && verifyCheckpoint(c.dir, c.state).length === 0 ? c.dir : null;
}
