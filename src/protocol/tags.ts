/**
 * The MemPO agent text protocol shared by the embedded model (`models/mempo-tiny`), the
 * synthetic world's oracle trajectories (`src/world`) and the runtime / rollout code.
 *
 * SPEC §1 (round format), §2 (snapshots), §4 (memory-reward target), §7 (memory context).
 *
 * Binding layout decisions (the embedded model was trained on exactly this):
 *
 * - Every tag below is ONE special token of the shipped tokenizer (`SPECIAL_TOKEN_IDS`).
 * - A round's generated text has NO whitespace between or inside the tag delimiters:
 *   `<mem>FACTS</mem><think>REASONING</think><search>QUERY</search>` or
 *   `<mem>FACTS</mem><think>REASONING</think><answer>ANSWER</answer>`.
 *   Generation of a round stops at `</search>` / `</answer>` (`STOP_TOKENS`).
 *   The memory-reward target `<answer>{gold}</answer>` therefore follows `</mem>` directly,
 *   exactly like a real answer round does.
 * - An observation is `renderObservation(docs)` = `<information>Doc 1 (Title): contents\n
 *   Doc 2 (Title): contents\n…</information>` (no surrounding whitespace).
 * - `full` policy: the response stream is
 *   `round1 + "\n" + obs1 + "\n" + round2 + "\n" + obs2 + "\n" + … + roundR`
 *   (`OBSERVATION_PREFIX` / `OBSERVATION_SUFFIX`), i.e. the observation segment with
 *   response_mask 0 is `"\n" + obs + "\n"`. The context of round r is
 *   `promptIds + ids(stream so far)`.
 * - `memory` policy (SPEC §7, window 1): round 1 = `promptIds`; round r > 1 =
 *   chat(system, user=question, assistant=round r-1 text, user=round r-1 observation) +
 *   generation prompt (`memoryPolicyMessages`).
 * - Multi-objective answers: all answers in one `<answer>`, in the question's order,
 *   joined by `", "` (`MULTI_ANSWER_SEPARATOR`).
 *
 * Tokenisation is boundary-invariant: every place where two pieces are concatenated
 * (round text / observation / chat markers) is adjacent to a special token, so
 * `encode(a + b)` equals `[...encode(a), ...encode(b)]` for the pieces defined here.
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
export const ANSWER_OPEN = '<answer>';
export const ANSWER_CLOSE = '</answer>';
export const INFORMATION_OPEN = '<information>';
export const INFORMATION_CLOSE = '</information>';

/** All special tokens, in id order: the shipped tokenizer gives token i the id i. */
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

/** Token id of every special token in the shipped tokenizer (`models/mempo-tiny`). */
export const SPECIAL_TOKEN_IDS: Readonly<Record<SpecialToken, number>> = Object.freeze(
  Object.fromEntries(SPECIAL_TOKENS.map((t, i) => [t, i])) as Record<SpecialToken, number>,
);

export const EOS_TOKEN_ID = 0;
export const PAD_TOKEN_ID = 0;
export const BOS_TOKEN_ID = 0;
export const IM_START_ID = 1;
export const IM_END_ID = 2;

/** Strings that end a round's generation (SPEC §1). */
export const STOP_STRINGS = [SEARCH_CLOSE, ANSWER_CLOSE] as const;
/** Token ids that end a round's generation; `<|im_end|>` / eos also stop as a safety net. */
export const STOP_TOKEN_IDS = [
  SPECIAL_TOKEN_IDS[SEARCH_CLOSE],
  SPECIAL_TOKEN_IDS[ANSWER_CLOSE],
] as const;
/** Extra ids a sampler should treat as end of round (model misbehaving). */
export const FALLBACK_STOP_TOKEN_IDS = [EOS_TOKEN_ID, IM_END_ID] as const;

/** Number of documents the retriever returns per search. */
export const DEFAULT_TOPK = 3;
/** Separator between the answers of a multi-objective question. */
export const MULTI_ANSWER_SEPARATOR = ', ';
/** Memory text of round 1 (nothing found yet). */
export const EMPTY_MEMORY = 'none';
/** Memory-reward target template (SPEC §4); `{answer}` is replaced by the gold answer. */
export const ANSWER_TEMPLATE = '<answer>{answer}</answer>';
/** Text inserted before an observation in the `full` policy response stream. */
export const OBSERVATION_PREFIX = '\n';
/** Text inserted after an observation in the `full` policy response stream. */
export const OBSERVATION_SUFFIX = '\n';

/** System prompt of the agent (kept short: it is part of every context). */
export const SYSTEM_PROMPT =
  'Answer with search. Each turn: memory of facts found, thoughts, then a search or the answer.';

export type Role = 'system' | 'user' | 'assistant';
export interface ChatMessage {
  role: Role;
  content: string;
}

/**
 * The Jinja chat template shipped in `tokenizer_config.json` (ChatML, as Qwen2.5 without
 * tools). `renderChat` is its exact TypeScript twin.
 */
export const CHAT_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

/** The generation prompt appended after the last message. */
export const GENERATION_PROMPT = `${IM_START}assistant\n`;

