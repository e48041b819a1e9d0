/**
 * `mempo train` as a library (docs/algorithm.md §9): steps until `train.steps`, a metrics line and
 * (every `checkpointEvery` steps) a checkpoint per step; `resume` continues from the newest
 * complete checkpoint, and with the same seed reproduces the uninterrupted run's metrics (each
 * step samples with mixSeed(seed, step); the learner restores its weights, optimiser and RNG).
 */
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Question } from '../contracts';
import { MempoError } from '../errors';
import { JsonlWriter, writeFileAtomic } from '../io/write';
import { checkpointDir, checkpoints, ensureRunDir, finishCheckpoint, metricsPath, pruneCheckpoints, readMetrics } from './checkpoint';
import { evalMetrics, type StepMetrics } from './metrics';
import { evaluate, runStep, stepQuestions, type TrainContext } from './step';

export interface TrainRun {
  out: string;
  /** The training questions in the run's (seeded) order. */
  order: readonly Question[];
  resume: boolean;
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

/** The settings a resumed run must share (everything but the number of steps). */
function settingsKey(ctx: TrainContext): string {
  const { steps: _steps, ...train } = ctx.train;
  return JSON.stringify({ pipeline: ctx.pipeline, train });
}

/** Where a run starts: step 1, or after the newest complete checkpoint (whose weights the learner and engines then load). */
async function startingPoint(ctx: TrainContext, run: TrainRun): Promise<{ start: number; metrics: StepMetrics[] }> {
  const file = metricsPath(run.out);
  const cps = checkpoints(run.out);
  if (!run.resume) {
    if (existsSync(file) || cps.length > 0) throw new MempoError('ERR_RESUME', `${run.out} holds a training run (metrics.jsonl or checkpoints/); pass --resume to continue it or --force to start over`);
    return { start: 1, metrics: [] };
  }
  const last = cps.at(-1);
  if (last === undefined) {
    rmSync(file, { force: true });
    return { start: 1, metrics: [] };
  }
  if (last.state.settings !== settingsKey(ctx)) throw new MempoError('ERR_RESUME', `${join(last.dir, 'trainer.json')}: the run was started with other settings than this one (only --steps may change on --resume)`);
  await ctx.learner.loadCheckpoint(last.dir);
  await ctx.sync(last.dir);
  const metrics = readMetrics(run.out, last.step);
  writeFileAtomic(file, metrics.map((m) => `${JSON.stringify(m)}\n`).join(''));
  return { start: last.step + 1, metrics };
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

export async function runTraining(ctx: TrainContext, run: TrainRun): Promise<StepMetrics[]> {
  ensureRunDir(run.out);
  const file = metricsPath(run.out);
  const { start, metrics } = await startingPoint(ctx, run);
  const settings = settingsKey(ctx);
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
      await ctx.learner.saveWeights(dir);
      return dir;
    }
    ctx.onPhase?.(step, 'checkpoint');
    const dir = checkpointDir(run.out, step);
    await ctx.learner.saveCheckpoint(dir);
    return dir;
  };
  for (let step = start; step <= o.steps; step++) {
    const m = await runStep(ctx, step, stepQuestions(run.order, step, o.questionsPerStep), saveWeights);
    appendLine(file, m);
    // Complete only once its metrics line is in: a kill before this redoes the step from the previous checkpoint.
    if (existsSync(checkpointDir(run.out, step))) {
      finishCheckpoint(checkpointDir(run.out, step), { step, seed: o.seed, settings });
      pruneCheckpoints(run.out, o.keepCheckpoints);
    }
    metrics.push(m);
    run.onStepDone?.(m, metrics);
  }
  return metrics;
}
