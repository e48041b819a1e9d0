/**
 * The tag strings of the MemPO agent protocol (docs/algorithm.md §1) and the strings that end a
 * round's generation. Ids are not here: the embedded model's are in `embedded-ids.ts`, any other
 * tokenizer's come from `resolveProtocolIds` (`special-ids.ts`).
 *
 * A round's generated text has no whitespace between or inside the tag delimiters:
 * `<mem>FACTS</mem><think>REASONING</think><search>QUERY</search>`,
 * `<mem>FACTS</mem><think>REASONING</think><access>URL</access>` (with a page tool) or
 * `<mem>FACTS</mem><think>REASONING</think><answer>ANSWER</answer>` (`grammar.ts` is the rule).
 * Every place where two pieces are concatenated (round text / observation / chat markers) is next
 * to one of these tags, so with a tokenizer that has them as single tokens `encode(a + b)` equals
 * `[...encode(a), ...encode(b)]`.
 */

/** End of text; also the padding token. */
export const EOS_TOKEN = '<|endoftext|>';
export const PAD_TOKEN = EOS_TOKEN;
export const IM_START = '<|im_start|>';
export const IM_END = '<|im_end|>';

export const MEM_OPEN = '<mem>';
export const MEM_CLOSE = '</mem>';
export const THINK_OPEN = '<think>';
export const THINK_CLOSE = '</think>';
export const SEARCH_OPEN = '<search>';
export const SEARCH_CLOSE = '</search>';
/** The page tool's tags: not in `SPECIAL_TOKENS` (the embedded tokenizer spells them with ordinary tokens). */
export const ACCESS_OPEN = '<access>';
export const ACCESS_CLOSE = '</access>';
export const ANSWER_OPEN = '<answer>';
export const ANSWER_CLOSE = '</answer>';
export const INFORMATION_OPEN = '<information>';
export const INFORMATION_CLOSE = '</information>';

/** The chat markers and protocol tags, in the order the embedded tokenizer numbers them. */
export const SPECIAL_TOKENS = [
  EOS_TOKEN,
  IM_START,
  IM_END,
  MEM_OPEN,
  MEM_CLOSE,
  THINK_OPEN,
  THINK_CLOSE,
  SEARCH_OPEN,
  SEARCH_CLOSE,
  ANSWER_OPEN,
  ANSWER_CLOSE,
  INFORMATION_OPEN,
  INFORMATION_CLOSE,
] as const;

export type SpecialToken = (typeof SPECIAL_TOKENS)[number];

/** Strings that end a round's generation (docs/algorithm.md §1), ASearcher's three. */
export const STOP_STRINGS = [SEARCH_CLOSE, ACCESS_CLOSE, ANSWER_CLOSE] as const;
