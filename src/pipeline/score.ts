/**
 * Scoring of finished trajectories: outcome reward (SPEC §3), per-round snapshots (SPEC §2),
 * memory rewards with all 2M items of a batch in ONE scorer call (SPEC §4), and the outcome,
 * memory and final advantages through the kernel API (SPEC §5). Trajectories that hit a tool
 * failure, or whose generation request or scoring item failed on the inference server, are
 * excluded: their group is normalised over the remaining samples.
 */
import { maxOf } from '../util';
import { EOS_TOKEN, IM_END, IM_START } from '../protocol/tags';
import { finalAdvantage } from '../kernels/final-advantage';
import { grpoOutcomeAdvantage } from '../kernels/outcome-advantage';
import { memoryAdvantage } from '../kernels/memory-advantage';
import { computeScore, validateFormat } from '../kernels/outcome-reward';
import { memoryRewards } from '../kernels/answer-probability';
import type { Trajectory } from './rollout';
import { PartialResultsError, type ScoringItem, type TargetScorer, type TextCodec } from '../contracts';
import type { PipelineOptions } from '../options';

export interface Snapshot {
  trajectory: Trajectory;
  /** Index into the batch's trajectory list. */
  row: number;
  /** 1-based round. */
  round: number;
  /** SPEC §2: prompt + all previous response tokens (a prefix of the trajectory). */
  fullContext: number[];
  /** SPEC §2: promptIds + the round's tokens up to and including `</mem>`. */
  memContext: number[];
  /** The mem span in the response, [start, end), per `memory.memSpan`. */
  span: [number, number];
  targetIds: number[];
  ansMask: Uint8Array;
}

export interface RoundRewards {
  memReward: number;
  pFull: number;
  pMem: number;
}

export interface ScoredTrajectory {
  trajectory: Trajectory;
  text: string;
  score: number | null;
  formatValid: boolean;
  formatReason: string | null;
  /** Per round (index r-1): the memory reward, or null. */
  roundRewards: Array<RoundRewards | null>;
  /** Per response token. Zero for excluded trajectories. */
  outcomeAdvantage: Float32Array;
  memoryAdvantage: Float32Array;
  advantages: Float32Array;
  excluded: boolean;
}

export interface ScoreStats {
  snapshots: number;
  scoredItems: number;
  scorerCalls: number;
  /** Trajectories excluded because one of their scoring items failed on the scorer. */
  backendErrors: number;
  scoreMs: number;
  advantageMs: number;
}

const SPECIAL_TEXT_RE = new RegExp([EOS_TOKEN, IM_END, IM_START].map((s) => s.replace(/[|]/g, '\\|')).join('|'), 'g');

/** The response text the outcome reward reads: the decoded response without eos / chat markers. */
export function scoringText(text: string): string {
  return text.replace(SPECIAL_TEXT_RE, '');
}

/** SPEC §4 target: template with the gold filled in, the gold's tokens marked (prefix/answer/suffix tokenised apart). */
export function answerTarget(gold: string, template: string, codec: TextCodec): { targetIds: number[]; ansMask: Uint8Array } {
  const [prefix = '', suffix = ''] = template.split('{answer}');
  const p = prefix.length ? codec.encode(prefix) : [];
  const a = codec.encode(gold);
  const s = suffix.length ? codec.encode(suffix) : [];
  const targetIds = [...p, ...a, ...s];
  const ansMask = new Uint8Array(targetIds.length);
  ansMask.fill(1, p.length, p.length + a.length);
  return { targetIds, ansMask };
}

/** [decided] SPEC §4: which gold fills the target. */
export function pickGold(golds: readonly string[], rule: 'first' | 'shortest' | 'longest'): string {
  if (rule === 'first') return golds[0]!;
  return golds.reduce((best, g) => ((rule === 'shortest' ? g.length < best.length : g.length > best.length) ? g : best));
}

