/**
 * A finished batch (docs/algorithm.md §8) in the layouts other trainers consume (docs/export.md):
 * verl's actor-update tensors, TRL's GRPO `rollout_func` output, and mempo's own padded arrays.
 */
import { MempoError } from '../errors';
import { toTensorBatch, type TensorBatch } from '../pipeline/batch';
import type { BatchRecord } from '../contracts';
import { float32, int32, int64, uint8, type NamedTensors } from './export-tensor';
import { strings, type NpyArray } from './export-npz';

/** Why old log-probs are left out, or null when every record has the sampler's. */
function missingLogprobs(records: readonly BatchRecord[]): string | null {
  const n = records.filter((r) => r.oldLogp === null).length;
  return n === 0 ? null : `${n} of ${records.length} trajectories have no sampler log-probs (the generator returned none)`;
}

function batchOf(records: readonly BatchRecord[], padTokenId: number): TensorBatch {
  if (records.length === 0) throw new MempoError('ERR_INVALID_INPUT', 'The batch has no trajectories to export');
  return toTensorBatch(records, padTokenId);
}

/** B × (P + T) rows of a left-padded B × P block then a right-padded B × T block. */
function concatRows(B: number, P: number, T: number, left: ArrayLike<number>, right: ArrayLike<number>): number[] {
  const L = P + T;
  const out = new Array<number>(B * L);
  for (let b = 0; b < B; b++) {
    for (let i = 0; i < P; i++) out[b * L + i] = left[b * P + i]!;
    for (let j = 0; j < T; j++) out[b * L + P + j] = right[b * T + j]!;
  }
  return out;
}

/** verl's `compute_position_id_with_mask`: clip(cumsum(attention_mask, -1) - 1, min=0), per row. */
export function positionIds(mask: ArrayLike<number>, B: number, L: number): number[] {
  const out = new Array<number>(B * L);
  for (let b = 0; b < B; b++) {
    let sum = 0;
    for (let i = 0; i < L; i++) {
      sum += mask[b * L + i]!;
      out[b * L + i] = Math.max(0, sum - 1);
    }
  }
  return out;
}

export interface VerlExport {
  tensors: NamedTensors;
  metadata: Record<string, string>;
}

/**
 * The tensors of verl's agent loop output and actor update (`DataParallelPPOActor.update_policy`):
 * int64 `prompts` B × P (left-padded), `responses` / `response_mask` B × T (right-padded;
 * response_mask, also as `loss_mask`, 1 on generated tokens only), `input_ids` / `attention_mask` / `position_ids`
 * B × (P + T); float32 `old_log_probs` and `rollout_log_probs` (the sampler's, when every
 * trajectory has them), `advantages` (mempo's final per-token advantages, §5), the outcome and
 * memory parts, `token_level_scores` (the score on the last response token, as verl's reward
 * managers place it), `scores` B; bool `excluded` B. Uids go in the metadata (verl's non-tensor `uid`).
 */
export function verlExport(records: readonly BatchRecord[], padTokenId: number): VerlExport {
  const tb = batchOf(records, padTokenId);
  const { B, P, T } = tb;
  const L = P + T;
  const attention = concatRows(B, P, T, tb.promptMask, tb.attentionMask);
  const tokenScores = new Float32Array(B * T);
  records.forEach((r, b) => {
    if (r.responseIds.length > 0) tokenScores[b * T + r.responseIds.length - 1] = tb.scores[b]!;
  });
  const noLogprobs = missingLogprobs(records);
  const logprobs: NamedTensors = noLogprobs === null ? [['old_log_probs', float32([B, T], tb.oldLogp)], ['rollout_log_probs', float32([B, T], tb.oldLogp)]] : [];
  const tensors: NamedTensors = [
    ['input_ids', int64([B, L], concatRows(B, P, T, tb.promptIds, tb.responseIds))],
    ['attention_mask', int64([B, L], attention)],
    ['position_ids', int64([B, L], positionIds(attention, B, L))],
    ['prompts', int64([B, P], tb.promptIds)],
    ['responses', int64([B, T], tb.responseIds)],
    ['response_mask', int64([B, T], tb.responseMask)],
    // Older verl multi-turn actors (meta_info multi_turn) read the same mask as `loss_mask`.
    ['loss_mask', int64([B, T], tb.responseMask)],
    ...logprobs,
    ['advantages', float32([B, T], tb.advantages)],
    ['outcome_advantages', float32([B, T], tb.outcomeAdvantages)],
    ['memory_advantages', float32([B, T], tb.memoryAdvantages)],
    ['token_level_scores', float32([B, T], tokenScores)],
    ['scores', float32([B], tb.scores)],
    ['excluded', uint8([B], tb.excluded, 'BOOL')],
  ];
  const metadata: Record<string, string> = {
    format: 'pt',
    'mempo.layout': 'verl',
    'mempo.pad_token_id': String(padTokenId),
    'mempo.uid': JSON.stringify(tb.uids),
    'mempo.sample': JSON.stringify(records.map((r) => r.sample)),
    'mempo.old_log_probs': noLogprobs === null ? 'sampler' : `absent: ${noLogprobs}; recompute them with the actor (compute_log_prob)`,
  };
  return { tensors, metadata };
}

