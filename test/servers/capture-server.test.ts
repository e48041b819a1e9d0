/**
 * Capture on `mempo serve` (src/servers/capture-hook.ts) with the real `openai` SDK as client on
 * loopback, over the embedded model. The expected values are what the client was answered
 * (return_token_ids' ids, the logprobs of the answer), never the recorder's own numbers: the
 * recorder must hold exactly what the client saw, and the streamed call what the unstreamed one
 * with the same seed holds.
 */
import type { Server } from 'node:http';
import OpenAI from 'openai';
import { EpisodeRecorder, type CapturedEpisode } from '../../src/agents/capture';
import { collectEpisodes } from '../../src/agents/collect';
import { LocalModel } from '../../src/engines/local/local-model';
import { createCompletionsServer, listen } from '../../src/servers/completions-server';
import { MODEL_DIR } from '../pipeline/helpers';

let model: LocalModel;
let server: Server;
let url = '';
let recorder: EpisodeRecorder;
const finished: CapturedEpisode[] = [];

beforeAll(async () => {
  model = await LocalModel.load(MODEL_DIR);
  recorder = new EpisodeRecorder();
  server = createCompletionsServer(model, { maxConcurrency: 2, recorder, onEpisodeFinished: (e) => void finished.push(e) });
  url = await listen(server, 0);
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await model.dispose();
});

const client = (episode?: string) => new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0, ...(episode === undefined ? {} : { defaultHeaders: { 'x-mempo-episode': episode } }) });
const messages = [{ role: 'system' as const, content: 'Answer with search.' }, { role: 'user' as const, content: 'Where was the founder of Kethfai Company born?' }];
type Extra = { prompt_token_ids: number[]; choices: { token_ids: number[] }[] };
const extra = { return_token_ids: true } as Record<string, unknown>;

