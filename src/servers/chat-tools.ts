/**
 * Tool calls in a model's output, in the format of Qwen's and Hermes' chat templates (the one the
 * template asks the model to use): `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`,
 * one block per call, after any text. Parsed back into OpenAI's `tool_calls` as vLLM's `hermes`
 * parser does: the text before the first block is the content; a block that is not such JSON
 * leaves the whole output as content (the model did not make a call the client could run).
 */
import { randomBytes } from 'node:crypto';

export const TOOL_CALL_OPEN = '<tool_call>';
export const TOOL_CALL_CLOSE = '</tool_call>';

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ParsedOutput {
  /** Text before the first call; null when there is none (OpenAI's content with only tool calls). */
  content: string | null;
  toolCalls: ToolCall[];
}

/** A fresh tool call id (OpenAI's `call_…` form). */
export const toolCallId = (): string => `call_${randomBytes(12).toString('hex')}`;

/**
 * The calls in `text`, or null when it has none or one is malformed. The last block may lack its
 * closing tag (generation stopped on end-of-turn right after the JSON).
 */
export function parseToolCalls(text: string): ParsedOutput | null {
  const first = text.indexOf(TOOL_CALL_OPEN);
  if (first < 0) return null;
  const calls: ToolCall[] = [];
  let at = first;
  while (at < text.length) {
    if (!text.startsWith(TOOL_CALL_OPEN, at)) {
      // Only whitespace may separate (and follow) the blocks.
      if (text.slice(at).trim() === '') break;
      const next = text.indexOf(TOOL_CALL_OPEN, at);
      if (next < 0 || text.slice(at, next).trim() !== '') return null;
      at = next;
      continue;
    }
    const start = at + TOOL_CALL_OPEN.length;
    const close = text.indexOf(TOOL_CALL_CLOSE, start);
    const body = text.slice(start, close < 0 ? text.length : close);
    const call = callOf(body);
    if (call === null) return null;
    calls.push(call);
    at = close < 0 ? text.length : close + TOOL_CALL_CLOSE.length;
  }
  return { content: first > 0 ? text.slice(0, first) : null, toolCalls: calls };
}

function callOf(body: string): ToolCall | null {
  let v: unknown;
  try {
    v = JSON.parse(body);
  } catch {
    return null;
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return null;
  const { name, arguments: args } = v as { name?: unknown; arguments?: unknown };
  if (typeof name !== 'string' || name === '') return null;
  // Arguments are a JSON object in the template's format; OpenAI carries them as its JSON text.
  const argText = args === undefined ? '{}' : typeof args === 'string' ? args : JSON.stringify(args);
  return { id: toolCallId(), type: 'function', function: { name, arguments: argText } };
}
