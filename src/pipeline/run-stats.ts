/**
 * What a pipeline run takes and reports (pipeline.ts, continuous.ts): its input, progress hooks,
 * per-stage times and counts, and the helpers both schedules add their counts with.
 */
import type { AgentLoopStats } from './rollout';
import type { BatchScoringStats } from './batch-scoring';
import type { BatchRecord, Generator, Question, Retriever, TargetScorer, Trajectory } from '../contracts';
import type { PipelineOptions, PipelineOptionsInput } from '../options';
import { MempoError } from '../errors';

export interface ProgressSink {
  /** Called once before work starts. */
  onPlan?(plan: { questions: number; trajectories: number; batches: number; skippedQuestions: number }): void;
  onRound?(): void;
  onTrajectoryDone?(): void;
  onQuestionDone?(uid: string): void;
  /** Called before and after a batch's scorer call (under the 'continuous' schedule: after, once all its groups are scored). */
  onScoring?(event: { batch: number; items: number; done: boolean }): void;
}

export interface PipelineInput {
  questions: readonly Question[] | readonly unknown[];
  generator: Generator;
  /** Memory-reward scorer; null disables memory rewards. */
  scorer: TargetScorer | null;
  retriever: Retriever;
  options?: PipelineOptionsInput | PipelineOptions;
  /** Groups already complete (resume): their questions' batches are skipped when whole, their records never re-emitted. */
  skipUids?: ReadonlySet<string>;
  /** Receives each batch's records as soon as the batch is scored (write them out here). */
  onBatch?(records: BatchRecord[], batchIndex: number): void | Promise<void>;
  progress?: ProgressSink;
}

export interface StageTimes {
  generateMs: number;
  toolMs: number;
  scoreMs: number;
  advantageMs: number;
  writeMs: number;
  /** Time the rollout stood still waiting for the scorer (the whole scoring under the 'batch' schedule). */
  scoreWaitMs: number;
  totalMs: number;
}

export interface PipelineStats extends Omit<AgentLoopStats, 'generateMs' | 'toolMs'> {
  batches: number;
  skippedBatches: number;
  snapshots: number;
  scoredItems: number;
  scorerCalls: number;
  times: StageTimes;
}

export interface PipelineResult {
  records: BatchRecord[];
  stats: PipelineStats;
  options: PipelineOptions;
}

/** One batch of `pipelineBatches`: its records, as `onBatch` receives them, and the run's totals so far. */
export interface PipelineBatch {
  /** Index of the batch among the run's question batches (`rollout.questionsPerBatch` questions each). */
  batchIndex: number;
  records: BatchRecord[];
  /** The run's stats up to and including this batch (a copy; `times.totalMs` is the time since the start). */
  stats: PipelineStats;
}

export function addLoopStats(stats: PipelineStats, ls: AgentLoopStats): void {
  for (const k of ['steps', 'rounds', 'generatedTokens', 'observationTokens', 'searches', 'accesses', 'pagesOpened', 'toolErrors', 'backendErrors'] as const) stats[k] += ls[k];
  stats.times.generateMs += ls.generateMs;
  stats.times.toolMs += ls.toolMs;
}

export function addScoringStats(stats: PipelineStats, ss: BatchScoringStats): void {
  stats.snapshots += ss.snapshots;
  stats.scoredItems += ss.scoredItems;
  stats.scorerCalls += ss.scorerCalls;
  stats.backendErrors += ss.backendErrors;
  stats.times.scoreMs += ss.scoreMs;
  stats.times.advantageMs += ss.advantageMs;
}

/** Stops the run when every trajectory of batch b failed on the inference server. */
export function checkBackendAlive(trajectories: readonly Trajectory[], b: number, batches: number): void {
  if (trajectories.length === 0 || !trajectories.every((t) => t.doneReason === 'backend-error')) return;
  throw new MempoError(
    'ERR_BACKEND',
    `batch ${b + 1} of ${batches}: all ${trajectories.length} trajectories failed on the inference server, so the run stops ` +
      `(${b === 0 ? 'no batch was finished' : 'the batches before it were delivered'}; a resumed run redoes this one); first error: ${trajectories[0]!.error}`,
  );
}

export function copyStats(stats: PipelineStats, t0: number): PipelineStats {
  return { ...stats, times: { ...stats.times, totalMs: performance.now() - t0 } };
}