/**
 * TRL's GRPO `rollout_func` output, one entry per trajectory: the required `prompt_ids`,
 * `completion_ids`, `logprobs` (left out when a trajectory has none), `env_mask` (1 on
 * generated tokens, 0 on tool observations: TRL's tool mask), and extra fields TRL forwards to
 * the reward functions (`score`, mempo's per-token `advantages`, `uid`, `question`, ...).
 */
export function trlExport(records: readonly BatchRecord[]): Record<string, unknown> {
  if (records.length === 0) throw new MempoError('ERR_INVALID_INPUT', 'The batch has no trajectories to export');
  const noLogprobs = missingLogprobs(records);
  const rollout: Record<string, unknown[]> = {
    prompt_ids: records.map((r) => r.promptIds),
    completion_ids: records.map((r) => r.responseIds),
    ...(noLogprobs === null ? { logprobs: records.map((r) => r.oldLogp) } : {}),
    env_mask: records.map((r) => r.responseMask),
    score: records.map((r) => r.score),
    advantages: records.map((r) => r.advantages),
    uid: records.map((r) => r.uid),
    sample: records.map((r) => r.sample),
    question: records.map((r) => r.question),
    golds: records.map((r) => r.golds),
    excluded: records.map((r) => r.excluded),
  };
  return { mempo: { layout: 'trl', version: 1, logprobs: noLogprobs === null ? 'sampler' : `absent: ${noLogprobs}` }, rollout };
}

/**
 * mempo's own padded arrays (`toTensorBatch`, docs/algorithm.md §8) for NumPy: int32 ids,
 * uint8 masks, float32 values, `<U` uids, and the pad id as a 0-d int64 array.
 */
export function tensorsExport(records: readonly BatchRecord[], padTokenId: number): Array<[string, NpyArray]> {
  const tb = batchOf(records, padTokenId);
  const { B, P, T } = tb;
  const arrays: Array<[string, NpyArray]> = [
    ['prompt_ids', int32([B, P], tb.promptIds)],
    ['prompt_mask', uint8([B, P], tb.promptMask)],
    ['response_ids', int32([B, T], tb.responseIds)],
    ['response_mask', uint8([B, T], tb.responseMask)],
    ['attention_mask', uint8([B, T], tb.attentionMask)],
    ['advantages', float32([B, T], tb.advantages)],
    ['outcome_advantages', float32([B, T], tb.outcomeAdvantages)],
    ['memory_advantages', float32([B, T], tb.memoryAdvantages)],
  ];
  if (missingLogprobs(records) === null) arrays.push(['old_log_probs', float32([B, T], tb.oldLogp)]);
  arrays.push(
    ['scores', float32([B], tb.scores)],
    ['excluded', uint8([B], tb.excluded)],
    ['sample', int32([B], records.map((r) => r.sample))],
    ['uid', strings(tb.uids)],
    ['pad_token_id', int64([], [padTokenId])],
  );
  return arrays;
}
