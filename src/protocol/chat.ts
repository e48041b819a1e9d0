/**
 * Chat rendering (docs/algorithm.md §1, §7): the round-1 prompt both policies share and the
 * `memory` policy context of round r > 1 (window 1): chat(system, user=question, assistant=round
 * r-1 text, user=round r-1 observation) plus the generation prompt, rendered by a `ChatRenderer`:
 * the model's own template (`rollout.chatTemplate: 'model'`) or mempo's plain ChatML (`'chatml'`,
 * the template the embedded tokenizer ships).
 */
import { IM_END, IM_START } from './tags';
import { MempoError } from '../errors';
import type { TextCodec } from '../contracts';

/** System prompt of the agent (kept short: it is part of every context). */
export const SYSTEM_PROMPT =
  'Answer with search. Each turn: memory of facts found, thoughts, then a search or the answer.';

/** System prompt of an agent that also has the page tool (`<access>URL</access>`, options.tool.access). */
export const ACCESS_SYSTEM_PROMPT =
  'Answer with search and pages. Each turn: memory of facts found, thoughts, then a search, a page access or the answer.';

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

/** Turns chat messages into the text that is tokenised (docs/algorithm.md §1). */
export interface ChatRenderer {
  readonly kind: ChatTemplateMode;
  render(messages: readonly ChatMessage[], addGenerationPrompt: boolean): string;
}

/** `rollout.chatTemplate`: the model's own template, or mempo's plain ChatML. */
export type ChatTemplateMode = 'model' | 'chatml';

/** mempo's ChatML twin (`renderChat`). */
export const CHATML_RENDERER: ChatRenderer = Object.freeze({ kind: 'chatml', render: renderChat });

/** What the model renderer needs from a codec. */
export type ChatCodec = Pick<TextCodec, 'chatTemplate' | 'renderChat'>;

/**
 * The model's own template. [decided] docs/algorithm.md §7: an assistant turn is a whole round
 * and is kept verbatim; it goes with an empty `reasoning_content` so that templates which split
 * reasoning off at `</think>` (Qwen3 drops everything up to it, `<mem>` included, in turns before
 * the last user message) keep it. A template that still drops an assistant turn's text is an error.
 */
function modelRenderer(render: NonNullable<ChatCodec['renderChat']>): ChatRenderer {
  return Object.freeze({
    kind: 'model' as const,
    render(messages: readonly ChatMessage[], addGenerationPrompt: boolean): string {
      const turns = messages.map((m) => (m.role === 'assistant'
        ? { role: m.role, content: m.content, reasoning_content: '' }
        : { role: m.role, content: m.content }));
      const text = render(turns, { addGenerationPrompt });
      // Templates may trim a message (Llama 3 does), never cut into it.
      const lost = messages.findIndex((m) => m.role === 'assistant' && !text.includes(m.content.trim()));
      if (lost >= 0) {
        throw new MempoError(
          'ERR_TOKENIZER_PROTOCOL',
          `The model's chat template drops part of assistant message ${lost} (a previous round, docs/algorithm.md §7); use --chat-template chatml (rollout.chatTemplate: 'chatml')`,
        );
      }
      return text;
    },
  });
}

/**
 * The renderer `rollout.chatTemplate` asks for: the codec's own template for 'model', ChatML for
 * 'chatml' or when the codec has no template (a scripted codec, a tokenizer without one).
 */
export function chatRendererFor(codec: ChatCodec, mode: ChatTemplateMode): ChatRenderer {
  if (mode === 'chatml' || codec.chatTemplate === undefined || typeof codec.renderChat !== 'function') return CHATML_RENDERER;
  return modelRenderer(codec.renderChat.bind(codec));
}

/** Messages of the round-1 prompt (both policies): system + question. */
export function promptMessages(question: string, systemPrompt: string = SYSTEM_PROMPT): ChatMessage[] {
  return [
    { role: 'system', content: systemPrompt },
    { role: 'user', content: question },
  ];
}

/** Text of `promptIds`: chat(system, user=question) + generation prompt. */
export function renderPrompt(question: string, systemPrompt: string = SYSTEM_PROMPT, renderer: ChatRenderer = CHATML_RENDERER): string {
  return renderer.render(promptMessages(question, systemPrompt), true);
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
  renderer: ChatRenderer = CHATML_RENDERER,
): string {
  return renderer.render(memoryPolicyMessages(question, prevRoundText, prevObservation, systemPrompt), true);
}