/** SPEC §2 snapshots of one batch: rounds r ≥ 2 with a closed `<mem>`, non-excluded trajectories. */
export function buildSnapshots(trajectories: readonly Trajectory[], codec: TextCodec, options: PipelineOptions): Snapshot[] {
  const m = options.memory;
  const out: Snapshot[] = [];
  trajectories.forEach((t, row) => {
    if (t.state === 'error') return;
    const gold = pickGold(t.question.golds, m.gold);
    const target = answerTarget(gold, m.answerTemplate, codec);
    for (const r of t.rounds) {
      if (r.index < 2 || r.memOpen === null || r.memClose === null) continue;
      const span: [number, number] = m.memSpan === 'inclusive' ? [r.memOpen, r.memClose + 1] : [r.memOpen + 1, r.memClose];
      if (span[1] <= span[0]) continue;
      const prev = t.rounds[r.index - 2]!;
      const lastObs = m.memContextIncludesLastObservation && prev.observation !== null
        ? t.responseIds.slice(prev.observation.start, prev.observation.end)
        : [];
      out.push({
        trajectory: t,
        row,
        round: r.index,
        fullContext: [...t.promptIds, ...t.responseIds.slice(0, r.start)],
        memContext: [...t.promptIds, ...lastObs, ...t.responseIds.slice(r.start, r.memClose + 1)],
        span,
        targetIds: target.targetIds,
        ansMask: target.ansMask,
      });
    }
  });
  return out;
}

/**
 * Scores one batch (trajectories of whole groups): outcome, memory rewards (one scorer call for
 * all 2M items) and advantages.
 */
