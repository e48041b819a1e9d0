/**
 * Request parsing of POST /v1/chat/completions (OpenAI's shape, with vLLM's `top_k` and
 * `return_token_ids`): messages and tools checked and put in the form chat templates read
 * (transformers' apply_chat_template input: an assistant's tool-call arguments as objects, text
 * content parts joined), sampling knobs checked against the model's limits. Every error names the
 * field at fault (OpenAI's `param`); fields mempo serve does not implement are refused by name.
 */
import { parseJsonObject } from './http';
import {
  bad, MAX_LOGPROBS, MAX_SEED, optBool, optInt, optNum, parseStream, stopStrings, unsupportedUnlessNeutral, type Limits, type StreamRequest,
} from './completions-requests';

/** A message as the chat template gets it. */
export interface TemplateMessage {
  role: string;
  content: string;
  name?: string;
  tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: unknown } }[];
  tool_call_id?: string;
  reasoning_content?: string;
}

/** A tool as the template gets it (OpenAI's `{ type: 'function', function: { name, description?, parameters? } }`). */
export interface TemplateTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean };
}

export interface ChatRequest extends StreamRequest {
  model: string | null;
  messages: TemplateMessage[];
  tools: TemplateTool[] | null;
  /** 'none': the output is never parsed for tool calls (the template still sees the tools). */
  toolChoice: 'auto' | 'none';
  n: number;
  temperature: number;
  topP: number;
  topK: number;
  /** null: up to the end of the model's context. */
  maxTokens: number | null;
  /** The field that set maxTokens (max_tokens or max_completion_tokens), for errors. */
  maxTokensField: string;
  stop: string[];
  seed: number | null;
  logprobs: boolean;
  topLogprobs: number;
  returnTokenIds: boolean;
}

/** Fields read; those accepted but without effect here are the client's bookkeeping (user, metadata, store). */
const CHAT_KEYS = new Set([
  'model', 'messages', 'tools', 'tool_choice', 'parallel_tool_calls', 'n', 'temperature', 'top_p', 'top_k', 'max_tokens',
  'max_completion_tokens', 'stop', 'seed', 'logprobs', 'top_logprobs', 'stream', 'stream_options', 'return_token_ids',
  'user', 'metadata', 'store', 'response_format', 'logit_bias', 'repetition_penalty', 'frequency_penalty', 'presence_penalty', 'min_p',
]);
const ROLES = new Set(['system', 'developer', 'user', 'assistant', 'tool']);
/** OpenAI's rule for function names. */
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A message's content: a string, or text parts joined by newlines (vLLM's "string" content format); null where allowed. */
function contentOf(v: unknown, at: string, nullable: boolean): string {
  if (typeof v === 'string') return v;
  if ((v === null || v === undefined) && nullable) return '';
  if (!Array.isArray(v)) throw bad(at, `expected a string or an array of text parts${nullable ? ' (or null)' : ''}`);
  return v.map((part, i) => {
    if (!isObject(part) || part['type'] !== 'text' || typeof part['text'] !== 'string') {
      const type = isObject(part) ? JSON.stringify(part['type']) : 'not an object';
      throw bad(`${at}[${i}]`, `only text parts { type: 'text', text } are supported by mempo serve, received ${type}`);
    }
    return part['text'] as string;
  }).join('\n');
}

