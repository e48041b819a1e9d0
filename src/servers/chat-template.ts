/**
 * Chat messages and tools to prompt ids with the served model's own chat template, as vLLM's
 * chat endpoint does it (transformers' apply_chat_template): the template gets `messages`
 * (tool calls included), `tools`, `add_generation_prompt`, and the tokenizer's bos/eos tokens;
 * the rendered text is tokenized without adding special tokens (the template writes them).
 *
 * The embedded model's template is plain ChatML and ignores tools. For it, a request with tools,
 * tool calls or tool results is rendered with `CHATML_TOOLS_TEMPLATE`: the same bytes for plain
 * messages, and Qwen's tool format (Qwen2.5/Qwen3 templates: tools in the system turn, calls as
 * `<tool_call>` JSON, results as `<tool_response>` user turns) for the rest. Any other template
 * that does not read `tools` (or `tool_calls`) refuses such a request rather than silently drop
 * what the model should have seen.
 */
import type { Template } from '@huggingface/jinja';
import type { Tokenizer } from '../engines/local/tokenizer';
import { MempoError } from '../errors';
import { CHAT_TEMPLATE } from '../protocol/chat';
import { bad, FieldError } from './completions-requests';
import type { TemplateMessage, TemplateTool } from './chat-requests';

/** mempo's ChatML extended with Qwen's tool format; without tools it renders exactly `CHAT_TEMPLATE`. */
export const CHATML_TOOLS_TEMPLATE = [
  "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}",
  "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}",
  "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}",
  "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}",
  '{%- endif %}',
  '{%- for message in messages %}',
  "{%- if message.role == 'system' and loop.first and tools %}",
  "{%- elif message.role == 'assistant' %}{{- '<|im_start|>assistant\\n' + message.content }}",
  '{%- if message.tool_calls %}{%- for tool_call in message.tool_calls %}',
  "{%- if (loop.first and message.content) or (not loop.first) %}{{- '\\n' }}{%- endif %}",
  "{{- '<tool_call>\\n{\"name\": \"' + tool_call.function.name + '\", \"arguments\": ' }}{{- tool_call.function.arguments | tojson }}{{- '}\\n</tool_call>' }}",
  '{%- endfor %}{%- endif %}',
  "{{- '<|im_end|>\\n' }}",
  "{%- elif message.role == 'tool' %}",
  "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}",
  "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}",
  "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}",
  "{%- else %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}",
  '{%- endif %}{%- endfor %}',
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}",
].join('');

let TemplateClass: (new (source: string) => Template) | undefined;
function compile(source: string): Template {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  TemplateClass ??= (require('@huggingface/jinja') as { Template: new (source: string) => Template }).Template;
  return new TemplateClass(source);
}

/** Checks that a template parses (`mempo serve --chat-template` before the model loads); `where` names its source. */
export function checkChatTemplate(source: string, where: string): void {
  try {
    compile(source);
  } catch (err) {
    throw new MempoError('ERR_INVALID_OPTION', `${where}: the chat template does not parse: ${(err as Error).message}`);
  }
}

/** Whether a request needs a template that knows tools: tools given, or tool calls / results in the conversation. */
function toolContent(messages: readonly TemplateMessage[], tools: readonly TemplateTool[] | null): string | null {
  if (tools !== null) return 'tools';
  const i = messages.findIndex((m) => m.tool_calls !== undefined || m.role === 'tool');
  if (i < 0) return null;
  return messages[i]!.role === 'tool' ? `messages[${i}].role` : `messages[${i}].tool_calls`;
}

export class ChatTemplater {
  private readonly compiled = new Map<string, Template>();
  /** The template used for requests without tool content (the model's own, or the override). */
  readonly source: string | undefined;
  private readonly tokens: Record<string, string> = {};

  /** `override`: a template to use instead of the model's (`mempo serve --chat-template`). */
  constructor(private readonly tok: Tokenizer, override?: string) {
    this.source = override ?? tok.chatTemplate;
    // The special tokens templates read by name (Llama 3's bos_token); their text is the token's piece.
    if (tok.bosTokenId !== undefined) this.tokens['bos_token'] = tok.piece(tok.bosTokenId);
    if (tok.eosTokenId !== undefined) this.tokens['eos_token'] = tok.piece(tok.eosTokenId);
    if (this.source !== undefined) this.template(this.source, false);
  }

  private template(source: string, request: boolean): Template {
    let t = this.compiled.get(source);
    if (t === undefined) {
      try {
        t = compile(source);
      } catch (err) {
        const msg = `the chat template does not parse: ${(err as Error).message}`;
        throw request ? new FieldError(500, 'messages', msg) : new MempoError('ERR_INVALID_OPTION', msg);
      }
      this.compiled.set(source, t);
    }
    return t;
  }

  /** The template a request is rendered with; a 400 naming the field when it cannot render what the request holds. */
  private sourceFor(messages: readonly TemplateMessage[], tools: readonly TemplateTool[] | null): string {
    if (this.source === undefined) throw bad('messages', `the model in ${this.tok.dir} has no chat template; start mempo serve with --chat-template <file>, or use /v1/completions`);
    const field = toolContent(messages, tools);
    if (field === null) return this.source;
    if (this.source === CHAT_TEMPLATE) return CHATML_TOOLS_TEMPLATE;
    const reads = field === 'tools' ? /\btools\b/ : /\btool_calls\b|\btool\b/;
    if (!reads.test(this.source)) throw bad(field, "the model's chat template does not render tools; start mempo serve with --chat-template <file> whose template does");
    return this.source;
  }

  /** The prompt text of a conversation, ending with the assistant's generation prompt. */
  render(messages: readonly TemplateMessage[], tools: readonly TemplateTool[] | null): string {
    const source = this.sourceFor(messages, tools);
    try {
      return this.template(source, true).render({ messages, tools, add_generation_prompt: true, documents: null, ...this.tokens });
    } catch (err) {
      if (err instanceof FieldError) throw err;
      // A template's raise_exception (e.g. "roles must alternate") is about the conversation.
      throw bad('messages', `the chat template refused the conversation: ${(err as Error).message}`);
    }
  }

  /** Prompt ids of a conversation (the template writes the special tokens). */
  encode(messages: readonly TemplateMessage[], tools: readonly TemplateTool[] | null): number[] {
    return this.tok.encode(this.render(messages, tools), { addSpecialTokens: false });
  }
}
