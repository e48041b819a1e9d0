/**
 * The 'continuous' schedule of the pipeline (pipeline.ts, docs/rollout.md "Schedules"): groups
 * taken up in question order while the engine has room, scored as soon as they finish while
 * generation goes on, delivered batch by batch in batch order.
 */
import { ContinuousLoop, type AgentLoopHooks, type RolloutTrajectory } from './rollout';
import { toBatchRecord } from './batch';
import { scoreBatch } from './batch-scoring';
import { addScoringStats, checkBackendAlive, copyStats, type PipelineBatch, type PipelineInput, type PipelineStats, type ProgressSink } from './run-stats';
import type { Question, ScoredTrajectory } from '../contracts';
import type { PipelineOptions } from '../options';

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
export async function* continuousBatches(
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
