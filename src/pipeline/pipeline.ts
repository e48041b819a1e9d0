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
import { ContinuousLoop, runAgentLoop, type AgentLoopHooks, type AgentLoopStats, type RolloutTrajectory } from './rollout';
import { toBatchRecord } from './batch';
import { outcomeReward } from './outcome-reward';
import { buildSnapshots } from './snapshots';
import { scoreSnapshots } from './snapshot-scoring';
import { snapshotMemoryRewards } from './memory-reward';
import { computeAdvantages } from './advantages';
import type { BatchRecord, Generator, Question, Retriever, ScoredTrajectory, Snapshot, TargetScorer, TextCodec, Trajectory } from '../contracts';
import { resolveOptions, type PipelineOptions, type PipelineOptionsInput } from '../options';
import { checkQuestions } from '../io/questions';
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

/** What scoring one batch did and how long it took. */
export interface BatchScoringStats {
  snapshots: number;
  scoredItems: number;
  scorerCalls: number;
  /** Trajectories excluded because one of their scoring items failed on the scorer. */
  backendErrors: number;
  scoreMs: number;
  advantageMs: number;
}

/** A trajectory with a failed scoring item is recorded as failed (that item's error) and excluded. */
function failTrajectories(failedRows: ReadonlyMap<number, string>, trajectories: readonly Trajectory[], scored: ScoredTrajectory[]): void {
  for (const [row, error] of failedRows) {
    const t = trajectories[row]!;
    t.state = 'error';
    t.doneReason = 'backend-error';
    t.error = error;
    scored[row]!.excluded = true;
    scored[row]!.score = null;
  }
}

/**
 * Scores one batch (trajectories of whole groups): outcome rewards, memory rewards (one scorer
 * call for all 2M items of the snapshots) and advantages.
 */
export async function scoreBatch(
  trajectories: readonly Trajectory[],
  codec: TextCodec,
  scorer: TargetScorer | null,
  options: PipelineOptions,
): Promise<{ scored: ScoredTrajectory[]; snapshots: Snapshot[]; stats: BatchScoringStats }> {
  const stats: BatchScoringStats = { snapshots: 0, scoredItems: 0, scorerCalls: 0, backendErrors: 0, scoreMs: 0, advantageMs: 0 };
  const scored = trajectories.map((t) => outcomeReward(t, codec, options));
  let snapshots = options.memory.enabled && scorer !== null ? buildSnapshots(trajectories, codec, options) : [];
  stats.snapshots = snapshots.length;
  if (snapshots.length > 0) {
    const t0 = performance.now();
    const res = await scoreSnapshots(snapshots, scorer!);
    stats.scorerCalls = 1;
    stats.scoredItems = res.items;
    failTrajectories(res.failedRows, trajectories, scored);
    stats.backendErrors = res.failedRows.size;
    snapshots = res.kept;
    snapshotMemoryRewards(snapshots, res.full, res.memory, options.memory).forEach((rr, i) => {
      const s = snapshots[i]!;
      scored[s.row]!.roundRewards[s.round - 1] = rr;
    });
    stats.scoreMs = performance.now() - t0;
  }
  const t1 = performance.now();
  computeAdvantages(scored, snapshots, options.advantage);
  stats.advantageMs = performance.now() - t1;
  return { scored, snapshots, stats };
}

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

function addLoopStats(stats: PipelineStats, ls: AgentLoopStats): void {
  for (const k of ['steps', 'rounds', 'generatedTokens', 'observationTokens', 'searches', 'accesses', 'pagesOpened', 'toolErrors', 'backendErrors'] as const) stats[k] += ls[k];
  stats.times.generateMs += ls.generateMs;
  stats.times.toolMs += ls.toolMs;
}

function addScoringStats(stats: PipelineStats, ss: BatchScoringStats): void {
  stats.snapshots += ss.snapshots;
  stats.scoredItems += ss.scoredItems;
  stats.scorerCalls += ss.scorerCalls;
  stats.backendErrors += ss.backendErrors;
  stats.times.scoreMs += ss.scoreMs;
  stats.times.advantageMs += ss.advantageMs;
}

