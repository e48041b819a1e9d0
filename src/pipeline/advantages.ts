/**
 * Advantages of one batch (docs/algorithm.md §5) through the kernel API on padded B × T arrays:
 * the GRPO outcome advantage per group, the memory advantage written on each snapshot's mem
 * span, and the final advantage outcome + α · memory, less `formatPenalty` on the tokens of the
 * round that broke the format. Excluded trajectories take no part (their group is normalised over
 * the remaining samples) and keep zero advantages.
 */
import { maxOf } from '../util';
import { mempoAdvantages } from '../kernels/mempo-advantages';
import type { ScoredTrajectory, Snapshot } from '../contracts';
import type { AdvantageOptions } from '../options';

/** Writes the outcome, memory and final advantages of every non-excluded trajectory, in one kernel call. */
export function computeAdvantages(scored: readonly ScoredTrajectory[], snapshots: readonly Snapshot[], adv: AdvantageOptions): void {
  const kept = scored.map((s, i) => ({ s, i })).filter(({ s }) => !s.excluded);
  const B = kept.length;
  if (B === 0) return;
  const T = maxOf(1, kept.map(({ s }) => s.trajectory.responseIds.length));
  const mask = new Uint8Array(B * T);
  kept.forEach(({ s }, b) => mask.set(s.trajectory.responseMask, b * T));
  const rowOf = new Map<number, number>();
  kept.forEach(({ i }, b) => rowOf.set(i, b));
  // The snapshots of kept rows only; spans address rows among the kept.
  const memSnaps = snapshots.filter((s) => rowOf.has(s.row));
  const { outcome, memory, final } = mempoAdvantages({
    scores: kept.map(({ s }) => s.score!),
    groups: kept.map(({ s }) => s.trajectory.uid),
    responseMask: mask,
    seqLen: T,
    memRewards: memSnaps.map((s) => scored[s.row]!.roundRewards[s.round - 1]!.memReward),
    memGroups: memSnaps.map((s) => s.trajectory.uid),
    spans: Int32Array.from(memSnaps.flatMap((s) => [rowOf.get(s.row)!, s.span[0], s.span[1]])),
    eps: adv.eps,
    normByStd: adv.normByStd,
    memGrouping: adv.memGrouping,
    rounds: Int32Array.from(memSnaps.map((s) => s.round)),
    alpha: adv.alpha,
  });
  kept.forEach(({ s }, b) => {
    const n = s.trajectory.responseIds.length;
    s.outcomeAdvantage = outcome.slice(b * T, b * T + n);
    s.memoryAdvantage = memory.slice(b * T, b * T + n);
    s.advantages = final.slice(b * T, b * T + n);
    penaliseBrokenRound(s, adv.formatPenalty);
  });
}

/**
 * −penalty on the generated tokens of the round the format check failed in (docs/algorithm.md §5):
 * the rounds before it (a search, a page read) are not what broke. A round the response budget cut
 * is not the model's break (its last tag is left open by the cut) and is not penalised.
 */
function penaliseBrokenRound(s: ScoredTrajectory, penalty: number): void {
  const t = s.trajectory;
  if (!(penalty > 0) || s.formatRound === null || t.rounds.length === 0) return;
  // Round 0 (no round parsed) is the first; a round past the last ("text after the answer round") the last.
  const index = Math.min(Math.max(s.formatRound, 1), t.rounds.length);
  if (t.doneReason === 'response-budget' && index === t.rounds.length) return;
  const round = t.rounds[index - 1]!;
  for (let p = round.start; p < round.end; p++) if (t.responseMask[p] === 1) s.advantages[p]! -= penalty;
}