function toolCalls(v: unknown, at: string): NonNullable<TemplateMessage['tool_calls']> {
  if (!Array.isArray(v)) throw bad(at, 'expected an array of { id, type: "function", function: { name, arguments } }');
  return v.map((c, j) => {
    const cat = `${at}[${j}]`;
    if (!isObject(c)) throw bad(cat, 'expected an object');
    if (c['type'] !== undefined && c['type'] !== 'function') throw bad(`${cat}.type`, `only "function" is supported, received ${JSON.stringify(c['type'])}`);
    if (typeof c['id'] !== 'string') throw bad(`${cat}.id`, 'expected a string');
    const f = c['function'];
    if (!isObject(f)) throw bad(`${cat}.function`, 'expected an object { name, arguments }');
    if (typeof f['name'] !== 'string' || f['name'] === '') throw bad(`${cat}.function.name`, 'expected a non-empty string');
    const a = f['arguments'];
    let args: unknown = a;
    // OpenAI sends the arguments as JSON text; templates print them as an object (vLLM parses them too).
    if (typeof a === 'string') {
      try {
        args = JSON.parse(a);
      } catch {
        throw bad(`${cat}.function.arguments`, `expected the JSON text of the arguments, received ${JSON.stringify(a.slice(0, 80))}`);
      }
    }
    if (!isObject(args)) throw bad(`${cat}.function.arguments`, 'expected a JSON object (as text)');
    return { id: c['id'], type: 'function' as const, function: { name: f['name'], arguments: args } };
  });
}

function parseMessages(v: unknown): TemplateMessage[] {
  if (!Array.isArray(v) || v.length === 0) throw bad('messages', 'expected a non-empty array of messages');
  return v.map((m, i) => {
    const at = `messages[${i}]`;
    if (!isObject(m)) throw bad(at, 'expected an object { role, content }');
    const role = m['role'];
    if (typeof role !== 'string' || !ROLES.has(role)) throw bad(`${at}.role`, `expected one of ${[...ROLES].join(', ')}, received ${JSON.stringify(role)}`);
    const calls = role === 'assistant' && m['tool_calls'] !== undefined && m['tool_calls'] !== null ? toolCalls(m['tool_calls'], `${at}.tool_calls`) : undefined;
    if (role !== 'assistant' && m['tool_calls'] !== undefined) throw bad(`${at}.tool_calls`, 'only assistant messages carry tool calls');
    // developer is OpenAI's newer name for system; templates know system.
    const out: TemplateMessage = { role: role === 'developer' ? 'system' : role, content: contentOf(m['content'], `${at}.content`, role === 'assistant') };
    if (m['name'] !== undefined && m['name'] !== null) {
      if (typeof m['name'] !== 'string') throw bad(`${at}.name`, 'expected a string');
      out.name = m['name'];
    }
    if (calls !== undefined && calls.length > 0) out.tool_calls = calls;
    if (role === 'tool') {
      if (typeof m['tool_call_id'] !== 'string') throw bad(`${at}.tool_call_id`, 'expected the id of the tool call this message answers');
      out.tool_call_id = m['tool_call_id'];
    }
    const rc = m['reasoning_content'];
    if (rc !== undefined && rc !== null) {
      if (typeof rc !== 'string' || role !== 'assistant') throw bad(`${at}.reasoning_content`, 'expected a string, on an assistant message');
      out.reasoning_content = rc;
    }
    for (const k of ['audio', 'refusal', 'function_call']) if (m[k] !== undefined && m[k] !== null) throw bad(`${at}.${k}`, 'not supported by mempo serve');
    return out;
  });
}

function parseTools(v: unknown): TemplateTool[] | null {
  if (v === undefined || v === null) return null;
  if (!Array.isArray(v)) throw bad('tools', 'expected an array of { type: "function", function: { name, description?, parameters? } }');
  if (v.length === 0) return null;
  const names = new Set<string>();
  return v.map((t, i) => {
    const at = `tools[${i}]`;
    if (!isObject(t)) throw bad(at, 'expected an object');
    if (t['type'] !== 'function') throw bad(`${at}.type`, `only "function" is supported, received ${JSON.stringify(t['type'])}`);
    const f = t['function'];
    if (!isObject(f)) throw bad(`${at}.function`, 'expected an object { name, description?, parameters? }');
    const name = f['name'];
    if (typeof name !== 'string' || !TOOL_NAME.test(name)) throw bad(`${at}.function.name`, `expected 1-64 letters, digits, _ or -, received ${JSON.stringify(name)}`);
    if (names.has(name)) throw bad(`${at}.function.name`, `${JSON.stringify(name)} is the name of an earlier tool`);
    names.add(name);
    const fn: TemplateTool['function'] = { name };
    if (f['description'] !== undefined && f['description'] !== null) {
      if (typeof f['description'] !== 'string') throw bad(`${at}.function.description`, 'expected a string');
      fn.description = f['description'];
    }
    if (f['parameters'] !== undefined && f['parameters'] !== null) {
      if (!isObject(f['parameters'])) throw bad(`${at}.function.parameters`, 'expected a JSON Schema object');
      fn.parameters = f['parameters'];
    }
    if (typeof f['strict'] === 'boolean') fn.strict = f['strict'];
    return { type: 'function' as const, function: fn };
  });
}

