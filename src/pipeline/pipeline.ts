/**
 * The MemPO pipeline (docs/algorithm.md §1-§8) as a library, wiring one module per step:
 * questions → rollout (rollout.ts: groups of multi-turn search trajectories) → outcome reward
 * (outcome-reward.ts) → snapshots (snapshots.ts) → snapshot scoring (snapshot-scoring.ts) →
 * memory reward (memory-reward.ts) → advantages (advantages.ts) → `BatchRecord`s for a trainer
 * (batch.ts), batch by batch to `onBatch` or as the async iterator `pipelineBatches`. Records
 * are delivered in batches of `rollout.questionsPerBatch` questions, in batch order, under both
 * schedules (`rollout.schedule`):
 * - 'batch': every group of a batch in flight together, one scorer call per batch, the next batch
 *   started once the batch is scored; a batch depends only on the options, its questions and the
 *   seed, so the same seed reproduces it and a resumed run regenerates an interrupted batch exactly.
 * - 'continuous': groups are taken up in question order whenever fewer than
 *   `rollout.maxGenerateBatch` trajectories are in flight, whatever their batch, and scored as
 *   soon as they are done, in one scorer call with the other groups done meanwhile, while
 *   generation goes on. Each request samples from its own seed (batch, question, sample, round),
 *   so the same seed and options reproduce the run; the engine's logits depend on the padding
 *   its batch-mates give a sequence, so it is not byte-identical to 'batch', and a resumed run
 *   (whose groups share forward passes with other groups than before) is a valid continuation,
 *   not the uninterrupted run's bytes (docs/rollout.md, "Schedules").
 *
 * A generation request or scoring item that fails for good on an inference server (the
 * generator / scorer throws `PartialResultsError`) fails only its trajectory ('backend-error',
 * excluded like a tool failure). A batch in which every trajectory failed that way stops the run
 * (`ERR_BACKEND`) before its records are delivered: the servers are down or misconfigured, and a
 * resumed run redoes that batch.
 */
import { runAgentLoop, type AgentLoopHooks } from './rollout';
import { toBatchRecord } from './batch';
import { scoreBatch } from './batch-scoring';
import { continuousBatches } from './continuous';
import { addLoopStats, addScoringStats, checkBackendAlive, copyStats, type PipelineBatch, type PipelineInput, type PipelineResult, type PipelineStats, type ProgressSink } from './run-stats';
import type { BatchRecord, Question } from '../contracts';
import { resolveOptions, type PipelineOptions } from '../options';
import { checkQuestions } from '../io/questions';

export { scoreBatch, type BatchScoringStats } from './batch-scoring';
export type { PipelineBatch, PipelineInput, PipelineResult, PipelineStats, ProgressSink, StageTimes } from './run-stats';

/** Splits the question list into the pipeline's fixed batches. */
export function questionBatches<T>(questions: readonly T[], perBatch: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < questions.length; i += perBatch) out.push(questions.slice(i, i + perBatch));
  return out;
}

/** Progress hooks of one batch's loop: only questions not skipped (resume) are reported. */
function progressHooks(qs: readonly Question[], fresh: ReadonlySet<string>, n: number, progress: ProgressSink | undefined): AgentLoopHooks {
  const left = new Map(qs.map((q) => [q.id, n]));
  return {
    onRound: (t) => { if (fresh.has(t.uid)) progress?.onRound?.(); },
    onDone: (t) => {
      if (!fresh.has(t.uid)) return;
      progress?.onTrajectoryDone?.();
      const k = left.get(t.uid)! - 1;
      left.set(t.uid, k);
      if (k === 0) progress?.onQuestionDone?.(t.uid);
    },
  };
}

