/**
 * `mempo serve`: the OpenAI / vLLM completions subset over the embedded model, on loopback, and
 * HttpCompletionsBackend (Generator + TargetScorer) against it.
 */
import type { Server } from 'node:http';
import { LocalModel } from '../src/rollout/generator';
import { createCompletionsServer, listen } from '../src/serve/server';
import { HttpCompletionsBackend } from '../src/serve/client';
import { MODEL_DIR } from './rollout-helpers';
import { main } from '../src/cli/main';

describe('completions server (POST /v1/completions)', () => {
  let model: LocalModel;
  let server: Server;
  let url = '';
  beforeAll(async () => {
    model = await LocalModel.load(MODEL_DIR);
    server = createCompletionsServer(model, { maxBodyBytes: 1 << 16, maxConcurrency: 2 });
    url = await listen(server, 0);
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await model.dispose();
  });

  const backend = (urls: string[]) =>
    new HttpCompletionsBackend(urls, { model: 'mempo-tiny', codec: model.codec, maxContextTokens: model.maxContextTokens, retries: 3, backoffMs: 10, timeoutMs: 30000 });

  const post = async (body: unknown, path = '/v1/completions', method = 'POST') => {
    const res = await fetch(url + path, { method, body: method === 'POST' ? (typeof body === 'string' ? body : JSON.stringify(body)) : undefined });
    return { status: res.status, json: (await res.json()) as Record<string, any> };
  };

  it('binds to loopback and lists the model', async () => {
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const { status, json } = await post(undefined, '/v1/models', 'GET');
    expect(status).toBe(200);
    expect(json['data'][0].id).toBe('mempo-tiny');
  });

  it('scores through HTTP as LocalModel.scoreTargets does', async () => {
    const enc = (s: string) => model.codec.encode(s);
    const items = [
      { contextIds: enc('In which country is Mamek?'), targetIds: enc(' Mamek is in Thersekle.') },
      { contextIds: enc('Who published The Hollow Winter?'), targetIds: enc(' <answer>Faithhe Works</answer>') },
      { contextIds: enc('Hi'), targetIds: enc('!') },
    ];
    const remote = await backend([url]).score(items);
    const local = await model.score(items);
    expect(remote.length).toBe(items.length);
    remote.forEach((r, i) => {
      expect(r.length).toBe(items[i]!.targetIds.length);
      r.forEach((x, t) => expect(Math.abs(x - local[i]![t]!)).toBeLessThan(1e-4));
    });
  });

  it('generates well-formed token ids and log-probs', async () => {
    const ids = model.codec.encode('In which country is Mamek?');
    const out = await backend([url]).generate(
      [{ ids, maxNewTokens: 4, tag: { uid: 'q1', sample: 0, round: 1 } }, { ids, maxNewTokens: 3, tag: { uid: 'q1', sample: 1, round: 1 } }],
      { temperature: 1, topP: 0.9, topK: 20, seed: 7, stop: ['</search>', '</answer>'] },
    );
    expect(out.length).toBe(2);
    out.forEach((o, i) => {
      expect(o.tokenIds.length).toBeGreaterThan(0);
      expect(o.tokenIds.length).toBeLessThanOrEqual(i === 0 ? 4 : 3);
      o.tokenIds.forEach((id) => expect(Number.isInteger(id) && id >= 0).toBe(true));
      expect(o.logprobs!.length).toBe(o.tokenIds.length);
      Array.from(o.logprobs!).forEach((lp) => expect(lp <= 0 && Number.isFinite(lp)).toBe(true));
      expect(['stop', 'eos', 'length']).toContain(o.finishReason);
    });
    // Raw answer: OpenAI shape, prompt_logprobs with a null first entry.
    const { status, json } = await post({ model: 'mempo-tiny', prompt: ids, max_tokens: 2, logprobs: 0, seed: 1, prompt_logprobs: 0, return_tokens_as_token_ids: true });
    expect(status).toBe(200);
    expect(json['object']).toBe('text_completion');
    const c = json['choices'][0];
    expect(c.token_ids.length).toBeLessThanOrEqual(2);
    expect(c.logprobs.tokens).toEqual(c.token_ids.map((id: number) => `token_id:${id}`));
    expect(json['prompt_logprobs'].length).toBe(ids.length);
    expect(json['prompt_logprobs'][0]).toBeNull();
    expect(typeof json['prompt_logprobs'][1][String(ids[1])].logprob).toBe('number');
  });

  it('rejects bad requests with 400 naming the field', async () => {
    const cases: [unknown, string][] = [
      ['{not json', 'JSON'],
      [{ prompt: 'text' }, '"prompt"'],
      [{ prompt: [1, -3] }, '"prompt[1]"'],
      [{ prompt: [1], max_tokens: -1 }, '"max_tokens"'],
      [{ prompt: [1], temperature: 'hot' }, '"temperature"'],
      [{ prompt: [1], n: 0 }, '"n"'],
      [{ prompt: [1], top_k: -2 }, '"top_k"'],
      [{ prompt: [1], stop: [3] }, '"stop"'],
      [{ prompt: [1], model: 'gpt-4' }, '"model"'],
      [{ prompt: [1], prompt_logprobs: 1.5 }, '"prompt_logprobs"'],
    ];
    for (const [body, field] of cases) {
      const { status, json } = await post(body);
      expect(status).toBe(400);
      expect(json['error'].message).toContain(field);
    }
    expect((await post('x'.repeat(1 << 17))).status).toBe(413);
    expect((await post(undefined, '/nope', 'GET')).status).toBe(404);
  });

  it('succeeds on the live endpoint when another is down', async () => {
    const b = backend(['http://127.0.0.1:1', url]);
    const ids = model.codec.encode('Hi');
    for (let k = 0; k < 3; k++) {
      const [r] = await b.score([{ contextIds: ids, targetIds: model.codec.encode(' there') }]);
      expect(r!.length).toBeGreaterThan(0);
    }
    const out = await b.generate([{ ids, maxNewTokens: 2, tag: { uid: 'x', sample: 0, round: 1 } }], { temperature: 0, topP: 1, topK: 0, seed: 1, stop: [] });
    expect(out[0]!.tokenIds.length).toBeGreaterThan(0);
  });

  it('names the endpoint and item on bad answers', async () => {
    const b = new HttpCompletionsBackend([url], { model: 'other', codec: model.codec, maxContextTokens: 512, retries: 0 });
    await expect(b.score([{ contextIds: [1, 2], targetIds: [3] }])).rejects.toThrow(/v1\/completions \(scoring item 0\): HTTP 400.*model/);
    const fake = (payload: string): typeof fetch => () => Promise.resolve(new Response(payload, { status: 200 }));
    const mk = (payload: string) => new HttpCompletionsBackend(['http://127.0.0.1:9'], { model: 'm', codec: model.codec, maxContextTokens: 512, retries: 0, fetch: fake(payload) });
    const item = [{ contextIds: [1, 2], targetIds: [3] }];
    await expect(mk('{oops').score(item)).rejects.toThrow(/127\.0\.0\.1:9\/v1\/completions \(scoring item 0\): the answer is not valid JSON/);
    await expect(mk(JSON.stringify({ model: 'x', choices: [] })).score(item)).rejects.toThrow(/\(scoring item 0\): the answer comes from model "x"/);
    await expect(mk(JSON.stringify({ model: 'm', choices: [] })).score(item)).rejects.toThrow(/\(scoring item 0\): the answer has no "prompt_logprobs"/);
    await expect(mk(JSON.stringify({ model: 'm', choices: [], prompt_logprobs: [null, { '2': { logprob: -1 } }, { '7': { logprob: -1 } }] })).score(item)).rejects.toThrow(/no log-prob for the requested token 3/);
    const gen = [{ ids: [1, 2], maxNewTokens: 2, tag: { uid: 'u', sample: 0, round: 1 } }];
    const params = { temperature: 1, topP: 1, topK: 0, seed: 0, stop: [] };
    await expect(mk(JSON.stringify({ model: 'm', choices: [{ token_ids: [4], finish_reason: 'length' }] })).generate(gen, params)).rejects.toThrow(/\(generation request 0 \(u sample 0 round 1\)\): missing or malformed logprobs/);
  });

  it('queues past max concurrency and answers 429 when the queue is full', async () => {
    const busy = createCompletionsServer(model, { maxConcurrency: 1, maxQueue: 1 });
    const base = await listen(busy, 0);
    try {
      const body = JSON.stringify({ prompt: model.codec.encode('In which country is Mamek?'), max_tokens: 32, temperature: 1, seed: 3, prompt_logprobs: 0 });
      const statuses = await Promise.all(Array.from({ length: 8 }, () => fetch(`${base}/v1/completions`, { method: 'POST', body }).then((r) => r.status)));
      expect(statuses.filter((x) => x === 200).length).toBeGreaterThanOrEqual(2);
      expect(statuses.every((x) => x === 200 || x === 429)).toBe(true);
      expect(statuses).toContain(429);
    } finally {
      busy.closeAllConnections();
      await new Promise((r) => busy.close(r));
    }
  });

  it('mempo serve is a CLI subcommand with its flags', async () => {
    let out = '';
    const io = { stdout: { write: (x: string) => { out += x; return true; } }, stderr: { write: (x: string) => { out += x; return true; } } } as any;
    await main(['serve', '--help'], io);
    for (const flag of ['--model', '--host', '--port', '--max-concurrency', '--max-body']) expect(out).toContain(flag);
  });
});
