/**
 * Scoring one batch of finished trajectories (docs/algorithm.md §3-§7): outcome rewards, the
 * snapshots' 2M scorer items in one call, memory rewards, then advantages. Both schedules of
 * pipeline.ts score through it; a failed scoring item fails only its trajectory.
 */
import { outcomeReward } from './outcome-reward';
import { buildSnapshots } from './snapshots';
import { scoreSnapshots } from './snapshot-scoring';
import { snapshotMemoryRewards } from './memory-reward';
import { computeAdvantages } from './advantages';
import type { ScoredTrajectory, Snapshot, TargetScorer, TextCodec, Trajectory } from '../contracts';
import type { PipelineOptions } from '../options';

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
