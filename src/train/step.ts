/**
 * One training step (docs/algorithm.md §9): sample the step's questions × n with the current
 * policy and the `full` context policy, score them (§3, §4) and build the advantages (§5) with the
 * pipeline, update the policy on the learner (§6), write the new weights and hand them to the
 * rollout engines, and evaluate on the dev slice when it is time.
 */
import type { BatchRecord, Generator, Learner, Question, Retriever, TargetScorer } from '../contracts';
import { runPipeline, type ProgressSink } from '../pipeline/pipeline';
import { evalReport } from '../pipeline/eval-report';
import type { PipelineOptions } from '../options';
import { mixSeed } from '../rng';
import { timed } from '../util';
import { trainRows, type TrainRow } from './samples';
import { policyUpdate, type UpdateStats } from './update';
import { batchMetrics, evalMetrics, updateMetrics, type StepMetrics } from './metrics';
import type { TrainOptions } from './options';

export type TrainPhase = 'rollout' | 'update' | 'sync' | 'eval' | 'checkpoint';

/**
 * A rollout source of one's own (an agent run through the OpenAI-compatible endpoint,
 * src/agents/collect.ts): step `step`'s batch of `questions`, sampled with the weights the
 * engines hold now (the last `sync`), seeded with `seed` (mixSeed(train.seed, step), as the
 * built-in rollout). Its records train as the pipeline's do (trainRows).
 */
export type RolloutSource = (step: number, questions: readonly Question[], seed: number) => Promise<{ records: BatchRecord[]; wall?: Record<string, number> }>;

export interface TrainContext {
  generator: Generator;
  /** Memory-reward scorer (the current policy); null without memory rewards. */
  scorer: TargetScorer | null;
  retriever: Retriever;
  learner: Learner;
  /** Makes the rollout engines sample and score with the model directory `dir` (docs/learner.md). */
  sync(dir: string): Promise<void>;
  pipeline: PipelineOptions;
  train: TrainOptions;
  /** Evaluation slice (dev questions). */
  dev: readonly Question[];
  onPhase?(step: number, phase: TrainPhase): void;
  /** Progress of the step's rollout. */
  rolloutProgress?: ProgressSink;
  /** The learner's context (LearnerInfo.maxContext): samples are cut to it (trainRows). */
  maxContext?: number | undefined;
  /**
   * The starting weights' model directory (version 0), for an overlapped run resumed within its
   * first steps (src/train/overlap.ts); unknown: such a run samples with the checkpoint's weights.
   */
  baseWeights?: string | undefined;
  /** Where each step's batch comes from instead of the built-in agent loop (runPipeline). */
  rollout?: RolloutSource | undefined;
}

/** The questions of step `step` (1-based): consecutive slices of the seeded order, wrapping around. */
export function stepQuestions(order: readonly Question[], step: number, perStep: number): Question[] {
  const out: Question[] = [];
  for (let i = 0; i < Math.min(perStep, order.length); i++) out.push(order[((step - 1) * perStep + i) % order.length]!);
  return out;
}

/** The memory-policy evaluation (§9): greedy, one sample, no memory rewards. */
export async function evaluate(ctx: TrainContext, step: number): Promise<ReturnType<typeof evalReport>> {
  const p = ctx.pipeline;
  const options: PipelineOptions = {
    ...p,
    rollout: { ...p.rollout, context: 'memory', groupSize: 1, seed: mixSeed(ctx.train.seed, 0xe7a1, step), sampling: { ...p.rollout.sampling, temperature: 0 } },
    memory: { ...p.memory, enabled: false },
  };
  const { records } = await runPipeline({ questions: ctx.dev, generator: ctx.generator, scorer: null, retriever: ctx.retriever, options });
  return evalReport(records);
}

/** A step's sampled batch, before the update: what the rollout engines produced and what the learner will train on. */
export interface StepRollout {
  step: number;
  records: BatchRecord[];
  rows: TrainRow[];
  /** Rollout and scoring wall times (ms). */
  wall: Record<string, number>;
}

