/**
 * `mempo serve` with real OpenAI clients on loopback, over the embedded model: the `openai` SDK
 * (chat plain, with logprobs, streamed with usage, a tool-call round trip, text completions) and
 * the Vercel AI SDK through @ai-sdk/openai-compatible (generateText, streamText, a tool).
 *
 * The tiny model does not call tools of its own accord, so the tool tests force its output (a
 * logits processor wrapped around the server's, setting the rows to the tokens of a Qwen-style
 * `<tool_call>`): the server, its parsing, the client and the template round trip are real.
 * Expected values come from outside the code under test: hand-written ChatML, the tokenizer's
 * decoding of the returned ids, the teacher-forced scorer's log-probs, and the unstreamed answer
 * for the streamed one (same seed: same tokens).
 */
import type { Server } from 'node:http';
import OpenAI from 'openai';
import { generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { LocalModel } from '../../src/engines/local/local-model';
import type { GenerateOptions, PromptInput } from '../../src/engines/local/generate';
import { createCompletionsServer, listen } from '../../src/servers/completions-server';
import { MODEL_DIR } from '../pipeline/helpers';

const S = 'Answer with search. Each turn: memory of facts found, thoughts, then a search or the answer.';
const Q = 'Where was the founder of Kethfai Company born?';
const CHATML = `<|im_start|>system\n${S}<|im_end|>\n<|im_start|>user\n${Q}<|im_end|>\n<|im_start|>assistant\n`;
const SEARCH_TOOL = {
  type: 'function' as const,
  function: { name: 'search', description: 'Search the corpus', parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] } },
};
const CALL_TEXT = '<tool_call>\n{"name": "search", "arguments": {"query": "Ana Roe"}}\n</tool_call>';

let model: LocalModel;
let server: Server;
let url = '';
let client: OpenAI;
/** Ids the next generate call is made to produce (then it is cleared), the prompts the model saw, decode steps run. */
let forced: number[] | null = null;
const prompts: number[][] = [];
let steps = 0;
const IM_END = 2;

beforeAll(async () => {
  model = await LocalModel.load(MODEL_DIR);
  const lm = model.model;
  const generate = lm.generate.bind(lm);
  lm.generate = (ps: readonly PromptInput[], opts: GenerateOptions) => {
    ps.forEach((p) => prompts.push(Array.from((p as { ids: ArrayLike<number> }).ids)));
    const want = forced;
    forced = null;
    const inner = opts.logitsProcessor;
    return generate(ps, {
      ...opts,
      logitsProcessor: (row, i, gen) => {
        steps++;
        if (want !== null && gen.length < want.length) {
          row.fill(-100);
          row[want[gen.length]!] = 100;
        }
        inner?.(row, i, gen);
      },
    });
  };
  server = createCompletionsServer(model, { maxConcurrency: 1 });
  url = await listen(server, 0);
  client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await model.dispose();
});

const tok = () => model.model.tokenizer!;
/** The content a chat answer's ids show: without the end-of-turn token. */
const contentOf = (ids: number[]) => tok().decode(ids[ids.length - 1] === IM_END || ids[ids.length - 1] === 0 ? ids.slice(0, -1) : ids);
const chatBody = { model: 'mempo-tiny', messages: [{ role: 'system' as const, content: S }, { role: 'user' as const, content: Q }] };

type Extra = { prompt_token_ids: number[]; choices: { token_ids: number[] }[] };

