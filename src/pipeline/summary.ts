/** summary.json of a run and the evaluation table (`mempo eval`). */
import { maxOf } from '../util';
import { emCheck, extractSolution, f1Score, normalizeAnswer } from '../kernels/outcome-reward';
import type { BatchRecord } from './batch';
import type { Question } from '../contracts';
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
   * The page tool (docs/algorithm.md §1), only when the run had it or some round accessed a URL:
   * access rounds, the pages they opened (a chunk 1 shown), the chunks shown in all, and exact
   * match on the questions of kind `page` (when the run had some and its questions are known).
   */
  access?: { rounds: number; pagesOpened: number; chunksShown: number; pageQuestions?: PageQuestionsEm };
  /** This invocation only (a resumed run counts only what it generated). */
  thisRun: {
    trajectories: number;
    batches: number;
    skippedBatches: number;
    scorerCalls: number;
    wallMs: Record<string, number>;
  } | null;
}

/** Exact match on the questions of kind `page` (the embedded world's page questions): "page facts answered". */
export interface PageQuestionsEm {
  questions: number;
  trajectories: number;
  em: number;
}

/** What the figures of a run need beyond its records. */
export interface RunContext {
  /** The run's questions: their `kind` and, for page questions, the page fact (`pageHop`, `pageChunk`, `chains`). */
  questions?: readonly Question[];
  /** The run had the page tool (`tool.access`): the access figures are given even when no round accessed a page. */
  access?: boolean;
  /** Text of generated ids: the gold-in-mem figure reads `<mem>` and observations as text (docs/algorithm.md §1). */
  decode?: (ids: number[]) => string;
}