/** Stops the run when every trajectory of batch b failed on the inference server. */
function checkBackendAlive(trajectories: readonly Trajectory[], b: number, batches: number): void {
  if (trajectories.length === 0 || !trajectories.every((t) => t.doneReason === 'backend-error')) return;
  throw new MempoError(
    'ERR_BACKEND',
    `batch ${b + 1} of ${batches}: all ${trajectories.length} trajectories failed on the inference server, so the run stops ` +
      `(${b === 0 ? 'no batch was finished' : 'the batches before it were delivered'}; a resumed run redoes this one); first error: ${trajectories[0]!.error}`,
  );
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

/** One batch of `pipelineBatches`: its records, as `onBatch` receives them, and the run's totals so far. */
export interface PipelineBatch {
  /** Index of the batch among the run's question batches (`rollout.questionsPerBatch` questions each). */
  batchIndex: number;
  records: BatchRecord[];
  /** The run's stats up to and including this batch (a copy; `times.totalMs` is the time since the start). */
  stats: PipelineStats;
}

function copyStats(stats: PipelineStats, t0: number): PipelineStats {
  return { ...stats, times: { ...stats.times, totalMs: performance.now() - t0 } };
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

/** Progress hooks of the continuous schedule: every trajectory it runs is fresh. */
function continuousHooks(n: number, progress: ProgressSink | undefined): AgentLoopHooks {
  const left = new Map<string, number>();
  return {
    onRound: () => progress?.onRound?.(),
    onDone: (t) => {
      progress?.onTrajectoryDone?.();
      const k = (left.get(t.uid) ?? n) - 1;
      left.set(t.uid, k);
      if (k === 0) progress?.onQuestionDone?.(t.uid);
    },
  };
}

/** A group's scored trajectories and its scoring items, once its scorer call is back. */
interface ScoredGroup {
  scored: ScoredTrajectory[];
  items: number;
}

/**
 * The scorer side of the continuous schedule: groups queue as they finish; one scorer call at a
 * time takes every group queued so far (one call for their 2M items, fewer and fuller forward
 * passes than one call per group), while the rollout goes on. On a local model the scorer's
 * forward passes and the generator's share the one session: they interleave at each pass.
 */
class GroupScoring {
  readonly done = new Map<string, ScoredGroup>();
  private readonly queue: Array<{ uid: string; trajectories: RolloutTrajectory[] }> = [];
  private running: Promise<void> | null = null;
  private failure: { err: unknown } | null = null;

  constructor(private readonly input: PipelineInput, private readonly options: PipelineOptions, private readonly stats: PipelineStats) {}

  add(groups: ReadonlyArray<{ uid: string; trajectories: RolloutTrajectory[] }>): void {
    this.queue.push(...groups);
    this.start();
  }

  /** A scorer call's error, rethrown where the run can stop. */
  check(): void {
    if (this.failure !== null) throw this.failure.err;
  }

  get busy(): boolean {
    return this.running !== null;
  }

  /** Waits for the scorer call in flight (after which queued groups are in the next). */
  async settle(): Promise<void> {
    if (this.running !== null) await this.running;
    this.check();
  }

  private start(): void {
    if (this.running !== null || this.queue.length === 0 || this.failure !== null) return;
    const groups = this.queue.splice(0);
    const trajectories = groups.flatMap((g) => g.trajectories);
    this.running = scoreBatch(trajectories, this.input.generator.codec, this.input.scorer, this.options).then(
      ({ scored, snapshots, stats: ss }) => {
        addScoringStats(this.stats, ss);
        const items = new Map<string, number>();
        for (const sn of snapshots) items.set(sn.trajectory.uid, (items.get(sn.trajectory.uid) ?? 0) + 2);
        let row = 0;
        for (const g of groups) {
          this.done.set(g.uid, { scored: scored.slice(row, row + g.trajectories.length), items: items.get(g.uid) ?? 0 });
          row += g.trajectories.length;
        }
      },
      (err: unknown) => { this.failure = { err }; },
    ).finally(() => {
      this.running = null;
      this.start();
    });
  }
}

/**
 * The 'continuous' schedule: groups admitted in question order while the engine has room, one
 * round of every live trajectory per step, each finished group handed to the scorer at once;
 * batch b is delivered when all its groups are scored (and the batches before it delivered).
 * Groups of skipped questions (resume) are not generated.
 */
async function* continuousBatches(
  input: PipelineInput,
  options: PipelineOptions,
  batches: readonly Question[][],
  stats: PipelineStats,
  t0: number,
): AsyncGenerator<PipelineBatch, void, undefined> {
  const skip = input.skipUids ?? new Set<string>();
  const n = options.rollout.groupSize;
  const width = options.rollout.maxInFlight ?? options.rollout.maxGenerateBatch;
  const loop = new ContinuousLoop({ generator: input.generator, retriever: input.retriever, options, hooks: continuousHooks(n, input.progress) });
  const queue = batches.flatMap((qs, b) => qs.map((q, slot) => ({ q, b, slot }))).filter((g) => !skip.has(g.q.id));
  const scoring = new GroupScoring(input, options, stats);
  let next = 0;
  try {
    for (let b = 0; b < batches.length; b++) {
      const fresh = batches[b]!.filter((q) => !skip.has(q.id));
      if (fresh.length === 0) {
        stats.skippedBatches++;
        continue;
      }
      while (!fresh.every((q) => scoring.done.has(q.id))) {
        scoring.check();
        // Whole groups while they fit under the engine's width (one at least when it is idle).
        while (next < queue.length && (loop.live === 0 || loop.live + n <= width)) {
          const g = queue[next++]!;
          loop.admit(g.q, g.b, g.slot);
        }
        if (loop.live > 0) {
          scoring.add(await loop.next());
        } else {
          if (!scoring.busy) throw new Error(`internal: batch ${b + 1} has groups neither in flight nor being scored`);
          const tw = performance.now();
          await scoring.settle();
          stats.times.scoreWaitMs += performance.now() - tw;
        }
        const { generateMs, toolMs, ...counts } = loop.stats;
        Object.assign(stats, counts);
        stats.times.generateMs = generateMs;
        stats.times.toolMs = toolMs;
      }
      const scored = fresh.flatMap((q) => scoring.done.get(q.id)!.scored);
      stats.batches++;
      checkBackendAlive(scored.map((s) => s.trajectory), b, batches.length);
      input.progress?.onScoring?.({ batch: b, items: fresh.reduce((a, q) => a + scoring.done.get(q.id)!.items, 0), done: true });
      for (const q of fresh) scoring.done.delete(q.id);
      const out = scored.map((s) => toBatchRecord(s, options.memory.memSpan));
      const tw = performance.now();
      if (input.onBatch) await input.onBatch(out, b);
      stats.times.writeMs += performance.now() - tw;
      yield { batchIndex: b, records: out, stats: copyStats(stats, t0) };
    }
  } finally {
    // A loop that stops early leaves no scorer call running behind it.
    await scoring.settle().catch(() => undefined);
  }
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
