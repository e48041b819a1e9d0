/** summary.json of a run and the evaluation table (`mempo eval`). */
import { maxOf } from '../util';
import { emCheck, extractSolution, f1Score } from '../kernels/outcome-reward';
import type { BatchRecord } from './batch';
import type { PipelineStats } from './pipeline';
import { scoringText } from './outcome-reward';

/** Mean and sample standard deviation (n − 1), nulls when empty. */
export function meanStd(xs: readonly number[]): { mean: number | null; std: number | null; count: number } {
  const n = xs.length;
  if (n === 0) return { mean: null, std: null, count: 0 };
  const mean = xs.reduce((a, x) => a + x, 0) / n;
  const std = n > 1 ? Math.sqrt(xs.reduce((a, x) => a + (x - mean) ** 2, 0) / (n - 1)) : 0;
  return { mean, std, count: n };
}

export interface RunSummary {
  questions: number;
  trajectories: number;
  excluded: number;
  toolErrors: number;
  /** Trajectories that failed on the inference server (doneReason 'backend-error'). */
  backendErrors: number;
  meanScore: number | null;
  formatValidRate: number | null;
  formatValidRoundRate: number | null;
  memoryReward: { mean: number | null; std: number | null; count: number };
  meanTurns: number | null;
  tokensGenerated: number;
  observationTokens: number;
  scoredItems: number;
  doneReasons: Record<string, number>;
  /**
   * The page tool (docs/algorithm.md §1), only when some round accessed a URL: access rounds,
   * the pages they opened (a chunk 1 shown) and the chunks shown in all.
   */
  access?: { rounds: number; pagesOpened: number; chunksShown: number };
  /** This invocation only (a resumed run counts only what it generated). */
  thisRun: {
    trajectories: number;
    batches: number;
    skippedBatches: number;
    scorerCalls: number;
    wallMs: Record<string, number>;
  } | null;
}

export function summarize(
  records: readonly BatchRecord[],
  run: { stats: PipelineStats; newTrajectories: number; extraWallMs?: Record<string, number> } | null,
): RunSummary {
  const stats = run?.stats ?? null;
  const extraWallMs = run?.extraWallMs ?? {};
  const kept = records.filter((r) => !r.excluded);
  const rewards: number[] = [];
  let rounds = 0;
  let validRounds = 0;
  const reasons: Record<string, number> = {};
  for (const r of records) {
    for (const rd of r.rounds) {
      rounds++;
      if (rd.violations.length === 0) validRounds++;
      if (rd.memReward !== null && !r.excluded) rewards.push(rd.memReward);
    }
    const k = r.doneReason ?? 'unknown';
    reasons[k] = (reasons[k] ?? 0) + 1;
  }
  const scores = kept.map((r) => r.score ?? 0);
  const ms = (x: number) => Math.round(x);
  return {
    questions: new Set(records.map((r) => r.uid)).size,
    trajectories: records.length,
    excluded: records.length - kept.length,
    toolErrors: records.filter((r) => r.error !== null && r.doneReason !== 'backend-error').length,
    backendErrors: records.filter((r) => r.doneReason === 'backend-error').length,
    meanScore: meanStd(scores).mean,
    formatValidRate: records.length ? records.filter((r) => r.formatValid).length / records.length : null,
    formatValidRoundRate: rounds ? validRounds / rounds : null,
    memoryReward: meanStd(rewards),
    meanTurns: records.length ? records.reduce((a, r) => a + r.rounds.length, 0) / records.length : null,
    tokensGenerated: records.reduce((a, r) => a + r.responseMask.reduce((s, m) => s + m, 0), 0),
    observationTokens: records.reduce((a, r) => a + r.responseMask.length - r.responseMask.reduce((s, m) => s + m, 0), 0),
    scoredItems: records.reduce((a, r) => a + 2 * r.rounds.filter((rd) => rd.memReward !== null).length, 0),
    doneReasons: reasons,
    ...accessSummary(records),
    thisRun: stats === null ? null : {
      trajectories: run!.newTrajectories,
      batches: stats.batches,
      skippedBatches: stats.skippedBatches,
      scorerCalls: stats.scorerCalls,
      wallMs: {
        ...Object.fromEntries(Object.entries(extraWallMs).map(([k, v]) => [k, ms(v)])),
        generate: ms(stats.times.generateMs),
        tools: ms(stats.times.toolMs),
        scoring: ms(stats.times.scoreMs),
        advantages: ms(stats.times.advantageMs),
        writing: ms(stats.times.writeMs),
        total: ms(stats.times.totalMs),
      },
    },
  };
}