export async function scoreBatch(
  trajectories: readonly Trajectory[],
  codec: TextCodec,
  scorer: TargetScorer | null,
  options: PipelineOptions,
): Promise<{ scored: ScoredTrajectory[]; snapshots: Snapshot[]; stats: ScoreStats }> {
  const stats: ScoreStats = { snapshots: 0, scoredItems: 0, scorerCalls: 0, backendErrors: 0, scoreMs: 0, advantageMs: 0 };
  const scored: ScoredTrajectory[] = trajectories.map((t) => {
    const text = codec.decode(t.responseIds);
    const clean = scoringText(text);
    const fmt = validateFormat(clean, { requireAnswer: options.reward.requireAnswer });
    const excluded = t.state === 'error';
    const score = excluded ? null : computeScore(clean, t.question.golds, options.reward);
    const n = t.responseIds.length;
    return {
      trajectory: t,
      text,
      score,
      formatValid: fmt.valid,
      formatReason: fmt.valid ? null : fmt.reason,
      roundRewards: t.rounds.map(() => null),
      outcomeAdvantage: new Float32Array(n),
      memoryAdvantage: new Float32Array(n),
      advantages: new Float32Array(n),
      excluded,
    };
  });

  // SPEC §4: memory rewards, one scorer call for the whole batch.
  const all = options.memory.enabled && scorer !== null ? buildSnapshots(trajectories, codec, options) : [];
  let snapshots = all;
  stats.snapshots = all.length;
  if (all.length > 0) {
    const t0 = performance.now();
    const tag = (s: Snapshot, context: 'full' | 'memory') => ({ uid: s.trajectory.uid, sample: s.trajectory.sample, round: s.round, context });
    const items: ScoringItem[] = [
      ...all.map((s) => ({ contextIds: s.fullContext, targetIds: s.targetIds, tag: tag(s, 'full') })),
      ...all.map((s) => ({ contextIds: s.memContext, targetIds: s.targetIds, tag: tag(s, 'memory') })),
    ];
    let logps: ReadonlyArray<Float32Array | undefined>;
    let failures: ReadonlyMap<number, string> = new Map();
    try {
      logps = await scorer!.score(items);
    } catch (err) {
      // Some items failed for good on the server: only their trajectories fail.
      if (!(err instanceof PartialResultsError) || err.results.length !== items.length) throw err;
      logps = err.results as ReadonlyArray<Float32Array | undefined>;
      failures = err.failures;
    }
    stats.scorerCalls = 1;
    stats.scoredItems = items.length;
    if (logps.length !== items.length) throw new Error(`The scorer returned ${logps.length} results for ${items.length} items`);
    // A trajectory with a failed item is recorded as failed (its first failed item's error) and excluded.
    const failedRows = new Map<number, string>();
    for (let i = 0; i < items.length; i++) {
      const s = all[i % all.length]!;
      if (failedRows.has(s.row) || (logps[i] !== undefined && !failures.has(i))) continue;
      failedRows.set(s.row, failures.get(i) ?? `the scorer returned no result for item ${i}`);
    }
    for (const [row, error] of failedRows) {
      const t = trajectories[row]!;
      t.state = 'error';
      t.doneReason = 'backend-error';
      t.error = error;
      const sc = scored[row]!;
      sc.excluded = true;
      sc.score = null;
      stats.backendErrors++;
    }
    const keep = all.map((s, i) => ({ s, i })).filter(({ s }) => !failedRows.has(s.row));
    snapshots = keep.map(({ s }) => s);
    const M = keep.length;
    const A = snapshots.reduce((mx, s) => Math.max(mx, s.targetIds.length), 0);
    const logp = new Float32Array(2 * M * A);
    const mask = new Uint8Array(2 * M * A);
    for (let j = 0; j < 2 * M; j++) {
      const { s, i } = keep[j % M]!;
      const lp = logps[j < M ? i : all.length + i]!;
      if (lp.length !== s.targetIds.length) throw new Error(`The scorer returned ${lp.length} log-probs for item ${j < M ? i : all.length + i} with ${s.targetIds.length} target tokens`);
      logp.set(lp, j * A);
      mask.set(s.ansMask, j * A);
    }
    if (M > 0) {
      const res = memoryRewards(logp, mask, M, A, { threshold: options.memory.threshold });
      if (options.memory.emptyKept === 'all-tokens') {
        // [decided] alternative: rows where no answer token passes τ use the plain geometric mean.
        const tau = options.memory.threshold;
        const plain = memoryRewards(logp, mask, M, A, { threshold: -Infinity });
        const noneKept = (row: number) => {
          for (let a = row * A; a < (row + 1) * A; a++) if (mask[a] !== 0 && logp[a]! > tau) return false;
          return true;
        };
        for (let i = 0; i < M; i++) {
          if (noneKept(i)) res.pFull[i] = plain.pFull[i]!;
          if (noneKept(M + i)) res.pMem[i] = plain.pMem[i]!;
          res.memRewards[i] = res.pMem[i]! - res.pFull[i]!;
        }
      }
      snapshots.forEach((s, i) => {
        scored[s.row]!.roundRewards[s.round - 1] = { memReward: res.memRewards[i]!, pFull: res.pFull[i]!, pMem: res.pMem[i]! };
      });
    }
    stats.scoreMs = performance.now() - t0;
  }

  // SPEC §5: advantages over the non-excluded trajectories (kernel API, padded B×T).
  const t1 = performance.now();
  const kept = scored.map((s, i) => ({ s, i })).filter(({ s }) => !s.excluded);
  const B = kept.length;
  if (B > 0) {
    const T = maxOf(1, kept.map(({ s }) => s.trajectory.responseIds.length));
    const mask = new Uint8Array(B * T);
    kept.forEach(({ s }, b) => mask.set(s.trajectory.responseMask, b * T));
    const adv = options.advantage;
    const norm = { eps: adv.eps, normByStd: adv.normByStd };
    const outcome = grpoOutcomeAdvantage(kept.map(({ s }) => s.score!), kept.map(({ s }) => s.trajectory.uid), mask, T, norm);
    const rowOf = new Map<number, number>();
    kept.forEach(({ i }, b) => rowOf.set(i, b));
    const memSnaps = snapshots.filter((s) => rowOf.has(s.row));
    const memory = memSnaps.length === 0
      ? new Float32Array(B * T)
      : memoryAdvantage(
        memSnaps.map((s) => scored[s.row]!.roundRewards[s.round - 1]!.memReward),
        memSnaps.map((s) => s.trajectory.uid),
        Int32Array.from(memSnaps.flatMap((s) => [rowOf.get(s.row)!, s.span[0], s.span[1]])),
        B,
        T,
        { ...norm, memGrouping: adv.memGrouping, rounds: Int32Array.from(memSnaps.map((s) => s.round)) },
      );
    const final = finalAdvantage(outcome, memory, mask, { alpha: adv.alpha });
    kept.forEach(({ s }, b) => {
      const n = s.trajectory.responseIds.length;
      s.outcomeAdvantage = outcome.slice(b * T, b * T + n);
      s.memoryAdvantage = memory.slice(b * T, b * T + n);
      s.advantages = final.slice(b * T, b * T + n);
    });
  }
  stats.advantageMs = performance.now() - t1;
  return { scored, snapshots, stats };
}