describe('capture over the openai SDK', () => {
  it('records a chat call token-exact: prompt ids, sampled ids, log-probs, finish reason, weight version', async () => {
    const a = await client('chat-1').chat.completions.create({ model: 'mempo-tiny', messages, max_tokens: 12, seed: 7, logprobs: true, ...extra });
    const x = a as unknown as Extra;
    const calls = recorder.get('chat-1')!.calls;
    expect(calls).toHaveLength(1);
    expect(calls[0]!.promptIds).toEqual(x.prompt_token_ids);
    expect(calls[0]!.sampledIds).toEqual(x.choices[0]!.token_ids);
    expect(calls[0]!.sampledIds.length).toBeGreaterThan(0);
    expect(calls[0]!.logprobs).toEqual(a.choices[0]!.logprobs!.content!.map((c) => c.logprob));
    expect(calls[0]!.finishReason).toBe(a.choices[0]!.finish_reason);
    expect(calls[0]!.weightVersion).toBe(0);
    expect(a.usage!.prompt_tokens + a.usage!.completion_tokens).toBe(recorder.get('chat-1')!.tokens);
  });

  it('a streamed chat call records what the unstreamed one with the same seed records', async () => {
    await client('plain').chat.completions.create({ model: 'mempo-tiny', messages, max_tokens: 10, seed: 11 });
    const stream = await client('streamed').chat.completions.create({ model: 'mempo-tiny', messages, max_tokens: 10, seed: 11, stream: true, logprobs: true, ...extra });
    const ids: number[] = [];
    const lps: number[] = [];
    for await (const chunk of stream) {
      const c = chunk.choices[0] as unknown as { token_ids?: number[]; logprobs?: { content: { logprob: number }[] } | null } | undefined;
      ids.push(...(c?.token_ids ?? []));
      lps.push(...(c?.logprobs?.content.map((e) => e.logprob) ?? []));
    }
    const plain = recorder.get('plain')!.calls[0]!;
    const streamed = recorder.get('streamed')!.calls[0]!;
    expect(streamed).toEqual(plain);
    expect(streamed.sampledIds).toEqual(ids);
    expect(streamed.logprobs).toEqual(lps);
  });

  it('records text completions, streamed or not, with the prompt ids the server encoded', async () => {
    const prompt = 'The capital of France is';
    const a = await client('text').completions.create({ model: 'mempo-tiny', prompt, max_tokens: 6, seed: 3, logprobs: 0, ...extra });
    const ch = a.choices[0] as unknown as { token_ids: number[]; prompt_token_ids: number[] };
    const call = recorder.get('text')!.calls[0]!;
    expect(call.promptIds).toEqual(ch.prompt_token_ids);
    expect(call.sampledIds).toEqual(ch.token_ids);
    expect(call.logprobs).toEqual(a.choices[0]!.logprobs!.token_logprobs);
    const s = await client('text').completions.create({ model: 'mempo-tiny', prompt, max_tokens: 6, seed: 3, stream: true });
    for await (const chunk of s) void chunk;
    const again = recorder.get('text')!.calls[1]!;
    expect({ ...again, index: 0 }).toEqual(call);
  });

  it('takes the tag from the header, else metadata.mempo_episode, else user; untagged calls are not recorded', async () => {
    const before = recorder.episodes().length;
    await client().chat.completions.create({ model: 'mempo-tiny', messages, max_tokens: 2 });
    expect(recorder.episodes()).toHaveLength(before);
    await client('from-header').chat.completions.create({ model: 'mempo-tiny', messages, max_tokens: 2, metadata: { mempo_episode: 'from-meta' }, user: 'from-user' });
    await client().chat.completions.create({ model: 'mempo-tiny', messages, max_tokens: 2, metadata: { mempo_episode: 'from-meta' }, user: 'from-user' });
    await client().chat.completions.create({ model: 'mempo-tiny', messages, max_tokens: 2, user: 'from-user' });
    for (const id of ['from-header', 'from-meta', 'from-user']) expect(recorder.get(id)?.calls).toHaveLength(1);
    await expect(client().chat.completions.create({ model: 'mempo-tiny', messages, max_tokens: 2, user: 'has space' })).rejects.toMatchObject({ status: 400, param: 'user' });
  });

  it('refuses n > 1 and several prompts on a tagged call, naming the field', async () => {
    await expect(client('multi').chat.completions.create({ model: 'mempo-tiny', messages, max_tokens: 2, n: 2 })).rejects.toMatchObject({ status: 400, param: 'n' });
    await expect(client('multi').completions.create({ model: 'mempo-tiny', prompt: ['a', 'b'], max_tokens: 2 })).rejects.toMatchObject({ status: 400, param: 'prompt' });
    expect(recorder.get('multi')).toBeUndefined();
    // untagged, n = 2 is served as before
    const ok = await client().chat.completions.create({ model: 'mempo-tiny', messages, max_tokens: 2, n: 2 });
    expect(ok.choices).toHaveLength(2);
  });

  it('POST /v1/episodes/{id}/finish finishes an episode once; later calls to it are 400, unknown ids 404', async () => {
    await client('fin/1').chat.completions.create({ model: 'mempo-tiny', messages, max_tokens: 3 });
    const post = (id: string) => fetch(`${url}/v1/episodes/${encodeURIComponent(id)}/finish`, { method: 'POST' });
    const res = await post('fin/1');
    expect(res.status).toBe(200);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({ id: 'fin/1', object: 'episode', finished: true, calls: 1 });
    expect(finished.map((e) => e.id)).toEqual(['fin/1']);
    expect((await post('fin/1')).status).toBe(200);
    expect(finished).toHaveLength(1);
    await expect(client('fin/1').chat.completions.create({ model: 'mempo-tiny', messages, max_tokens: 3 })).rejects.toMatchObject({ status: 400, message: expect.stringContaining('episode fin/1 is finished') });
    const unknown = await post('never-called');
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { message: string } }).error.message).toContain('episode never-called is not open');
  });

  it('keeps concurrent episodes apart: 8 clients at once, each episode holds only its own calls', async () => {
    const runs = Array.from({ length: 8 }, async (_, k) => {
      const c = client(`conc-${k}`);
      const got: number[][] = [];
      for (let t = 0; t < 2; t++) {
        const a = await c.chat.completions.create({ model: 'mempo-tiny', messages: [{ role: 'user', content: `question ${k} turn ${t}` }], max_tokens: 4, seed: k * 10 + t, ...extra });
        got.push((a as unknown as Extra).prompt_token_ids);
      }
      return got;
    });
    const prompts = await Promise.all(runs);
    prompts.forEach((ps, k) => expect(recorder.get(`conc-${k}`)!.calls.map((c) => c.promptIds)).toEqual(ps));
  });

  it('collectEpisodes over the served endpoint: the calls of each run, as the agent was answered, become its records', async () => {
    const answered = new Map<string, number[]>();
    const out = await collectEpisodes({
      tasks: [{ id: 'q1', question: 'Who founded Kethfai Company?', golds: ['x'] }],
      groupSize: 2,
      endpoint: { baseURL: `${url}/v1`, model: 'mempo-tiny', recorder },
      agent: async (task, c) => {
        const sdk = new OpenAI({ baseURL: c.baseURL, apiKey: c.apiKey, maxRetries: 0, defaultHeaders: c.headers });
        const a = await sdk.chat.completions.create({ model: c.model, messages: [{ role: 'user', content: task.question }], max_tokens: 5, seed: Number(c.episode.slice(-1)), ...extra });
        answered.set(c.episode, (a as unknown as Extra).choices[0]!.token_ids);
        return null;
      },
      reward: (_t, ep) => (ep.id.endsWith('0') ? 1 : 0),
    });
    expect(out.failed).toEqual([]);
    expect(out.records.map((r) => r.responseIds)).toEqual([answered.get('ep-q1-0'), answered.get('ep-q1-1')]);
    expect(recorder.get('ep-q1-0')).toBeUndefined();
  });

  it('records the weight version: 1 after a successful POST /update_weights_from_disk', async () => {
    const up = await fetch(`${url}/update_weights_from_disk`, { method: 'POST', body: JSON.stringify({ model_path: MODEL_DIR }) });
    expect(up.status).toBe(200);
    await client('after-update').chat.completions.create({ model: 'mempo-tiny', messages, max_tokens: 2 });
    expect(recorder.get('after-update')!.calls[0]!.weightVersion).toBe(1);
  });
});