function accessSummary(records: readonly BatchRecord[]): Pick<RunSummary, 'access'> {
  let rounds = 0;
  let pagesOpened = 0;
  let chunksShown = 0;
  for (const r of records) {
    for (const rd of r.rounds) {
      if (rd.action !== 'access') continue;
      rounds++;
      if (rd.page !== undefined) chunksShown++;
      if (rd.page === 1) pagesOpened++;
    }
  }
  return rounds === 0 ? {} : { access: { rounds, pagesOpened, chunksShown } };
}

export interface EvalBucket {
  questions: number;
  trajectories: number;
  /** Exact match of the extracted answer (format not required). */
  em: number;
  /** Token F1 of the extracted answer against the best gold (format not required): partial credit for a bundle's objectives. */
  f1: number;
  /** Per trajectory, the sum / max of its rounds' context lengths, averaged over the bucket. */
  contextTokens: { meanTotal: number; meanPeak: number };
  /** Rounds per trajectory, averaged over the bucket. */
  meanTurns: number;
  /** Rounds in the bucket, and those with a format violation: counts, so that two models' format can be tested against each other. */
  rounds: number;
  invalidRounds: number;
}

export interface EvalReport {
  questions: number;
  trajectories: number;
  em: number;
  /** Token F1 of the extracted answer (format not required). */
  f1: number;
  /** Format-gated score (docs/algorithm.md §3 computeScore). */
  score: number;
  /** Single-objective questions by chain length (a bundle's hops would mix two difficulties). */
  byHops: Record<string, EvalBucket>;
  byObjectives: Record<string, EvalBucket>;
  formatValidRate: number;
  formatValidRoundRate: number;
  /** The counts behind formatValidRoundRate. */
  rounds: number;
  invalidRounds: number;
  /** Questions whose group has both a correct and a wrong trajectory (needs groupSize > 1). */
  mixedGroupFraction: number;
  /** Per question, mean over its trajectories of the sum / max of the rounds' context lengths. */
  contextTokens: { meanTotalPerQuestion: number; meanPeakPerQuestion: number; maxPeak: number };
  meanTurns: number;
}

/** Exact match of a trajectory's extracted answer against its golds (format not required). */
export function exactMatch(r: BatchRecord): number {
  return emCheck(extractSolution(scoringText(r.text)), r.golds);
}

/** Exact match and token F1 of a trajectory's answer, extracted once (format not required). */
export function answerMarks(r: BatchRecord): { em: number; f1: number } {
  const answer = extractSolution(scoringText(r.text));
  return { em: emCheck(answer, r.golds), f1: f1Score(answer, r.golds) };
}