export function summarize(
  records: readonly BatchRecord[],
  run: { stats: PipelineStats; newTrajectories: number; extraWallMs?: Record<string, number> } | null,
  context: RunContext = {},
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
    ...accessSummary(records, context),
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

/** Access rounds, pages opened (a chunk 1 shown) and chunks shown, over the records. */
function accessCounts(records: readonly BatchRecord[]): { rounds: number; pagesOpened: number; chunksShown: number } {
  let rounds = 0;
  let pagesOpened = 0;
  let chunksShown = 0;
  for (const r of records) {
    for (const rd of r.rounds) {
      if (rd.action === 'access') rounds++;
      // A round's `page` is the chunk its observation showed (an access's, or a reading round's of a queued page).
      if (rd.page !== undefined) chunksShown++;
      if (rd.page === 1) pagesOpened++;
    }
  }
  return { rounds, pagesOpened, chunksShown };
}

/** EM over the kept trajectories of questions of kind `page`; null when the run had none (or its questions are not known). */
function pageQuestionsEm(kept: readonly BatchRecord[], questions: ReadonlyMap<string, Question>, em: (r: BatchRecord) => number): PageQuestionsEm | null {
  const page = kept.filter((r) => questions.get(r.uid)?.kind === 'page');
  if (page.length === 0) return null;
  return { questions: new Set(page.map((r) => r.uid)).size, trajectories: page.length, em: page.reduce((a, r) => a + em(r), 0) / page.length };
}

function accessSummary(records: readonly BatchRecord[], context: RunContext): Pick<RunSummary, 'access'> {
  const counts = accessCounts(records);
  if (counts.rounds === 0 && context.access !== true) return {};
  const pageQuestions = pageQuestionsEm(records.filter((r) => !r.excluded), byId(context.questions), exactMatch);
  return { access: { ...counts, ...(pageQuestions === null ? {} : { pageQuestions }) } };
}

function byId(questions: readonly Question[] | undefined): Map<string, Question> {
  return new Map((questions ?? []).map((q) => [q.id, q]));
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

/** The page tool in an evaluation (docs/rollout.md, "The page tool's figures"). */
export interface AccessFigures {
  /** Access rounds in all and per (kept) trajectory; pages opened (chunk 1 shown); chunks shown. */
  rounds: number;
  roundsPerTrajectory: number;
  pagesOpened: number;
  chunksShown: number;
  /** EM on the questions of kind `page` ("page facts answered"); null without such questions. */
  pageQuestions: PageQuestionsEm | null;
  /** Null without questions naming a page fact (`pageHop`, `pageChunk`) or without the tokenizer's decode. */
  goldInMemAfterShrink: GoldInMemAfterShrink | null;
}

/**
 * docs/rollout.md, "Gold in mem after shrink": among trajectories shown the chunk stating their
 * question's page-only fact whose chunk then left the memory window (docs/algorithm.md §7) before
 * they ended, the share whose `<mem>` held the fact in the first round after it shrank.
 */
export interface GoldInMemAfterShrink {
  /** Kept trajectories of questions naming a page fact. */
  trajectories: number;
  /** Of them, those shown the chunk that states it. */
  factShown: number;
  /** Of those, the ones with a round after the one that saw the chunk whole: the chunk shrank (the denominator). */
  shrank: number;
  /** Of `shrank`, those whose `<mem>` held the fact in that round. */
  inMem: number;
  /** inMem / shrank; null when shrank is 0. */
  rate: number | null;
  /** Of `shrank`, those answered correctly (EM). */
  correct: number;
  /** correct / shrank; null when shrank is 0. */
  correctRate: number | null;
}

/** The page-only fact a page question names: the hop `pageHop` of `chains[0]`, stated in chunk `pageChunk` of its subject's page. */
export function pageFactOf(q: Question): { subject: string; object: string; chunk: number } | null {
  if (q.pageHop === undefined || q.pageChunk === undefined) return null;
  const hop = q.chains?.[0]?.[q.pageHop];
  return hop === undefined ? null : { subject: hop.subject, object: hop.object, chunk: q.pageChunk };
}

/**
 * Whether `phrase` occurs in `text` as whole words, both under the EM normalisation (case,
 * punctuation, articles); tags count as spaces (`<mem>Mamek</mem>` holds "Mamek").
 */
export function containsPhrase(text: string, phrase: string): boolean {
  const p = normalizeAnswer(phrase);
  return p.length > 0 && ` ${normalizeAnswer(text.replace(/<\/?[A-Za-z_]+>/g, ' '))} `.includes(` ${p} `);
}

function goldInMemAfterShrink(
  kept: readonly BatchRecord[], questions: ReadonlyMap<string, Question>, decode: (ids: number[]) => string, em: (r: BatchRecord) => number,
): GoldInMemAfterShrink | null {
  const out = { trajectories: 0, factShown: 0, shrank: 0, inMem: 0, correct: 0 };
  for (const r of kept) {
    const q = questions.get(r.uid);
    const fact = q === undefined ? null : pageFactOf(q);
    if (fact === null) continue;
    out.trajectories++;
    const text = (span: [number, number]) => decode(r.responseIds.slice(span[0], span[1]));
    // The round whose observation is the fact's chunk: chunk number `pageChunk`, naming both ends of the fact.
    const at = r.rounds.findIndex((rd) => {
      if (rd.page !== fact.chunk || rd.observation === null) return false;
      const obs = text([rd.observation.start, rd.observation.end]);
      return containsPhrase(obs, fact.subject) && containsPhrase(obs, fact.object);
    });
    if (at < 0) continue;
    out.factShown++;
    // Round at+1 (1-based at+2) saw the chunk whole; the next round is the first whose window no longer does.
    const after = r.rounds[at + 2];
    if (after === undefined) continue;
    out.shrank++;
    if (after.memSpan !== null && containsPhrase(text(after.memSpan), fact.object)) out.inMem++;
    out.correct += em(r);
  }
  if (out.trajectories === 0) return null;
  return {
    ...out,
    rate: out.shrank ? out.inMem / out.shrank : null,
    correctRate: out.shrank ? out.correct / out.shrank : null,
  };
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