/** One batch: rollout, scoring, then its records (of questions not skipped) delivered to `onBatch`. */
async function runBatch(input: PipelineInput, options: PipelineOptions, batches: readonly Question[][], b: number, stats: PipelineStats): Promise<BatchRecord[]> {
  const qs = batches[b]!;
  const skip = input.skipUids ?? new Set<string>();
  const progress = input.progress;
  const fresh = new Set(qs.filter((q) => !skip.has(q.id)).map((q) => q.id));
  const { trajectories, stats: ls } = await runAgentLoop({
    questions: qs,
    generator: input.generator,
    retriever: input.retriever,
    options,
    batchIndex: b,
    hooks: progressHooks(qs, fresh, options.rollout.groupSize, progress),
  });
  stats.batches++;
  addLoopStats(stats, ls);

  progress?.onScoring?.({ batch: b, items: 0, done: false });
  const ts = performance.now();
  const { scored, stats: ss } = await scoreBatch(trajectories, input.generator.codec, input.scorer, options);
  stats.times.scoreWaitMs += performance.now() - ts;
  addScoringStats(stats, ss);

  checkBackendAlive(trajectories, b, batches.length);
  // Reported as scored only once the run goes on with it (a batch that stops the run is not).
  progress?.onScoring?.({ batch: b, items: ss.scoredItems, done: true });
  const out = scored.filter((s) => fresh.has(s.trajectory.uid)).map((s) => toBatchRecord(s, options.memory.memSpan));
  const tw = performance.now();
  if (input.onBatch) await input.onBatch(out, b);
  stats.times.writeMs += performance.now() - tw;
  return out;
}

/**
 * The pipeline as an async iterator, beside `onBatch`: `for await (const { records } of
 * pipelineBatches(input))` yields each batch's records once the batch is scored, in the order
 * `runPipeline` returns them (`onBatch`, when given, is called first). A batch starts only when
 * the loop asks for it, so a loop that breaks or throws leaves nothing running: the batch after
 * it is never started (under the 'continuous' schedule groups of later batches may be under way
 * when a batch is yielded; they wait while the loop body runs, and a loop that stops waits for a
 * scorer call already started). The generator's return value (what `next()` gives with `done: true`) is
 * the run's stats and options.
 */
export async function* pipelineBatches(input: PipelineInput): AsyncGenerator<PipelineBatch, Omit<PipelineResult, 'records'>, undefined> {
  const options = resolveOptions(input.options ?? {});
  const questions = checkQuestions(input.questions as unknown[]);
  const skip = input.skipUids ?? new Set<string>();
  const batches = questionBatches(questions, options.rollout.questionsPerBatch);
  const n = options.rollout.groupSize;
  const skipped = questions.filter((q) => skip.has(q.id)).length;
  input.progress?.onPlan?.({ questions: questions.length - skipped, trajectories: (questions.length - skipped) * n, batches: batches.filter((qs) => !qs.every((q) => skip.has(q.id))).length, skippedQuestions: skipped });

  const stats: PipelineStats = {
    steps: 0, rounds: 0, generatedTokens: 0, observationTokens: 0, searches: 0, accesses: 0, pagesOpened: 0, toolErrors: 0, backendErrors: 0,
    batches: 0, skippedBatches: 0, snapshots: 0, scoredItems: 0, scorerCalls: 0,
    times: { generateMs: 0, toolMs: 0, scoreMs: 0, advantageMs: 0, writeMs: 0, scoreWaitMs: 0, totalMs: 0 },
  };
  const t0 = performance.now();
  if (options.rollout.schedule === 'continuous') {
    yield* continuousBatches(input, options, batches, stats, t0);
    return { stats: copyStats(stats, t0), options };
  }
  for (let b = 0; b < batches.length; b++) {
    if (batches[b]!.every((q) => skip.has(q.id))) {
      stats.skippedBatches++;
      continue;
    }
    const records = await runBatch(input, options, batches, b, stats);
    yield { batchIndex: b, records, stats: copyStats(stats, t0) };
  }
  return { stats: copyStats(stats, t0), options };
}

export async function runPipeline(input: PipelineInput): Promise<PipelineResult> {
  const records: BatchRecord[] = [];
  const run = pipelineBatches(input);
  for (;;) {
    const next = await run.next();
    if (next.done) return { records, ...next.value };
    for (const r of next.value.records) records.push(r);
  }
}
