/**
 * Advantages of one batch (docs/algorithm.md §5) through the kernel API on padded B × T arrays:
 * the GRPO outcome advantage per group, the memory advantage written on each snapshot's mem
 * span, and the final advantage outcome + α · memory. Excluded trajectories take no part (their
 * group is normalised over the remaining samples) and keep zero advantages.
 */
import { maxOf } from '../util';
import { finalAdvantage } from '../kernels/final-advantage';
import { grpoOutcomeAdvantage } from '../kernels/outcome-advantage';
import { memoryAdvantage } from '../kernels/memory-advantage';
import type { ScoredTrajectory, Snapshot } from '../contracts';
import type { AdvantageOptions } from '../options';

/** Memory advantages (B × T) of the snapshots of kept rows; `rowOf` maps a batch row to its row among the kept. */
function memoryAdvantages(scored: readonly ScoredTrajectory[], snapshots: readonly Snapshot[], rowOf: ReadonlyMap<number, number>, B: number, T: number, adv: AdvantageOptions): Float32Array {
  const memSnaps = snapshots.filter((s) => rowOf.has(s.row));
  if (memSnaps.length === 0) return new Float32Array(B * T);
  return memoryAdvantage(
    memSnaps.map((s) => scored[s.row]!.roundRewards[s.round - 1]!.memReward),
    memSnaps.map((s) => s.trajectory.uid),
    Int32Array.from(memSnaps.flatMap((s) => [rowOf.get(s.row)!, s.span[0], s.span[1]])),
    B,
    T,
    { eps: adv.eps, normByStd: adv.normByStd, memGrouping: adv.memGrouping, rounds: Int32Array.from(memSnaps.map((s) => s.round)) },
  );
}

/** Writes the outcome, memory and final advantages of every non-excluded trajectory. */
export function computeAdvantages(scored: readonly ScoredTrajectory[], snapshots: readonly Snapshot[], adv: AdvantageOptions): void {
  const kept = scored.map((s, i) => ({ s, i })).filter(({ s }) => !s.excluded);
  const B = kept.length;
  if (B === 0) return;
  const T = maxOf(1, kept.map(({ s }) => s.trajectory.responseIds.length));
  const mask = new Uint8Array(B * T);
  kept.forEach(({ s }, b) => mask.set(s.trajectory.responseMask, b * T));
  const outcome = grpoOutcomeAdvantage(kept.map(({ s }) => s.score!), kept.map(({ s }) => s.trajectory.uid), mask, T, { eps: adv.eps, normByStd: adv.normByStd });
  const rowOf = new Map<number, number>();
  kept.forEach(({ i }, b) => rowOf.set(i, b));
  const memory = memoryAdvantages(scored, snapshots, rowOf, B, T, adv);
  const final = finalAdvantage(outcome, memory, mask, { alpha: adv.alpha });
  kept.forEach(({ s }, b) => {
    const n = s.trajectory.responseIds.length;
    s.outcomeAdvantage = outcome.slice(b * T, b * T + n);
    s.memoryAdvantage = memory.slice(b * T, b * T + n);
    s.advantages = final.slice(b * T, b * T + n);
  });
}
