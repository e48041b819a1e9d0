/**
 * What a server dialect (vLLM `/v1/completions`, SGLang `/generate`) provides to the engine
 * client: the request bodies of generation and scoring, and the checked reading of their
 * answers. Every error names the endpoint and the request or item (`where`).
 */
import type { GenerateParams, GenerationFinish, GenerationOutput, GenerationRequest } from '../../contracts';

/** One scoring item as sent: `prompt` = kept context + target, `ctx` = kept context length, `k` = its index in the call. */
export interface ScoringJob {
  k: number;
  prompt: number[];
  ctx: number;
  tgt: readonly number[];
}

export interface CompletionsDialect {
  /** Body of one generation request; `seed` undefined sends none. */
  generationBody(r: GenerationRequest, params: GenerateParams, seed: number | undefined): unknown;
  parseGeneration(j: unknown, where: string, r: GenerationRequest): GenerationOutput;
  /** Body of one scoring request for a group of items. */
  scoringBody(group: readonly ScoringJob[]): unknown;
  /** Each item's part of a scoring answer, in group order; throws when the answer as a whole is wrong. */
  scoringAnswers(j: unknown, where: string, group: readonly ScoringJob[]): unknown[];
  /** An item's target log-probs from its part; `w` names the endpoint and the item, `g` is its position in the group. */
  targetLogprobs(part: unknown, w: string, x: ScoringJob, g: number): Float32Array;
}

export const isTokenId = (x: unknown): x is number => typeof x === 'number' && Number.isInteger(x) && x >= 0;

/** 'length' unless the server stopped; a stop on an eos id is 'eos'. */
export function finishOf(ids: readonly number[], stopped: boolean, eos: ReadonlySet<number>): GenerationFinish {
  if (!stopped) return 'length';
  return ids.length > 0 && eos.has(ids[ids.length - 1]!) ? 'eos' : 'stop';
}

/** Explicit top_k: mempo's 0 (off) is the servers' -1. */
export const serverTopK = (topK: number): number => (topK > 0 ? topK : -1);

/**
 * Sampling settings of scoring requests: temperature 1 and no top-p / top-k / penalty, so that
 * servers that post-process log-probs (vLLM --logprobs-mode processed_logprobs, SGLang's
 * temperature-normalised log-probs) still report the model's own log π. The one generated token
 * is not used.
 */
export const NEUTRAL_SCORING = {
  vllm: { max_tokens: 1, temperature: 1, top_p: 1, top_k: -1, repetition_penalty: 1 },
  sglang: { max_new_tokens: 1, temperature: 1, top_p: 1, top_k: -1, repetition_penalty: 1 },
};