function parseToolChoice(v: unknown, tools: TemplateTool[] | null): 'auto' | 'none' {
  if (v === undefined || v === null || v === 'auto') return 'auto';
  if (v === 'none') return 'none';
  // Forcing a call needs constrained decoding, which the embedded runtime does not have.
  if (v === 'required' || isObject(v)) throw bad('tool_choice', `only "auto" and "none" are supported by mempo serve, received ${JSON.stringify(v)}`);
  throw bad('tool_choice', `expected "auto" or "none", received ${JSON.stringify(v)}${tools === null ? ' (and no tools were given)' : ''}`);
}

/** Checks a /v1/chat/completions body; every message names the field at fault. */
export function parseChatRequest(text: string, o: Limits): ChatRequest {
  const b = parseJsonObject(text);
  for (const k of Object.keys(b)) if (!CHAT_KEYS.has(k)) throw bad(k, 'not supported by mempo serve');
  const model = b['model'];
  if (model !== undefined && model !== null && typeof model !== 'string') throw bad('model', 'expected a string');
  unsupportedUnlessNeutral(b, '');
  const rf = b['response_format'];
  if (rf !== undefined && rf !== null && !(isObject(rf) && rf['type'] === 'text')) throw bad('response_format', 'only { type: "text" } is supported by mempo serve');
  const lb = b['logit_bias'];
  if (lb !== undefined && lb !== null && !(isObject(lb) && Object.keys(lb).length === 0)) throw bad('logit_bias', 'not supported by mempo serve');
  const messages = parseMessages(b['messages']);
  const tools = parseTools(b['tools']);
  const n = optInt(b, 'n', 1, 1, o.maxN) as number;
  const logprobs = optBool(b, 'logprobs');
  const topLogprobs = optInt(b, 'top_logprobs', 0, 0, MAX_LOGPROBS) as number;
  if (topLogprobs > 0 && !logprobs) throw bad('top_logprobs', 'needs "logprobs": true');
  // max_completion_tokens is OpenAI's newer name; the older max_tokens still wins where both are given, as in vLLM.
  const legacy = optInt(b, 'max_tokens', null, 0, o.maxTokens);
  const maxTokens = legacy ?? optInt(b, 'max_completion_tokens', null, 0, o.maxTokens);
  return {
    model: (model as string | undefined) ?? null,
    messages,
    tools,
    toolChoice: parseToolChoice(b['tool_choice'], tools),
    n,
    temperature: optNum(b, 'temperature', 1, 0, 100),
    topP: optNum(b, 'top_p', 1, 0, 1, true),
    topK: Math.max(0, optInt(b, 'top_k', 0, -1, o.vocabSize) as number),
    maxTokens,
    maxTokensField: legacy === null && maxTokens !== null ? 'max_completion_tokens' : 'max_tokens',
    stop: stopStrings(b['stop'], 'stop'),
    seed: optInt(b, 'seed', null, 0, MAX_SEED),
    logprobs,
    topLogprobs,
    returnTokenIds: optBool(b, 'return_token_ids'),
    ...parseStream(b),
  };
}