/** Samples step `step`'s questions × n with the weights the engines hold now (`full` policy, seed mixSeed(seed, step)), scores them and builds the rows. */
export async function rolloutStep(ctx: TrainContext, step: number, questions: readonly Question[]): Promise<StepRollout> {
  ctx.onPhase?.(step, 'rollout');
  if (ctx.rollout !== undefined) {
    const t0 = performance.now();
    const got = await ctx.rollout(step, questions, mixSeed(ctx.train.seed, step));
    const wall = got.wall ?? { rollout: Math.round(performance.now() - t0) };
    return { step, records: got.records, rows: trainRows(got.records, ctx.maxContext), wall };
  }
  const options: PipelineOptions = { ...ctx.pipeline, rollout: { ...ctx.pipeline.rollout, context: 'full', seed: mixSeed(ctx.train.seed, step) } };
  const run = await runPipeline({ questions, generator: ctx.generator, scorer: ctx.scorer, retriever: ctx.retriever, options, progress: ctx.rolloutProgress });
  const times = run.stats.times;
  const wall = { rollout: Math.round(times.generateMs + times.toolMs), scoring: Math.round(times.scoreMs + times.advantageMs) };
  return { step, records: run.records, rows: trainRows(run.records, ctx.maxContext), wall };
}

/** The policy update on a step's rows (none: no update); its learner times go into `wall`. */
export async function updateStep(ctx: TrainContext, r: StepRollout, wall: Record<string, number>): Promise<UpdateStats | null> {
  ctx.onPhase?.(r.step, 'update');
  const u = r.rows.length === 0 ? null : await policyUpdate(ctx.learner, r.rows, ctx.train, mixSeed(ctx.train.seed, 0x0b5e, r.step));
  if (u !== null) {
    wall['learnerForward'] = Math.round(u.ms.oldLogp + u.ms.refLogp + u.ms.forward);
    wall['learnerBackward'] = Math.round(u.ms.backward);
    wall['loss'] = Math.round(u.ms.loss);
    wall['optimiser'] = Math.round(u.ms.optim);
  }
  return u;
}

/** Whether step `step`'s weights are evaluated (every `evalEvery` steps, with a dev slice). */
export function evalDue(ctx: TrainContext, step: number): boolean {
  return ctx.train.evalEvery > 0 && step % ctx.train.evalEvery === 0 && ctx.dev.length > 0;
}

/** A step's metrics line from its batch, its update and its evaluation. */
export function stepMetrics(ctx: TrainContext, r: StepRollout, u: UpdateStats | null, ev: ReturnType<typeof evalReport> | null, wall: Record<string, number>): StepMetrics {
  const b = batchMetrics(r.records);
  return {
    step: r.step,
    questions: b.questions,
    trajectories: b.trajectories,
    trained: r.rows.length,
    meanScore: b.meanScore,
    em: b.em,
    formatValidRate: b.formatValidRate,
    memoryReward: b.memoryReward,
    pFull: b.pFull,
    pMem: b.pMem,
    outcomeAdvantage: b.outcomeAdvantage,
    memoryAdvantage: b.memoryAdvantage,
    ...updateMetrics(u),
    lr: ctx.train.optim.lr,
    tokens: { generated: b.generated, trained: u?.tokens ?? 0 },
    wallMs: Object.fromEntries(Object.entries(wall).map(([k, v]) => [k, Math.round(v)])),
    eval: evalMetrics(ev),
  };
}

/**
 * Runs step `step` one phase after another (`asyncLevel` 0) and returns its metrics.
 * `saveWeights(step)` has the learner write the new weights (a checkpoint, or weights/) and
 * returns the directory the engines then load.
 */
export async function runStep(ctx: TrainContext, step: number, questions: readonly Question[], saveWeights: (step: number) => Promise<string>): Promise<StepMetrics> {
  const t0 = performance.now();
  const r = await rolloutStep(ctx, step, questions);
  const wall: Record<string, number> = { ...r.wall };
  const u = await updateStep(ctx, r, wall);
  ctx.onPhase?.(step, 'sync');
  const dir = await timed(wall, 'save', () => saveWeights(step));
  await timed(wall, 'sync', () => ctx.sync(dir));

  let ev = null;
  if (evalDue(ctx, step)) {
    ctx.onPhase?.(step, 'eval');
    ev = await timed(wall, 'eval', () => evaluate(ctx, step));
  }
  wall['total'] = performance.now() - t0;
  return stepMetrics(ctx, r, u, ev, wall);
}
