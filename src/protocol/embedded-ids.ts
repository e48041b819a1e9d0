/**
 * Ids of the embedded tokenizer models/mempo-tiny only: it gives `SPECIAL_TOKENS[i]` the id i.
 * Any other tokenizer: `resolveProtocolIds(codec, config)` (special-ids.ts), which resolves these
 * same ids for mempo-tiny (a test checks it).
 */
import { ANSWER_CLOSE, SEARCH_CLOSE, SPECIAL_TOKENS, type SpecialToken } from './tags';

/** Token id of every special token in models/mempo-tiny. */
export const SPECIAL_TOKEN_IDS: Readonly<Record<SpecialToken, number>> = Object.freeze(
  Object.fromEntries(SPECIAL_TOKENS.map((t, i) => [t, i])) as Record<SpecialToken, number>,
);

export const EOS_TOKEN_ID = 0;
export const PAD_TOKEN_ID = 0;
export const BOS_TOKEN_ID = 0;
export const IM_START_ID = 1;
export const IM_END_ID = 2;

/** Token ids that end a round's generation (docs/algorithm.md §1). */
export const STOP_TOKEN_IDS = [
  SPECIAL_TOKEN_IDS[SEARCH_CLOSE],
  SPECIAL_TOKEN_IDS[ANSWER_CLOSE],
] as const;
/** Extra ids a sampler should treat as end of round (model misbehaving): eos and `<|im_end|>`. */
export const FALLBACK_STOP_TOKEN_IDS = [EOS_TOKEN_ID, IM_END_ID] as const;
