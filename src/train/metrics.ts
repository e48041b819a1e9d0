/** One metrics.jsonl line per step (docs/algorithm.md §9): what the batch scored, what the update did, where the time went. */
import type { BatchRecord } from '../contracts';
import { exactMatch, meanStd, summarize } from '../pipeline/summary';
import type { EvalReport } from '../pipeline/eval-report';
import type { UpdateStats } from './update';

export interface Moments {
  mean: number | null;
  std: number | null;
}

export interface StepMetrics {
  step: number;
  /** Questions and trajectories of the step's batch; `trained` rows went to the learner. */
  questions: number;
  trajectories: number;
  trained: number;
  meanScore: number | null;
  em: number | null;
  formatValidRate: number | null;
  memoryReward: Moments;
  pFull: number | null;
  pMem: number | null;
  /** Over generated (mask) tokens of kept trajectories; memory advantage over its non-zero tokens. */
  outcomeAdvantage: Moments;
  memoryAdvantage: Moments;
  loss: number | null;
  clipFrac: number | null;
  approxKl: number | null;
  klRef: number | null;
  gradNorm: number | null;
  lr: number;
  tokens: { generated: number; trained: number };
  /** Wall time per phase (ms): rollout, scoring, learner forward / backward, optimiser, sync, eval, checkpoint, total. */
  wallMs: Record<string, number>;
  eval: { em: number; score: number; byHops: Record<string, number>; byObjectives: Record<string, number> } | null;
  /** Overlapped steps only (asyncLevel > 0): the weight version that sampled every round of the step (v = after v updates). */
  samplerVersion?: number;
}

function moments(xs: readonly number[]): Moments {
  const { mean, std } = meanStd(xs);
  return { mean, std };
}

const meanOf = (xs: readonly number[]): number | null => meanStd(xs).mean;

/** The batch part of a step's line. */
export function batchMetrics(records: readonly BatchRecord[]) {
  const s = summarize(records, null);
  const kept = records.filter((r) => !r.excluded);
  const pFull: number[] = [];
  const pMem: number[] = [];
  const outcome: number[] = [];
  const memory: number[] = [];
  for (const r of kept) {
    for (const rd of r.rounds) {
      if (rd.pFull !== null) pFull.push(rd.pFull);
      if (rd.pMem !== null) pMem.push(rd.pMem);
    }
    r.responseMask.forEach((m, t) => {
      if (m === 0) return;
      outcome.push(r.outcomeAdvantage[t]!);
      if (r.memoryAdvantage[t] !== 0) memory.push(r.memoryAdvantage[t]!);
    });
  }
  return {
    questions: s.questions,
    trajectories: s.trajectories,
    meanScore: s.meanScore,
    em: meanOf(kept.map(exactMatch)),
    formatValidRate: s.formatValidRate,
    memoryReward: { mean: s.memoryReward.mean, std: s.memoryReward.std },
    pFull: meanOf(pFull),
    pMem: meanOf(pMem),
    outcomeAdvantage: moments(outcome),
    memoryAdvantage: moments(memory),
    generated: s.tokensGenerated,
  };
}

export function updateMetrics(u: UpdateStats | null) {
  if (u === null || u.updates === 0) return { loss: null, clipFrac: null, approxKl: null, klRef: null, gradNorm: null };
  return { loss: u.loss, clipFrac: u.clipFrac, approxKl: u.approxKl, klRef: u.klRef, gradNorm: u.gradNorm };
}

export function evalMetrics(e: EvalReport | null): StepMetrics['eval'] {
  if (e === null) return null;
  const pick = (b: EvalReport['byHops']) => Object.fromEntries(Object.entries(b).map(([k, v]) => [k, v.em]));
  return { em: e.em, score: e.score, byHops: pick(e.byHops), byObjectives: pick(e.byObjectives) };
}