/** Render messages exactly like `CHAT_TEMPLATE` (`apply_chat_template(..., {tokenize:false})`). */
export function renderChat(messages: readonly ChatMessage[], addGenerationPrompt = true): string {
  let s = '';
  for (const m of messages) s += `${IM_START}${m.role}\n${m.content}${IM_END}\n`;
  if (addGenerationPrompt) s += GENERATION_PROMPT;
  return s;
}

/** Messages of the round-1 prompt (both policies): system + question. */
export function promptMessages(question: string, systemPrompt: string = SYSTEM_PROMPT): ChatMessage[] {
  return [
    { role: 'system', content: systemPrompt },
    { role: 'user', content: question },
  ];
}

/** Text of `promptIds`: chat(system, user=question) + generation prompt. */
export function renderPrompt(question: string, systemPrompt: string = SYSTEM_PROMPT): string {
  return renderChat(promptMessages(question, systemPrompt), true);
}

/**
 * Messages of the `memory` policy context for round r > 1 (SPEC §7, window 1): system,
 * question, the previous round's full generated text as assistant, the previous round's
 * observation (`renderObservation` output) as user. Render with the generation prompt.
 */
export function memoryPolicyMessages(
  question: string,
  prevRoundText: string,
  prevObservation: string,
  systemPrompt: string = SYSTEM_PROMPT,
): ChatMessage[] {
  return [
    ...promptMessages(question, systemPrompt),
    { role: 'assistant', content: prevRoundText },
    { role: 'user', content: prevObservation },
  ];
}

/** Text of the `memory` policy context for round r > 1 (with generation prompt). */
export function renderMemoryContext(
  question: string,
  prevRoundText: string,
  prevObservation: string,
  systemPrompt: string = SYSTEM_PROMPT,
): string {
  return renderChat(memoryPolicyMessages(question, prevRoundText, prevObservation, systemPrompt), true);
}

export interface ObservationDoc {
  title: string;
  contents: string;
}

/**
 * Observation block for retrieved documents:
 * `<information>Doc 1 (Title): contents\nDoc 2 (Title): contents</information>`.
 * No results: `<information>No results.</information>`.
 */
export function renderObservation(docs: readonly ObservationDoc[]): string {
  const body = docs.length === 0
    ? 'No results.'
    : docs.map((d, i) => `Doc ${i + 1} (${d.title}): ${d.contents}`).join('\n');
  return `${INFORMATION_OPEN}${body}${INFORMATION_CLOSE}`;
}

/** The `full`-policy stream segment for an observation: `"\n" + obs + "\n"`. */
export function observationSegment(observation: string): string {
  return `${OBSERVATION_PREFIX}${observation}${OBSERVATION_SUFFIX}`;
}

/**
 * Response stream text (`full` policy) from round texts and the observations that followed
 * them (`observations[i]` follows `rounds[i]`; the last round may have none).
 */
export function renderFullStream(rounds: readonly string[], observations: readonly string[]): string {
  let s = '';
  rounds.forEach((r, i) => {
    s += r;
    const o = observations[i];
    if (o !== undefined) s += observationSegment(o);
  });
  return s;
}

/** Text of the `full` policy context at a round: prompt + stream so far. */
export function renderFullContext(
  question: string,
  prevRounds: readonly string[],
  prevObservations: readonly string[],
  systemPrompt: string = SYSTEM_PROMPT,
): string {
  return renderPrompt(question, systemPrompt) + renderFullStream(prevRounds, prevObservations);
}

export type RoundAction = { kind: 'search'; query: string } | { kind: 'answer'; answer: string };

/** Build one round's generated text in the canonical layout. */
export function renderRound(mem: string, think: string, action: RoundAction): string {
  const act = action.kind === 'search'
    ? `${SEARCH_OPEN}${action.query}${SEARCH_CLOSE}`
    : `${ANSWER_OPEN}${action.answer}${ANSWER_CLOSE}`;
  return `${MEM_OPEN}${mem}${MEM_CLOSE}${THINK_OPEN}${think}${THINK_CLOSE}${act}`;
}

/** Memory-reward target for a gold answer (SPEC §4). */
export function renderAnswerTarget(gold: string, template: string = ANSWER_TEMPLATE): string {
  return template.replace('{answer}', gold);
}

export interface ParsedRound {
  mem: string | null;
  think: string | null;
  search: string | null;
  answer: string | null;
}

function between(text: string, open: string, close: string): string | null {
  const a = text.indexOf(open);
  if (a < 0) return null;
  const b = text.indexOf(close, a + open.length);
  if (b < 0) return null;
  return text.slice(a + open.length, b);
}

/** Loose parse of one round's text (first occurrence of each tag; no validation). */
export function parseRound(text: string): ParsedRound {
  return {
    mem: between(text, MEM_OPEN, MEM_CLOSE),
    think: between(text, THINK_OPEN, THINK_CLOSE),
    search: between(text, SEARCH_OPEN, SEARCH_CLOSE),
    answer: between(text, ANSWER_OPEN, ANSWER_CLOSE),
  };
}

/** Split a multi-objective answer into its parts. */
export function splitAnswers(answer: string): string[] {
  return answer.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
}
