/**
 * Chat rendering (docs/algorithm.md §2, §7): the ChatML template the embedded tokenizer ships, the
 * round-1 prompt both policies share, and the `memory` policy context of round r > 1
 * (window 1): chat(system, user=question, assistant=round r-1 text, user=round r-1 observation)
 * plus the generation prompt.
 */
import { IM_END, IM_START } from './tags';

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
 * Messages of the `memory` policy context for round r > 1 (docs/algorithm.md §7, window 1):
 * system, question, the previous round's full generated text as assistant, the previous round's
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
