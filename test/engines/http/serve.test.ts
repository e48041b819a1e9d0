/**
 * `mempo serve`: the OpenAI / vLLM completions subset over the embedded model, on loopback, and
 * HttpCompletionsBackend (Generator + TargetScorer) against it.
 */
import type { Server } from 'node:http';
import { LocalModel } from '../../../src/engines/local/local-model';
import { createCompletionsServer, listen } from '../../../src/servers/completions-server';
import { HttpCompletionsBackend } from '../../../src/engines/http/client';
import { PartialResultsError } from '../../../src/contracts';
import { connectCompletionsServers } from '../../../src/engines/http/connect';
import { MODEL_DIR } from '../../pipeline/helpers';
import { main } from '../../../src/cli/main';

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
    // Raw answer: vLLM's shape, prompt_logprobs on the choice with a null first entry.
    const { status, json } = await post({ model: 'mempo-tiny', prompt: ids, max_tokens: 2, logprobs: 0, seed: 1, prompt_logprobs: 0, return_tokens_as_token_ids: true, return_token_ids: true });
    expect(status).toBe(200);
    expect(json['object']).toBe('text_completion');
    const c = json['choices'][0];
    expect(c.token_ids.length).toBeLessThanOrEqual(2);
    expect(c.prompt_token_ids).toEqual(ids);
    expect(c.logprobs.tokens).toEqual(c.token_ids.map((id: number) => `token_id:${id}`));
    expect(c.prompt_logprobs.length).toBe(ids.length);
    expect(c.prompt_logprobs[0]).toBeNull();
    expect(typeof c.prompt_logprobs[1][String(ids[1])].logprob).toBe('number');
    expect(json['prompt_logprobs']).toBeUndefined();
  });

  it("answers vLLM's choice fields, null unless asked for; prompt log-probs carry rank and decoded_token", async () => {
    const ids = model.codec.encode('In which country is Mamek?');
    const plain = (await post({ prompt: ids, max_tokens: 2, temperature: 0 })).json['choices'][0];
    expect(Object.keys(plain).sort()).toEqual(['finish_reason', 'index', 'logprobs', 'prompt_logprobs', 'prompt_token_ids', 'stop_reason', 'text', 'token_ids']);
    expect([plain.token_ids, plain.prompt_token_ids, plain.prompt_logprobs, plain.logprobs]).toEqual([null, null, null, null]);
    const c = (await post({ prompt: ids, max_tokens: 3, temperature: 0, logprobs: 0, prompt_logprobs: 0, return_tokens_as_token_ids: true })).json['choices'][0];
    const toks: string[] = c.logprobs.tokens;
    expect(Object.keys(c.logprobs).sort()).toEqual(['text_offset', 'token_logprobs', 'tokens', 'top_logprobs']);
    expect(c.logprobs.text_offset).toEqual(toks.map((_, k) => toks.slice(0, k).join('').length));
    expect(c.logprobs.top_logprobs).toEqual(toks.map((t, k) => ({ [t]: c.logprobs.token_logprobs[k] })));
    expect(Object.keys(c.prompt_logprobs[1][String(ids[1])]).sort()).toEqual(['decoded_token', 'logprob', 'rank']);
    if (c.finish_reason === 'stop') expect(c.stop_reason).not.toBeNull();
  });

  it('answers a list of prompts with one choice per prompt and sample, in vLLM order', async () => {
    const a = model.codec.encode('In which country is Mamek?');
    const b = model.codec.encode('Hi');
    const { status, json } = await post({ prompt: [a, b], n: 2, max_tokens: 3, temperature: 1, seed: 5, logprobs: 0, prompt_logprobs: 0, return_token_ids: true });
    expect(status).toBe(200);
    expect(json['choices'].map((c: any) => c.index)).toEqual([0, 1, 2, 3]);
    expect(json['choices'].map((c: any) => c.prompt_logprobs.length)).toEqual([a.length, a.length, b.length, b.length]);
    // Sample j of prompt p comes from stream p·n + j of the seed, as LocalModel samples request p·n + j.
    const local = await model.generate([a, a, b, b].map((ids, i) => ({ ids, maxNewTokens: 3, tag: { uid: 'x', sample: i, round: 1 } })), { temperature: 1, topP: 1, topK: 0, seed: 5, stop: [] });
    expect(json['choices'].map((c: any) => c.token_ids)).toEqual(local.map((g) => g.tokenIds));
  });

  it('serves SGLang /generate: output ids, logprob tuples, input logprobs from logprob_start_len', async () => {
    const ids = model.codec.encode('Who published The Hollow Winter?');
    const { status, json } = await post({ input_ids: ids, sampling_params: { max_new_tokens: 3, temperature: 0, stop: ['</answer>'] }, return_logprob: true, logprob_start_len: 2, return_text_in_logprobs: true }, '/generate');
    expect(status).toBe(200);
    expect(Array.isArray(json)).toBe(false);
    const meta = json['meta_info'];
    expect(json['output_ids'].length).toBeLessThanOrEqual(3);
    expect(meta.output_token_logprobs.map((t: any[]) => t[1])).toEqual(json['output_ids']);
    expect(meta.output_token_logprobs.every((t: any[]) => typeof t[0] === 'number' && typeof t[2] === 'string')).toBe(true);
    expect(meta.input_token_logprobs.length).toBe(ids.length - 2);
    expect(meta.input_token_logprobs[0][0]).toBeNull();
    expect(meta.input_token_logprobs.map((t: any[]) => t[1])).toEqual(ids.slice(2));
    const [ref] = await model.score([{ contextIds: ids.slice(0, 3), targetIds: ids.slice(3) }]);
    meta.input_token_logprobs.slice(1).forEach((t: any[], i: number) => expect(Math.abs(t[0] - ref![i]!)).toBeLessThan(1e-4));
    expect(meta).toMatchObject({ prompt_tokens: ids.length, completion_tokens: json['output_ids'].length });
    expect(['stop', 'length']).toContain(meta.finish_reason.type);
    // A batch of prompts (or n > 1) answers an array, one object per prompt and sample.
    const batch = await post({ input_ids: [ids, ids.slice(0, 4)], sampling_params: { max_new_tokens: 2, n: 2 } }, '/generate');
    expect(batch.status).toBe(200);
    expect(Array.isArray(batch.json)).toBe(true);
    expect((batch.json as unknown as unknown[]).length).toBe(4);
    const bad: [unknown, string][] = [
      [{ text: 'hello' }, '"text"'],
      [{ input_ids: [1], sampling_params: { max_new_tokens: -1 } }, '"sampling_params.max_new_tokens"'],
      [{ input_ids: [1], sampling_params: { frequency_penalty: 1 } }, '"sampling_params.frequency_penalty"'],
      [{ input_ids: [1], sampling_params: { logit_bias: {} } }, '"sampling_params.logit_bias"'],
      [{ input_ids: [1, 2], logprob_start_len: 2 }, '"logprob_start_len"'],
      [{ input_ids: [[1, 2], [3]], logprob_start_len: [0] }, '"logprob_start_len"'],
      [{ input_ids: [1], top_logprobs_num: 5 }, '"top_logprobs_num"'],
      [{ input_ids: [1], stream: true }, '"stream"'],
    ];
    for (const [body, field] of bad) {
      const r = await post(body, '/generate');
      expect(r.status).toBe(400);
      expect(r.json['error'].message).toContain(field);
    }
  });

  it('scores and generates through the SGLang dialect as through vLLM', async () => {
    const enc = (s: string) => model.codec.encode(s);
    const items = [
      { contextIds: enc('In which country is Mamek?'), targetIds: enc(' Mamek is in Thersekle.') },
      { contextIds: enc('Hi'), targetIds: enc('!') },
      { contextIds: enc('Who?'), targetIds: [] },
    ];
    const sg = new HttpCompletionsBackend([url], { api: 'sglang', model: 'mempo-tiny', codec: model.codec, maxContextTokens: model.maxContextTokens, scoreBatchSize: 2 });
    const vl = new HttpCompletionsBackend([url], { model: 'mempo-tiny', codec: model.codec, maxContextTokens: model.maxContextTokens, scoreBatchSize: 1 });
    const [a, b, local] = await Promise.all([sg.score(items), vl.score(items), model.score(items.slice(0, 2))]);
    expect(a[2]!.length).toBe(0);
    items.slice(0, 2).forEach((it, i) => {
      expect(a[i]!.length).toBe(it.targetIds.length);
      a[i]!.forEach((x, t) => {
        expect(Math.abs(x - local[i]![t]!)).toBeLessThan(1e-4);
        expect(Math.abs(x - b[i]![t]!)).toBeLessThan(1e-4);
      });
    });
    expect(sg.urls).toEqual([`${url}/generate`]);
    expect(sg.stats()).toMatchObject({ api: 'sglang', scoringRequests: 1, scoredItems: 2, failedRequests: 0 });
    const reqs = [0, 1].map((k) => ({ ids: enc('In which country is Mamek?'), maxNewTokens: 8, tag: { uid: 'q', sample: k, round: 1 } }));
    const params = { temperature: 1, topP: 1, topK: 0, seed: 11, stop: ['</search>', '</answer>'] };
    const [g1, g2, g3] = await Promise.all([sg.generate(reqs, params), vl.generate(reqs, params), model.generate(reqs, params)]);
    expect(g1.map((g) => g.tokenIds)).toEqual(g3.map((g) => g.tokenIds));
    expect(g2.map((g) => g.tokenIds)).toEqual(g3.map((g) => g.tokenIds));
    expect(g1.map((g) => g.finishReason)).toEqual(g3.map((g) => g.finishReason));
  });

  it('rejects bad requests with 400 naming the field', async () => {
    const cases: [unknown, string][] = [
      ['{not json', 'JSON'],
      // Text prompts are tokenized (OpenAI's and vLLM's /v1/completions take them); an empty one is refused.
      [{ prompt: '' }, '"prompt"'],
      [{ prompt: ['a', 3] }, '"prompt[1]"'],
      [{ prompt: [1], stream_options: { include_usage: true } }, '"stream_options"'],
      [{ prompt: [1, -3] }, '"prompt[1]"'],
      [{ prompt: [1], max_tokens: -1 }, '"max_tokens"'],
      [{ prompt: [1], temperature: 'hot' }, '"temperature"'],
      [{ prompt: [1], n: 0 }, '"n"'],
      [{ prompt: [1], top_k: -2 }, '"top_k"'],
      [{ prompt: [1], stop: [3] }, '"stop"'],
      [{ prompt: [1], model: 'gpt-4' }, '"model"'],
      [{ prompt: [1], prompt_logprobs: 1.5 }, '"prompt_logprobs"'],
      [{ prompt: [[1], 'x'] }, '"prompt[1]"'],
      [{ prompt: [[1], [2]], n: 40 }, '"n"'],
      [{ prompt: [1], repetition_penalty: 1.05 }, '"repetition_penalty"'],
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
    await expect(mk(JSON.stringify({ model: 'm', choices: [] })).score(item)).rejects.toThrow(/\(scoring item 0\): 0 choices for 1 prompts/);
    await expect(mk(JSON.stringify({ model: 'm', choices: [{ index: 0 }] })).score(item)).rejects.toThrow(/\(scoring item 0\): choice 0 has no "prompt_logprobs"/);
    await expect(mk(JSON.stringify({ model: 'm', choices: [{ index: 0, prompt_logprobs: [null, { '2': { logprob: -1 } }, { '7': { logprob: -1 } }] }] })).score(item)).rejects.toThrow(/no log-prob for the requested token 3/);
    // Several items per request: the error names the item, not only the request.
    const two = [{ contextIds: [1, 2], targetIds: [3] }, { contextIds: [4], targetIds: [5] }];
    const okThenBad = JSON.stringify({ model: 'm', choices: [{ index: 0, prompt_logprobs: [null, { '2': { logprob: -1 } }, { '3': { logprob: -1 } }] }, { index: 1, prompt_logprobs: [null, { '9': { logprob: -1 } }] }] });
    await expect(mk(okThenBad).score(two)).rejects.toThrow(/127\.0\.0\.1:9\/v1\/completions \(scoring item 1\): prompt_logprobs\[1\] has no log-prob for the requested token 5/);
    // SGLang answers: the ids must be the requested ones.
    const sg = (payload: unknown) => new HttpCompletionsBackend(['http://127.0.0.1:9'], { api: 'sglang', model: 'm', codec: model.codec, maxContextTokens: 512, retries: 0, fetch: fake(JSON.stringify(payload)) });
    await expect(sg([{ meta_info: { input_token_logprobs: [[null, 2, null], [-1, 4, null]] } }]).score(item)).rejects.toThrow(/127\.0\.0\.1:9\/generate \(scoring item 0\): input_token_logprobs\[1\] is for token 4, the request has 3 there/);
    await expect(sg({ text: '' }).score(item)).rejects.toThrow(/answer 0 has no "meta_info"/);
    const gen = [{ ids: [1, 2], maxNewTokens: 2, tag: { uid: 'u', sample: 0, round: 1 } }];
    const params = { temperature: 1, topP: 1, topK: 0, seed: 0, stop: [] };
    await expect(mk(JSON.stringify({ model: 'm', choices: [{ token_ids: [4], finish_reason: 'length' }] })).generate(gen, params)).rejects.toThrow(/\(generation request 0 \(u sample 0 round 1\)\): missing or malformed logprobs/);
    await expect(mk(JSON.stringify({ model: 'm', choices: [{ text: 'x', finish_reason: 'length', logprobs: { tokens: ['x'], token_logprobs: [-1] } }] })).generate(gen, params)).rejects.toThrow(/neither "token_ids" nor logprobs.tokens as "token_id:N"/);
    await expect(mk(JSON.stringify({ model: 'm', choices: [{ token_ids: [4], prompt_token_ids: [1, 3], finish_reason: 'length', logprobs: { token_logprobs: [-1] } }] })).generate(gen, params)).rejects.toThrow(/"prompt_token_ids" do not match the 2 prompt tokens sent/);
    // Older vLLM without token_ids: the ids come from logprobs.tokens ("token_id:N").
    const [old] = await mk(JSON.stringify({ model: 'm', choices: [{ finish_reason: 'stop', logprobs: { tokens: ['token_id:4', 'token_id:0'], token_logprobs: [-1, -2] } }] })).generate(gen, params);
    expect(old).toMatchObject({ tokenIds: [4, 0], finishReason: 'eos' });
    await expect(sg({ output_ids: [5], meta_info: { finish_reason: { type: 'stop', matched: 5 }, output_token_logprobs: [[-1, 4, null]] } }).generate(gen, params)).rejects.toThrow(/\/generate \(generation request 0 \(u sample 0 round 1\)\): "output_ids" and meta_info.output_token_logprobs disagree/);
    await expect(sg({ output_ids: [4], meta_info: { finish_reason: { type: 'abort', message: 'x' }, output_token_logprobs: [[-1, 4, null]] } }).generate(gen, params)).rejects.toThrow(/finish_reason \{"type":"abort","message":"x"\}/);
    const [sgOk] = await sg({ output_ids: [4, 9], meta_info: { finish_reason: { type: 'length', length: 2 }, output_token_logprobs: [[-1, 4, null], [-0.5, 9, null]] } }).generate(gen, params);
    expect(sgOk).toMatchObject({ tokenIds: [4, 9], finishReason: 'length' });
  });

  it('a request that fails for good fails only its own generation or scoring items: the others come back with PartialResultsError', async () => {
    // A fake server: generation requests whose prompt ends in 7 get a malformed answer, scoring requests
    // with a prompt starting [9, ...] another model's name; everything else a valid answer.
    const calls: any[] = [];
    const f: typeof fetch = async (_u, init) => {
      const b = JSON.parse(String(init!.body));
      calls.push(b);
      const lists: number[][] = Array.isArray(b.prompt[0]) ? b.prompt : [b.prompt];
      if (b.prompt_logprobs === 0) {
        if (lists.some((p) => p[0] === 9)) return new Response(JSON.stringify({ model: 'other', choices: [] }), { status: 200 });
        const choices = lists.map((p, index) => ({ index, prompt_logprobs: p.map((id, k) => (k === 0 ? null : { [String(id)]: { logprob: -0.5 } })) }));
        return new Response(JSON.stringify({ model: 'm', choices }), { status: 200 });
      }
      if (b.prompt[b.prompt.length - 1] === 7) return new Response('{"model": "m", "choices": [', { status: 200 });
      return new Response(JSON.stringify({ model: 'm', choices: [{ token_ids: [4, 5], finish_reason: 'length', logprobs: { token_logprobs: [-1, -2] } }] }), { status: 200 });
    };
    const b = new HttpCompletionsBackend(['http://127.0.0.1:9'], { model: 'm', codec: model.codec, maxContextTokens: 512, retries: 0, scoreBatchSize: 2, fetch: f });
    const gen = [[1, 2], [1, 7], [3]].map((ids, k) => ({ ids, maxNewTokens: 2, tag: { uid: 'u', sample: k, round: 1 } }));
    const err = await b.generate(gen, { temperature: 1, topP: 1, topK: 0, seed: 0, stop: [] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PartialResultsError);
    const pe = err as PartialResultsError<{ tokenIds: number[] }>;
    expect(pe.results.map((r) => r?.tokenIds ?? null)).toEqual([[4, 5], null, [4, 5]]);
    expect([...pe.failures]).toEqual([[1, 'http://127.0.0.1:9/v1/completions (generation request 1 (u sample 1 round 1)): the answer is not valid JSON: {"model": "m", "choices": [']]);
    expect(pe.message).toBe(`1 of 3 generation requests failed; first: ${pe.failures.get(1)}`);
    // Scoring in requests of two items: items 2 and 3 share a request answered by another model: both fail, each named.
    const tag = (k: number) => ({ uid: 'u', sample: k, round: 2, context: 'full' as const });
    const items = [[1, 2], [3], [9, 1], [4], [5]].map((c, k) => ({ contextIds: c, targetIds: [6, 7], tag: tag(k) }));
    const se = (await b.score(items).catch((e: unknown) => e)) as PartialResultsError<Float32Array>;
    expect(se).toBeInstanceOf(PartialResultsError);
    expect(se.results.map((r) => (r ? Array.from(r) : null))).toEqual([[-0.5, -0.5], [-0.5, -0.5], null, null, [-0.5, -0.5]]);
    expect([...se.failures.keys()]).toEqual([2, 3]);
    expect(se.failures.get(2)).toBe('scoring item 2 (u sample 2 round 2, full context): http://127.0.0.1:9/v1/completions (scoring items 2..3): the answer comes from model "other", expected "m"');
    expect(se.failures.get(3)).toContain('scoring item 3 (u sample 3 round 2, full context): http://127.0.0.1:9/v1/completions (scoring items 2..3)');
    expect(b.stats()).toMatchObject({ failedRequests: 2, failedGenerations: 1, failedItems: 2, generationRequests: 3, scoringRequests: 3, scoredItems: 5 });
    // Every request went out (the failure of one did not abandon the others).
    expect(calls.length).toBe(6);
  });

  it('connectCompletionsServers: model name from /v1/models, else the directory; a model not served is an error', async () => {
    const lines: string[] = [];
    const b = await connectCompletionsServers({ urls: `${url}/v1/completions, ${url}`, modelDir: MODEL_DIR, api: 'sglang', log: (l) => lines.push(l) });
    expect(b.model).toBe('mempo-tiny');
    expect(b.api).toBe('sglang');
    expect(b.urls).toEqual([`${url}/generate`, `${url}/generate`]);
    expect(b.maxContextTokens).toBe(model.maxContextTokens);
    expect(b.codec.encode('Hi')).toEqual(model.codec.encode('Hi'));
    expect(lines).toEqual([`server model "mempo-tiny" (from ${url}/v1/models)`]);
    // /v1/models unreadable: the --model directory's name.
    const down: typeof fetch = () => Promise.reject(new TypeError('fetch failed'));
    const c = await connectCompletionsServers({ urls: ['http://127.0.0.1:9'], modelDir: MODEL_DIR, fetch: down, log: (l) => lines.push(l) });
    expect(c.model).toBe('mempo-tiny');
    expect(lines[1]).toBe('server model "mempo-tiny" (http://127.0.0.1:9/v1/models could not be read: fetch failed)');
    await expect(connectCompletionsServers({ urls: [url], modelDir: MODEL_DIR, model: 'qwen' })).rejects.toThrow(`model "qwen" is not served: ${url}/v1/models lists "mempo-tiny"`);
    await expect(connectCompletionsServers({ urls: 'localhost:8000', modelDir: MODEL_DIR })).rejects.toThrow('Expected an http(s) server URL (e.g. http://127.0.0.1:8000) but received "localhost:8000"');
    await expect(connectCompletionsServers({ urls: [url] })).rejects.toThrow('needs modelDir (for the tokenizer) or codec');
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
    for (const flag of ['--model', '--host', '--port', '--max-concurrency', '--max-body', '--threads']) expect(out).toContain(flag);
  });
});
