/** The evaluation table (`mempo eval`, eval.json): EM, F1, context sizes and turns, by hops, objectives and kind. */
import { maxOf } from '../util';
import type { BatchRecord } from './batch';
import { answerMarks, type RunContext } from './summary';
import { accessCounts, byId, goldInMemAfterShrink, pageQuestionsEm, type AccessFigures } from './page-figures';

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
  /** By question kind (the questions' `kind`: the embedded world's `chain`, `bundle`, ..., `page`; `unknown` when a question has none). */
  byKind: Record<string, EvalBucket>;
  /** The page tool's figures, when the run had it or some round accessed a page. */
  access?: AccessFigures;
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

/**
 * The evaluation table from batch records. `context.questions` gives the split by kind and the
 * page figures; `context.access` (the run had the page tool) and `context.decode` the access
 * figures and the gold-in-mem rate.
 */
export function evalReport(records: readonly BatchRecord[], context: RunContext = {}): EvalReport {
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
  const questions = byId(context.questions);
  const counts = accessCounts(kept);
  const access: AccessFigures | null = counts.rounds === 0 && context.access !== true ? null : {
    ...counts,
    roundsPerTrajectory: kept.length ? counts.rounds / kept.length : 0,
    pageQuestions: pageQuestionsEm(kept, questions, em),
    goldInMemAfterShrink: context.decode === undefined ? null : goldInMemAfterShrink(kept, questions, context.decode, em),
  };
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
    byKind: bucket((r) => questions.get(r.uid)?.kind ?? 'unknown'),
    ...(access === null ? {} : { access }),
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
  // Reports written before the split by kind (an older eval.json) have none.
  if (e.byKind !== undefined) lines.push('  EM by kind:        ' + Object.entries(e.byKind).map(([k, b]) => `${k}: ${pct(b.em)} (n=${b.questions})`).join('  '));
  const a = e.access;
  if (a !== undefined) {
    lines.push(`  page tool                ${a.rounds} access rounds (${a.roundsPerTrajectory.toFixed(2)} per trajectory), ${a.pagesOpened} pages opened, ${a.chunksShown} chunks shown`);
    if (a.pageQuestions !== null) lines.push(`  page facts answered      ${pct(a.pageQuestions.em)}   (EM on ${a.pageQuestions.questions} page questions, ${a.pageQuestions.trajectories} trajectories)`);
    const g = a.goldInMemAfterShrink;
    if (g !== null) {
      const rate = (x: number | null) => (x === null ? '–' : pct(x));
      lines.push(`  gold in mem after shrink ${rate(g.rate)}   (${g.inMem} of ${g.shrank} trajectories whose fact chunk shrank; answered ${rate(g.correctRate)}; chunk shown in ${g.factShown} of ${g.trajectories})`);
    }
  }
  return lines.join('\n');
}
