/** summary.json of a run (the evaluation table is eval-report.ts, the page tool's figures page-figures.ts). */
import { emCheck, extractSolution, f1Score } from '../kernels/outcome-reward';
import { accessCounts, byId, pageQuestionsEm, type PageQuestionsEm } from './page-figures';
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
  /**
   * A run of the developer's own agent (`mempo rollout --agent`): the episodes excluded because the
   * agent or reward threw (with the error) and those that expired unfinished (their calls dropped).
   */
  episodes?: { failed: Array<{ episode: string; error: string }>; expired: string[] };
  /** This invocation only (a resumed run counts only what it generated). */
  thisRun: {
    trajectories: number;
    batches: number;
    skippedBatches: number;
    scorerCalls: number;
    wallMs: Record<string, number>;
  } | null;
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

function accessSummary(records: readonly BatchRecord[], context: RunContext): Pick<RunSummary, 'access'> {
  const counts = accessCounts(records);
  if (counts.rounds === 0 && context.access !== true) return {};
  const pageQuestions = pageQuestionsEm(records.filter((r) => !r.excluded), byId(context.questions), exactMatch);
  return { access: { ...counts, ...(pageQuestions === null ? {} : { pageQuestions }) } };
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

