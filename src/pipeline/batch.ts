/**
 * What a trainer gets (docs/algorithm.md §8): one `BatchRecord` per trajectory (the batch.jsonl
 * line) and the same batch as padded B × T typed arrays for a tensor trainer.
 */
import { MempoError } from '../errors';
import { maxOf } from '../util';
import type { BatchRecord, ScoredTrajectory } from '../contracts';
import { memSpan } from './snapshots';

export type { BatchRecord, BatchRound } from '../contracts';

export function toBatchRecord(s: ScoredTrajectory, memSpanMode: 'inclusive' | 'content'): BatchRecord {
  const t = s.trajectory;
  const q = t.question;
  return {
    uid: t.uid,
    sample: t.sample,
    question: q.question,
    golds: q.golds,
    hops: q.hops ?? null,
    objectives: q.objectives ?? null,
    promptIds: t.promptIds,
    responseIds: t.responseIds,
    responseMask: t.responseMask,
    oldLogp: t.hasLogprobs ? t.oldLogp : null,
    rounds: t.rounds.map((r, i) => {
      const rr = s.roundRewards[i] ?? null;
      return {
        index: r.index,
        start: r.start,
        end: r.end,
        memSpan: memSpan(r, memSpanMode),
        memReward: rr?.memReward ?? null,
        pFull: rr?.pFull ?? null,
        pMem: rr?.pMem ?? null,
        action: r.action,
        query: r.query,
        ...(r.url !== undefined ? { url: r.url } : {}),
        ...(r.page !== undefined ? { page: r.page } : {}),
        ...(r.reading === true ? { reading: true as const } : {}),
        answer: r.answer,
        violations: r.violations,
        finishReason: r.finishReason,
        contextTokens: r.contextTokens,
        ...(r.contextIds !== undefined ? { contextIds: r.contextIds } : {}),
        observation: r.observation === null ? null : { start: r.observation.start, end: r.observation.end, truncated: r.observation.truncated },
      };
    }),
    score: s.score,
    formatValid: s.formatValid,
    formatReason: s.formatReason,
    outcomeAdvantage: Array.from(s.outcomeAdvantage),
    memoryAdvantage: Array.from(s.memoryAdvantage),
    advantages: Array.from(s.advantages),
    text: s.text,
    doneReason: t.doneReason,
    error: t.error,
    excluded: s.excluded,
  };
}

/**
 * The exact ids round `round` (1-based) of a record was sampled from (docs/algorithm.md §1, §9):
 * under `--context memory` the ids recorded with the round (the §7 window, rendered and
 * tokenised when the round started); under `full` promptIds + the response before the round.
 * A memory-policy trainer trains on this context + `responseIds.slice(start, end)` per round.
 */
export function roundContextIds(record: BatchRecord, round: number): number[] {
  const r = record.rounds[round - 1];
  if (r === undefined || r.index !== round) throw new RangeError(`round ${round} is not a round of ${record.uid} sample ${record.sample} (${record.rounds.length} rounds)`);
  return r.contextIds !== undefined ? [...r.contextIds] : [...record.promptIds, ...record.responseIds.slice(0, r.start)];
}

export interface TensorBatch {
  /** Rows (trajectories) and padded lengths. */
  B: number;
  /** Longest prompt (prompts are left-padded). */
  P: number;
  /** Longest response (responses are right-padded). */
  T: number;
  padTokenId: number;
  uids: string[];
  promptIds: Int32Array;
  promptMask: Uint8Array;
  responseIds: Int32Array;
  /** 1 on generated tokens, 0 on observations and padding. */
  responseMask: Uint8Array;
  /** 1 on every real response token (generated or observation), 0 on padding. */
  attentionMask: Uint8Array;
  advantages: Float32Array;
  outcomeAdvantages: Float32Array;
  memoryAdvantages: Float32Array;
  oldLogp: Float32Array;
  scores: Float32Array;
  /** 1 when the row was excluded (tool or inference-server failure): its advantages are 0. */
  excluded: Uint8Array;
}

/** docs/algorithm.md §8: the batch as padded typed arrays (B × P prompts left-padded, B × T responses right-padded). */
export function toTensorBatch(records: readonly BatchRecord[], padTokenId: number): TensorBatch {
  // The pad id is the model's (resolveProtocolIds(...).padTokenId): no id means the same token in every vocabulary.
  if (!Number.isInteger(padTokenId) || padTokenId < 0) {
    throw new MempoError('ERR_INVALID_ARGUMENT', `Expected the model's pad token id (a non-negative integer) for padTokenId but received ${String(padTokenId)}`);
  }
  const B = records.length;
  const P = maxOf(0, records.map((r) => r.promptIds.length));
  const T = maxOf(0, records.map((r) => r.responseIds.length));
  const tb: TensorBatch = {
    B, P, T, padTokenId,
    uids: records.map((r) => r.uid),
    promptIds: new Int32Array(B * P).fill(padTokenId),
    promptMask: new Uint8Array(B * P),
    responseIds: new Int32Array(B * T).fill(padTokenId),
    responseMask: new Uint8Array(B * T),
    attentionMask: new Uint8Array(B * T),
    advantages: new Float32Array(B * T),
    outcomeAdvantages: new Float32Array(B * T),
    memoryAdvantages: new Float32Array(B * T),
    oldLogp: new Float32Array(B * T),
    scores: new Float32Array(B),
    excluded: new Uint8Array(B),
  };
  records.forEach((r, b) => {
    const off = b * P + (P - r.promptIds.length);
    tb.promptIds.set(r.promptIds, off);
    tb.promptMask.fill(1, off, (b + 1) * P);
    const base = b * T;
    const n = r.responseIds.length;
    tb.responseIds.set(r.responseIds, base);
    tb.responseMask.set(r.responseMask, base);
    tb.attentionMask.fill(1, base, base + n);
    tb.advantages.set(r.advantages, base);
    tb.outcomeAdvantages.set(r.outcomeAdvantage, base);
    tb.memoryAdvantages.set(r.memoryAdvantage, base);
    if (r.oldLogp !== null) tb.oldLogp.set(r.oldLogp, base);
    tb.scores[b] = r.score ?? 0;
    tb.excluded[b] = r.excluded ? 1 : 0;
  });
  return tb;
}