/** The evaluation table from batch records. */
export function evalReport(records: readonly BatchRecord[]): EvalReport {
  const kept = records.filter((r) => !r.excluded);
  const marks = new Map(kept.map((r) => [r, answerMarks(r)] as const));
  const em = (r: BatchRecord) => marks.get(r)!.em;
  const f1 = (r: BatchRecord) => marks.get(r)!.f1;
  const groups = new Map<string, BatchRecord[]>();
  for (const r of kept) {
    let g = groups.get(r.uid);
    if (!g) groups.set(r.uid, (g = []));
    g.push(r);
  }
  const bucket = (key: (r: BatchRecord) => string, keep: (r: BatchRecord) => boolean = () => true): Record<string, EvalBucket> => {
    const out: Record<string, { qs: Set<string>; n: number; em: number; f1: number; total: number; peak: number; turns: number; invalid: number }> = {};
    for (const r of kept.filter(keep)) {
      const k = key(r);
      const b = (out[k] ??= { qs: new Set(), n: 0, em: 0, f1: 0, total: 0, peak: 0, turns: 0, invalid: 0 });
      b.qs.add(r.uid);
      b.n++;
      b.em += em(r);
      b.f1 += f1(r);
      b.total += r.rounds.reduce((s, rd) => s + rd.contextTokens, 0);
      b.peak += maxOf(0, r.rounds.map((rd) => rd.contextTokens));
      b.turns += r.rounds.length;
      b.invalid += r.rounds.filter((rd) => rd.violations.length > 0).length;
    }
    return Object.fromEntries(Object.entries(out).sort(([a], [b]) => Number(a) - Number(b) || a.localeCompare(b))
      .map(([k, b]) => [k, {
        questions: b.qs.size, trajectories: b.n, em: b.em / b.n, f1: b.f1 / b.n,
        contextTokens: { meanTotal: b.total / b.n, meanPeak: b.peak / b.n }, meanTurns: b.turns / b.n,
        rounds: b.turns, invalidRounds: b.invalid,
      }]));
  };
  let rounds = 0;
  let valid = 0;
  for (const r of kept) for (const rd of r.rounds) {
    rounds++;
    if (rd.violations.length === 0) valid++;
  }
  let mixed = 0;
  const totals: number[] = [];
  const peaks: number[] = [];
  for (const g of groups.values()) {
    const ems = g.map(em);
    if (ems.some((x) => x === 1) && ems.some((x) => x === 0)) mixed++;
    totals.push(g.reduce((a, r) => a + r.rounds.reduce((s, rd) => s + rd.contextTokens, 0), 0) / g.length);
    peaks.push(g.reduce((a, r) => a + maxOf(0, r.rounds.map((rd) => rd.contextTokens)), 0) / g.length);
  }
  const avg = (xs: number[]) => (xs.length ? xs.reduce((a, x) => a + x, 0) / xs.length : 0);
  return {
    questions: groups.size,
    trajectories: kept.length,
    em: avg(kept.map(em)),
    f1: avg(kept.map(f1)),
    score: avg(kept.map((r) => r.score ?? 0)),
    byHops: bucket((r) => String(r.hops ?? 'unknown'), (r) => (r.objectives ?? 1) <= 1),
    byObjectives: bucket((r) => String(r.objectives ?? 'unknown')),
    formatValidRate: avg(kept.map((r) => (r.formatValid ? 1 : 0))),
    formatValidRoundRate: rounds ? valid / rounds : 0,
    rounds,
    invalidRounds: rounds - valid,
    mixedGroupFraction: groups.size ? mixed / groups.size : 0,
    contextTokens: {
      meanTotalPerQuestion: avg(totals),
      meanPeakPerQuestion: avg(peaks),
      maxPeak: maxOf(0, kept.flatMap((r) => r.rounds.map((rd) => rd.contextTokens))),
    },
    meanTurns: avg(kept.map((r) => r.rounds.length)),
  };
}

/** The evaluation table as aligned text. */
export function formatEvalReport(e: EvalReport, title = 'mempo eval'): string {
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const lines = [
    `${title}: ${e.questions} questions, ${e.trajectories} trajectories`,
    `  exact match              ${pct(e.em)}   (format-gated score ${pct(e.score)}, token F1 ${pct(e.f1)})`,
    `  format-valid rounds      ${pct(e.formatValidRoundRate)}   (${e.invalidRounds} invalid of ${e.rounds}; valid trajectories ${pct(e.formatValidRate)})`,
    `  mixed groups             ${pct(e.mixedGroupFraction)}`,
    `  mean turns               ${e.meanTurns.toFixed(2)}`,
    `  context tokens/question  total ${e.contextTokens.meanTotalPerQuestion.toFixed(0)}, peak ${e.contextTokens.meanPeakPerQuestion.toFixed(0)} (max ${e.contextTokens.maxPeak})`,
    '  EM by hops:        ' + Object.entries(e.byHops).map(([k, b]) => `${k}: ${pct(b.em)} (n=${b.questions})`).join('  '),
    '  EM by objectives:  ' + Object.entries(e.byObjectives).map(([k, b]) => `${k}: ${pct(b.em)} (n=${b.questions})`).join('  '),
    '  F1 by objectives:  ' + Object.entries(e.byObjectives).map(([k, b]) => `${k}: ${pct(b.f1)} (n=${b.questions})`).join('  '),
    '  context tokens by objectives (total / peak per trajectory):  ' + Object.entries(e.byObjectives)
      .map(([k, b]) => `${k}: ${b.contextTokens.meanTotal.toFixed(0)} / ${b.contextTokens.meanPeak.toFixed(0)}`).join('  '),
    '  invalid rounds by objectives:  ' + Object.entries(e.byObjectives).map(([k, b]) => `${k}: ${b.invalidRounds} of ${b.rounds}`).join('  '),
  ];
  return lines.join('\n');
}
