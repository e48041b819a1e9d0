/**
 * Scoring of a batch's snapshots (docs/algorithm.md §4): the 2M items, every snapshot's full
 * context first, then every memory context, against its answer target, in ONE `TargetScorer`
 * call. Items that fail for good on an inference server (`PartialResultsError`) fail only their
 * trajectory; any other scorer error stops the run.
 */
import { PartialResultsError, type ScoringItem, type ScoringTag, type Snapshot, type TargetScorer } from '../contracts';

export interface SnapshotScores {
  /** The snapshots of trajectories none of whose items failed, in batch order. */
  kept: Snapshot[];
  /** Per kept snapshot, log π(target_t | …) under its full context and under its memory context. */
  full: Float32Array[];
  memory: Float32Array[];
  /** Batch row → the error of its first failed item. */
  failedRows: Map<number, string>;
  /** Items sent (2M). */
  items: number;
}

const tag = (s: Snapshot, context: ScoringTag['context']): ScoringTag => ({ uid: s.trajectory.uid, sample: s.trajectory.sample, round: s.round, context });

/** The 2M scoring items: M full contexts, then M memory contexts. */
export function scoringItems(snapshots: readonly Snapshot[]): ScoringItem[] {
  return [
    ...snapshots.map((s) => ({ contextIds: s.fullContext, targetIds: s.targetIds, tag: tag(s, 'full') })),
    ...snapshots.map((s) => ({ contextIds: s.memContext, targetIds: s.targetIds, tag: tag(s, 'memory') })),
  ];
}

/** The scorer's results in item order, undefined (with its error in `failures`) where an item failed for good. */
async function scoreAll(scorer: TargetScorer, items: ScoringItem[]): Promise<{ logps: ReadonlyArray<Float32Array | undefined>; failures: ReadonlyMap<number, string> }> {
  try {
    return { logps: await scorer.score(items), failures: new Map() };
  } catch (err) {
    // Some items failed for good on the server: only their trajectories fail.
    if (!(err instanceof PartialResultsError) || err.results.length !== items.length) throw err;
    return { logps: err.results as ReadonlyArray<Float32Array | undefined>, failures: err.failures };
  }
}

export async function scoreSnapshots(snapshots: readonly Snapshot[], scorer: TargetScorer): Promise<SnapshotScores> {
  const items = scoringItems(snapshots);
  const { logps, failures } = await scoreAll(scorer, items);
  if (logps.length !== items.length) throw new Error(`The scorer returned ${logps.length} results for ${items.length} items`);
  const M = snapshots.length;
  const failedRows = new Map<number, string>();
  for (let i = 0; i < items.length; i++) {
    const s = snapshots[i % M]!;
    if (failedRows.has(s.row) || (logps[i] !== undefined && !failures.has(i))) continue;
    failedRows.set(s.row, failures.get(i) ?? `the scorer returned no result for item ${i}`);
  }
  const keep = snapshots.map((s, i) => ({ s, i })).filter(({ s }) => !failedRows.has(s.row));
  const checked = (k: number, s: Snapshot): Float32Array => {
    const lp = logps[k]!;
    if (lp.length !== s.targetIds.length) throw new Error(`The scorer returned ${lp.length} log-probs for item ${k} with ${s.targetIds.length} target tokens`);
    return lp;
  };
  const full = keep.map(({ s, i }) => checked(i, s));
  const memory = keep.map(({ s, i }) => checked(M + i, s));
  return { kept: keep.map(({ s }) => s), full, memory, failedRows, items: items.length };
}