describe('the openai SDK', () => {
  it('chat.completions.create: the ChatML prompt, content = decoded ids, usage, logprobs the scorer gives', async () => {
    const c = await client.chat.completions.create({ ...chatBody, seed: 7, max_tokens: 40, logprobs: true, top_logprobs: 3, return_token_ids: true } as never) as OpenAI.ChatCompletion & Extra;
    expect(tok().decode(c.prompt_token_ids)).toBe(CHATML);
    const ids = c.choices[0]!.token_ids;
    const msg = c.choices[0]!.message;
    expect(ids.length).toBeGreaterThan(0);
    expect(msg.content).toBe(contentOf(ids));
    expect(c.usage).toEqual({ prompt_tokens: c.prompt_token_ids.length, completion_tokens: ids.length, total_tokens: c.prompt_token_ids.length + ids.length });
    const lps = c.choices[0]!.logprobs!.content!;
    expect(lps.map((e) => e.token)).toEqual(ids.map((id) => tok().piece(id)));
    const [scored] = await model.model.scoreTargets([{ contextIds: c.prompt_token_ids, targetIds: ids }]);
    lps.forEach((e, i) => {
      expect(Math.abs(e.logprob - scored![i]!)).toBeLessThan(2e-3);
      expect(e.top_logprobs).toHaveLength(3);
      const tops = e.top_logprobs.map((t) => t.logprob);
      expect([...tops].sort((a, b) => b - a)).toEqual(tops);
      expect(e.logprob).toBeLessThanOrEqual(tops[0]! + 1e-6);
      const same = e.top_logprobs.find((t) => t.token === e.token);
      if (same) expect(same.logprob).toBe(e.logprob);
    });
    expect(['stop', 'length']).toContain(c.choices[0]!.finish_reason);
  });

  it('stream with include_usage gives the unstreamed answer token for token (n = 2, same seed)', async () => {
    const body = { ...chatBody, seed: 11, n: 2, max_tokens: 30, logprobs: true, return_token_ids: true };
    const whole = await client.chat.completions.create(body as never) as OpenAI.ChatCompletion & Extra;
    const stream = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } } as never) as unknown as AsyncIterable<OpenAI.ChatCompletionChunk & { prompt_token_ids?: number[] }>;
    const text = ['', ''];
    const ids: number[][] = [[], []];
    const lps: number[][] = [[], []];
    const finish: (string | null)[] = [null, null];
    const chunks: (OpenAI.ChatCompletionChunk & { prompt_token_ids?: number[] })[] = [];
    for await (const ch of stream) {
      chunks.push(ch);
      for (const c of ch.choices as (OpenAI.ChatCompletionChunk.Choice & { token_ids?: number[] })[]) {
        text[c.index] += c.delta.content ?? '';
        ids[c.index]!.push(...(c.token_ids ?? []));
        lps[c.index]!.push(...(c.logprobs?.content ?? []).map((e) => e.logprob));
        if (c.finish_reason) finish[c.index] = c.finish_reason;
      }
    }
    expect(chunks[0]!.prompt_token_ids).toEqual(whole.prompt_token_ids);
    for (const k of [0, 1]) {
      const w = whole.choices[k]!;
      expect(ids[k]).toEqual(w.token_ids);
      expect(text[k]).toBe(w.message.content);
      expect(lps[k]).toEqual(w.logprobs!.content!.map((e) => e.logprob));
      expect(finish[k]).toBe(w.finish_reason);
    }
    expect(whole.choices[0]!.token_ids).not.toEqual(whole.choices[1]!.token_ids);
    const last = chunks[chunks.length - 1]!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toEqual(whole.usage);
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
  });

  it('a tool call round trip: <tool_call> parsed into tool_calls, the result rendered back, the prompt extends the last one', async () => {
    const callIds = [...tok().encode(CALL_TEXT), IM_END];
    forced = callIds;
    const first = await client.chat.completions.create({ ...chatBody, tools: [SEARCH_TOOL], seed: 1, return_token_ids: true } as never) as OpenAI.ChatCompletion & Extra;
    const choice = first.choices[0]!;
    expect(choice.token_ids).toEqual(callIds);
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBeNull();
    const calls = choice.message.tool_calls as OpenAI.ChatCompletionMessageFunctionToolCall[];
    expect(calls).toHaveLength(1);
    expect(calls[0]!.type).toBe('function');
    expect(calls[0]!.id).toMatch(/^call_/);
    expect(calls[0]!.function.name).toBe('search');
    expect(JSON.parse(calls[0]!.function.arguments)).toEqual({ query: 'Ana Roe' });
    // The tools are in the prompt the way Qwen's template puts them.
    expect(tok().decode(first.prompt_token_ids)).toContain(`<tools>\n${JSON.stringify(SEARCH_TOOL).replace(/":/g, '": ').replace(/,"/g, ', "')}\n</tools>`);

    const second = await client.chat.completions.create({
      ...chatBody,
      tools: [SEARCH_TOOL],
      seed: 1,
      max_tokens: 5,
      return_token_ids: true,
      messages: [...chatBody.messages, choice.message, { role: 'tool', tool_call_id: calls[0]!.id, content: 'Ana Roe was born in Lisbon.' }],
    } as never) as OpenAI.ChatCompletion & Extra;
    const p2 = second.prompt_token_ids;
    // Token-exact: the second prompt is the first prompt, the sampled call, then the tool's answer.
    expect(p2.slice(0, first.prompt_token_ids.length + callIds.length)).toEqual([...first.prompt_token_ids, ...callIds]);
    expect(tok().decode(p2.slice(first.prompt_token_ids.length + callIds.length))).toBe('\n<|im_start|>user\n<tool_response>\nAna Roe was born in Lisbon.\n</tool_response><|im_end|>\n<|im_start|>assistant\n');
  });

  it('a streamed tool call arrives as a tool_calls delta, no content', async () => {
    forced = [...tok().encode(`Let me look.\n${CALL_TEXT}`), IM_END];
    const stream = await client.chat.completions.create({ ...chatBody, tools: [SEARCH_TOOL], seed: 1, stream: true });
    let content = '';
    const deltas: OpenAI.ChatCompletionChunk.Choice.Delta.ToolCall[] = [];
    let finish: string | null = null;
    for await (const ch of stream) {
      for (const c of ch.choices) {
        content += c.delta.content ?? '';
        deltas.push(...(c.delta.tool_calls ?? []));
        finish = c.finish_reason ?? finish;
      }
    }
    expect(content).toBe('Let me look.\n');
    expect(finish).toBe('tool_calls');
    expect(deltas).toHaveLength(1);
    expect(deltas[0]!.function!.name).toBe('search');
    expect(JSON.parse(deltas[0]!.function!.arguments!)).toEqual({ query: 'Ana Roe' });
  });

  it('completions.create with a text prompt equals the same prompt as ids; streamed, the same text and ids', async () => {
    const prompt = 'In which country is Mamek?';
    type Cmpl = OpenAI.Completion & { choices: { token_ids: number[]; prompt_token_ids: number[] }[] };
    const byText = await client.completions.create({ model: 'mempo-tiny', prompt, max_tokens: 12, seed: 5, logprobs: 1, return_token_ids: true } as never) as Cmpl;
    const c = byText.choices[0]!;
    expect(tok().decode(c.prompt_token_ids)).toBe(prompt);
    expect(byText.usage!.prompt_tokens).toBe(c.prompt_token_ids.length);
    expect(c.text).toBe(tok().decode(c.token_ids));
    const byIds = await client.completions.create({ model: 'mempo-tiny', prompt: c.prompt_token_ids, max_tokens: 12, seed: 5, return_token_ids: true } as never) as Cmpl;
    expect(byIds.choices[0]!.token_ids).toEqual(c.token_ids);
    expect(byIds.choices[0]!.text).toBe(c.text);

    const stream = await client.completions.create({ model: 'mempo-tiny', prompt, max_tokens: 12, seed: 5, logprobs: 1, return_token_ids: true, stream: true, stream_options: { include_usage: true } } as never) as unknown as AsyncIterable<OpenAI.Completion & { choices: { token_ids?: number[] }[] }>;
    let text = '';
    const ids: number[] = [];
    const lps: number[] = [];
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const ch of stream) {
      for (const x of ch.choices) {
        text += x.text;
        ids.push(...(x.token_ids ?? []));
        lps.push(...(x.logprobs?.token_logprobs ?? []));
      }
      if (ch.usage) usage = ch.usage;
    }
    expect(text).toBe(c.text);
    expect(ids).toEqual(c.token_ids);
    expect(lps).toEqual(c.logprobs!.token_logprobs);
    expect(usage).toEqual(byText.usage);

    const two = await client.completions.create({ model: 'mempo-tiny', prompt: [prompt, 'Who published The Hollow Winter?'], max_tokens: 3, seed: 5 });
    expect(two.choices.map((x) => x.index)).toEqual([0, 1]);
  });

  it('a client that disconnects mid-stream stops the sampling', async () => {
    const ac = new AbortController();
    // 1500 tokens that never end the turn: only the disconnect can stop it early.
    forced = new Array<number>(1500).fill(tok().encode(' a')[0]!);
    const stream = await client.chat.completions.create({ ...chatBody, seed: 3, max_tokens: 1500, stream: true }, { signal: ac.signal });
    const before = steps;
    let chunks = 0;
    try {
      for await (const _ of stream) if (++chunks === 4) ac.abort();
    } catch {
      // The SDK may end the loop or throw on abort; either way the connection is gone.
    }
    expect(chunks).toBe(4);
    await new Promise((r) => setTimeout(r, 300));
    const after = steps;
    await new Promise((r) => setTimeout(r, 300));
    expect(steps).toBe(after);
    expect(after - before).toBeLessThan(200);
    // The server is free for the next client.
    const next = await client.chat.completions.create({ ...chatBody, max_tokens: 2, seed: 1 });
    expect(next.choices).toHaveLength(1);
  });

  it('stop strings end the content before them (stop_reason names the string), streamed or not', async () => {
    const body = { ...chatBody, seed: 3, max_tokens: 120, stop: ['</search>', '</answer>'], return_token_ids: true };
    const whole = await client.chat.completions.create(body as never) as OpenAI.ChatCompletion & Extra;
    const c = whole.choices[0]! as OpenAI.ChatCompletion.Choice & { token_ids: number[]; stop_reason: unknown };
    expect(c.finish_reason).toBe('stop');
    const all = tok().decode(c.token_ids);
    expect(all.endsWith(String(c.stop_reason))).toBe(true);
    expect(c.message.content).toBe(all.slice(0, all.length - String(c.stop_reason).length));
    expect(c.message.content).toContain('<search>');
    const stream = await client.chat.completions.create({ ...body, stream: true } as never) as unknown as AsyncIterable<OpenAI.ChatCompletionChunk>;
    let text = '';
    for await (const ch of stream) for (const x of ch.choices) text += x.delta.content ?? '';
    expect(text).toBe(c.message.content);
  });

  it('an error after a stream began is its last event, in the error shape (weights swapped with abort_all_requests)', async () => {
    forced = new Array<number>(1500).fill(tok().encode(' a')[0]!);
    const res = await fetch(`${url}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ ...chatBody, max_tokens: 1500, stream: true }) });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const reader = res.body!.getReader();
    let text = '';
    let swapped: Promise<Response> | undefined;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += Buffer.from(value).toString('utf8');
      swapped ??= fetch(`${url}/update_weights_from_disk`, { method: 'POST', body: JSON.stringify({ model_path: MODEL_DIR, abort_all_requests: true }) });
    }
    expect((await swapped!).status).toBe(200);
    const events = text.split('\n\n').filter((e) => e !== '');
    expect(events[events.length - 1]).toBe('data: [DONE]');
    const err = JSON.parse(events[events.length - 2]!.slice('data: '.length)) as { error: { code: number; type: string } };
    expect(err.error).toMatchObject({ code: 503, type: 'server_error' });
  });

  it("errors come in OpenAI's shape, param naming the field", async () => {
    const err = await client.chat.completions.create({ model: 'mempo-tiny', messages: [{ role: 'robot' as never, content: 'x' }] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    const e = err as InstanceType<typeof OpenAI.BadRequestError>;
    expect(e.status).toBe(400);
    expect(e.param).toBe('messages[0].role');
    expect(e.type).toBe('invalid_request_error');
    expect(e.error).toMatchObject({ param: 'messages[0].role', code: 400 });
    const wrongModel = await client.chat.completions.create({ ...chatBody, model: 'gpt-4o' }).catch((x: unknown) => x) as InstanceType<typeof OpenAI.BadRequestError>;
    expect(wrongModel.param).toBe('model');
    const badStream = await client.completions.create({ model: 'mempo-tiny', prompt: 'x', stream: true, echo: true }).catch((x: unknown) => x) as InstanceType<typeof OpenAI.BadRequestError>;
    expect(badStream.status).toBe(400);
    expect(badStream.param).toBe('echo');
    const res = await fetch(`${url}/v1/responses`, { method: 'POST', body: '{}' });
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: unknown }).error).toMatchObject({ type: 'not_found_error', param: null, code: 404 });
  });
});

describe('the Vercel AI SDK (@ai-sdk/openai-compatible)', () => {
  const provider = () => createOpenAICompatible({ name: 'mempo', baseURL: `${url}/v1`, includeUsage: true });
  const searchTool = (seen: string[]) => tool({
    description: 'Search the corpus',
    inputSchema: jsonSchema<{ query: string }>({ type: 'object', properties: { query: { type: 'string' } }, required: ['query'] }),
    execute: async ({ query }) => {
      seen.push(query);
      return 'Ana Roe was born in Lisbon.';
    },
  });

  it('generateText and streamText give the openai SDK answer for the same seed', async () => {
    const ref = await client.chat.completions.create({ ...chatBody, seed: 21, max_tokens: 25, temperature: 0.8 });
    const settings = { model: provider()('mempo-tiny'), system: S, prompt: Q, seed: 21, maxOutputTokens: 25, temperature: 0.8, maxRetries: 0 };
    const gen = await generateText(settings);
    expect(gen.text).toBe(ref.choices[0]!.message.content);
    expect(gen.usage.inputTokens).toBe(ref.usage!.prompt_tokens);
    expect(gen.usage.outputTokens).toBe(ref.usage!.completion_tokens);
    const st = streamText(settings);
    expect(await st.text).toBe(ref.choices[0]!.message.content);
    expect((await st.usage).outputTokens).toBe(ref.usage!.completion_tokens);
  });

  it('generateText with a tool: the call is executed and its result goes back into the prompt', async () => {
    const seen: string[] = [];
    forced = [...tok().encode(CALL_TEXT), IM_END];
    const n0 = prompts.length;
    const r = await generateText({ model: provider()('mempo-tiny'), system: S, prompt: Q, seed: 2, maxOutputTokens: 100, tools: { search: searchTool(seen) }, stopWhen: stepCountIs(2), maxRetries: 0 });
    expect(seen).toEqual(['Ana Roe']);
    expect(r.steps).toHaveLength(2);
    expect(r.steps[0]!.finishReason).toBe('tool-calls');
    expect(r.steps[0]!.toolCalls.map((c) => [c.toolName, c.input])).toEqual([['search', { query: 'Ana Roe' }]]);
    const second = tok().decode(prompts[n0 + 1]!);
    expect(second).toContain(`<|im_start|>assistant\n${CALL_TEXT}<|im_end|>\n<|im_start|>user\n<tool_response>\n`);
    expect(second).toContain('Ana Roe was born in Lisbon.');
  });

  it('streamText with a tool: the streamed call is executed too', async () => {
    const seen: string[] = [];
    forced = [...tok().encode(CALL_TEXT), IM_END];
    const r = streamText({ model: provider()('mempo-tiny'), system: S, prompt: Q, seed: 2, maxOutputTokens: 100, tools: { search: searchTool(seen) }, stopWhen: stepCountIs(2), maxRetries: 0 });
    const steps = await r.steps;
    expect(seen).toEqual(['Ana Roe']);
    expect(steps).toHaveLength(2);
    expect(steps[0]!.finishReason).toBe('tool-calls');
  });
});
