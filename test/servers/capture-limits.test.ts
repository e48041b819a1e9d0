/**
 * Capture's bounds and broken calls on `mempo serve`, with the real `openai` SDK: each recorder
 * limit answers its status in OpenAI's error shape naming the limit (429 open episodes, 413
 * tokens per episode, 400 calls per episode); a client that goes away mid-stream stops the
 * sampling and leaves no call recorded (its budget given back); an episode finished while a call
 * runs answers that call 409 and keeps it out. Decode steps are slowed (a wrapped generate) so
 * that a call is still sampling when the test acts on it.
 */
import type { Server } from 'node:http';
import OpenAI from 'openai';
import { EpisodeRecorder } from '../../src/agents/capture';
import { LocalModel } from '../../src/engines/local/local-model';
import type { GenerateOptions, PromptInput } from '../../src/engines/local/generate';
import { createCompletionsServer, listen } from '../../src/servers/completions-server';
import { MODEL_DIR } from '../pipeline/helpers';

let model: LocalModel;
let server: Server;
let url = '';
let recorder: EpisodeRecorder;
/** Milliseconds each decode step waits (0: full speed); steps run so far. */
let stepMs = 0;
let steps = 0;

beforeAll(async () => {
  model = await LocalModel.load(MODEL_DIR);
  const lm = model.model;
  const generate = lm.generate.bind(lm);
  const end = new Set([...model.stopTokenIds, ...lm.config.eosTokenIds, 2]);
  lm.generate = (ps: readonly PromptInput[], opts: GenerateOptions) => {
    const inner = opts.logitsProcessor;
    return generate(ps, {
      ...opts,
      logitsProcessor: (row, i, gen) => {
        steps++;
        if (stepMs > 0) {
          // slow calls never end on their own before max_tokens
          for (const id of end) row[id] = -Infinity;
          const until = Date.now() + stepMs;
          while (Date.now() < until) { /* a slow model */ }
        }
        inner?.(row, i, gen);
      },
    });
  };
  recorder = new EpisodeRecorder({ maxCallsPerEpisode: 2, maxTokensPerEpisode: 200, maxEpisodes: 4 });
  server = createCompletionsServer(model, { maxConcurrency: 4, recorder });
  url = await listen(server, 0);
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await model.dispose();
});
afterEach(() => {
  stepMs = 0;
});

const client = (episode: string) => new OpenAI({ baseURL: `${url}/v1`, apiKey: 'none', maxRetries: 0, defaultHeaders: { 'x-mempo-episode': episode } });
const messages = [{ role: 'user' as const, content: 'Who founded Kethfai Company?' }];
const ask = (episode: string, maxTokens = 2) => client(episode).chat.completions.create({ model: 'mempo-tiny', messages, max_tokens: maxTokens, seed: 1 });
const finish = (episode: string) => fetch(`${url}/v1/episodes/${episode}/finish`, { method: 'POST' });

describe('capture limits', () => {
  it('400 past the calls of an episode, 413 past its tokens, 429 past the open episodes, each naming its limit', async () => {
    await ask('calls');
    await ask('calls');
    const calls = ask('calls');
    await expect(calls).rejects.toMatchObject({ status: 400, type: 'invalid_request_error', message: expect.stringContaining('capture.maxCallsPerEpisode') });
    await expect(ask('tokens', 190)).rejects.toMatchObject({ status: 413, message: expect.stringContaining('exceeds capture.maxTokensPerEpisode = 200') });
    expect(recorder.get('calls')!.calls).toHaveLength(2);
    await ask('third');
    await ask('fourth');
    // open now: calls, tokens (opened, refused its call), third, fourth
    await expect(ask('fifth')).rejects.toMatchObject({ status: 429, type: 'rate_limit_error', message: expect.stringContaining('capture.maxEpisodes') });
    for (const id of ['calls', 'tokens', 'third', 'fourth']) {
      expect((await finish(id)).status).toBe(200);
      recorder.take(id);
    }
    await ask('fifth');
    expect(recorder.get('fifth')!.calls).toHaveLength(1);
    recorder.take('fifth');
  });

  it('a client that goes away mid-stream stops the sampling; its call is not recorded and its budget comes back', async () => {
    stepMs = 20;
    const ctl = new AbortController();
    const stream = await client('gone').chat.completions.create({ model: 'mempo-tiny', messages, max_tokens: 150, seed: 2, stream: true }, { signal: ctl.signal });
    let chunks = 0;
    // the SDK ends the iteration (or throws its abort error, by version) once aborted
    try {
      for await (const chunk of stream) {
        void chunk;
        if (++chunks === 3) ctl.abort();
      }
    } catch (err) {
      expect((err as Error).name).toMatch(/Abort/);
    }
    expect(chunks).toBe(3);
    // the server sees the close within a few steps; after that no step runs (at 20 ms a step, 400 ms would be ~20)
    await new Promise((r) => setTimeout(r, 200));
    const at = steps;
    await new Promise((r) => setTimeout(r, 400));
    expect(steps).toBe(at);
    expect(recorder.get('gone')!.calls).toEqual([]);
    stepMs = 0;
    // both calls of the episode's budget are still there: the lost call holds none
    await ask('gone');
    await ask('gone');
    expect(recorder.get('gone')!.calls).toHaveLength(2);
    recorder.take('gone');
  });

  it('a call whose episode is finished while it runs is answered 409 and not recorded', async () => {
    await ask('race');
    stepMs = 20;
    const slow = ask('race', 40);
    await new Promise((r) => setTimeout(r, 200));
    expect((await finish('race')).status).toBe(200);
    await expect(slow).rejects.toMatchObject({ status: 409, message: expect.stringContaining('episode race was finished while this call ran') });
    expect(recorder.get('race')!.calls).toHaveLength(1);
    recorder.take('race');
  });
});
