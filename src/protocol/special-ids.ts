/**
 * The protocol's token ids for any tokenizer and model (docs/algorithm.md §1): eos, padding, the
 * chat's end-of-turn token, and the ids of the tags that end a round. Nothing is assumed about
 * the numbering; for models/mempo-tiny this gives the ids of `embedded-ids.ts`.
 */
import type { TextCodec } from '../contracts';
import {
  ANSWER_CLOSE, ANSWER_OPEN, IM_END, INFORMATION_CLOSE, INFORMATION_OPEN, MEM_CLOSE, MEM_OPEN,
  SEARCH_CLOSE, SEARCH_OPEN, STOP_STRINGS, THINK_CLOSE, THINK_OPEN,
} from './tags';

/** What ids a codec may know besides `tokenId` (the local `Tokenizer` has both). */
export type IdCodec = Pick<TextCodec, 'tokenId'> & {
  readonly eosTokenId?: number | undefined;
  readonly padTokenId?: number | undefined;
};

/** The model's own ids: `readModelConfig`'s `ModelConfig` (config.json + generation_config.json) fits. */
export interface IdConfig {
  /** `eos_token_id` of config.json then generation_config.json, in that order. */
  eosTokenIds?: readonly number[];
  padTokenId?: number | undefined;
}

/**
 * End-of-turn markers of common chat templates, used when the tokenizer has one as a single
 * token: ChatML / Qwen (the protocol's own), Llama 3, Gemma, Phi-3.
 */
export const END_OF_TURN_TOKENS = [IM_END, '<|eot_id|>', '<end_of_turn>', '<|end|>'] as const;

const ROUND_TAGS = [
  MEM_OPEN, MEM_CLOSE, THINK_OPEN, THINK_CLOSE, SEARCH_OPEN, SEARCH_CLOSE,
  ANSWER_OPEN, ANSWER_CLOSE, INFORMATION_OPEN, INFORMATION_CLOSE,
] as const;
export type RoundTag = (typeof ROUND_TAGS)[number];
export type StopString = (typeof STOP_STRINGS)[number];

export interface ProtocolTokenIds {
  /** Ids that end a generation: the config's eos ids, else the tokenizer's eos; may be empty. */
  eosTokenIds: number[];
  /** The primary eos id (`eosTokenIds[0]`). */
  eosTokenId: number | undefined;
  /** Padding: the config's pad id, else the tokenizer's, else the primary eos. */
  padTokenId: number | undefined;
  /** The end-of-turn tokens (`END_OF_TURN_TOKENS`) the tokenizer has as single tokens. */
  endOfTurnIds: number[];
  /** Ids that end a round without a stop tag (the model misbehaving): eos ids, then end-of-turn ids. */
  endOfRoundIds: number[];
  /** Each stop string's id; undefined where the tag is not a single token. */
  stopTagIds: Record<StopString, number | undefined>;
  /** The stop strings that are single tokens, as ids, in `STOP_STRINGS` order. */
  stopTokenIds: number[];
  /** Each round tag's id; undefined where the tag is not a single token. */
  tagIds: Record<RoundTag, number | undefined>;
}

function idOrUndefined(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isInteger(v) && v >= 0 ? v : undefined;
}

function defined(ids: readonly (number | undefined)[]): number[] {
  const out: number[] = [];
  for (const id of ids) if (id !== undefined && !out.includes(id)) out.push(id);
  return out;
}

/** Resolves the protocol's ids from the tokenizer and, when given, the model's config. */
export function resolveProtocolIds(codec: IdCodec, config: IdConfig = {}): ProtocolTokenIds {
  const single = (token: string) => idOrUndefined(codec.tokenId(token));
  const configEos = defined((config.eosTokenIds ?? []).map(idOrUndefined));
  const eosTokenIds = configEos.length > 0 ? configEos : defined([idOrUndefined(codec.eosTokenId)]);
  const eosTokenId = eosTokenIds[0];
  const padTokenId = idOrUndefined(config.padTokenId) ?? idOrUndefined(codec.padTokenId) ?? eosTokenId;
  const endOfTurnIds = defined(END_OF_TURN_TOKENS.map(single));
  const stopTagIds = Object.fromEntries(STOP_STRINGS.map((s) => [s, single(s)])) as Record<StopString, number | undefined>;
  return {
    eosTokenIds,
    eosTokenId,
    padTokenId,
    endOfTurnIds,
    endOfRoundIds: defined([...eosTokenIds, ...endOfTurnIds]),
    stopTagIds,
    stopTokenIds: defined(STOP_STRINGS.map((s) => stopTagIds[s])),
    tagIds: Object.fromEntries(ROUND_TAGS.map((t) => [t, single(t)])) as Record<RoundTag, number | undefined>,
  };
}
