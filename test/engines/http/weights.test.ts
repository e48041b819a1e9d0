/**
 * @jest-environment ./test/runtime-environment.js
 *
 * The HTTP engine's weight sync (`HttpCompletionsBackend.updateWeightsFromDisk`): SGLang's
 * POST /update_weights_from_disk on every endpoint, over real HTTP on 127.0.0.1 — against the
 * strict SGLang fake, against two `mempo serve` replicas (whose answers then change), and the
 * failures: an endpoint down, a directory that does not load, a server without the endpoint
 * (vLLM, answering FastAPI's 404), a server that does not answer.
 */
import * as http from 'node:http';
import { rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { connectCompletionsServers } from '../../../src/engines/http/connect';
import { LocalModel } from '../../../src/engines/local/local-model';
import { Tokenizer } from '../../../src/engines/local/tokenizer';
import { createCompletionsServer, listen } from '../../../src/servers/completions-server';
import { startSglangFake } from '../../fakes/sglang-fake';
import { fakeModel } from '../../fakes/rollout-check';
import type { FakeServer } from '../../fakes/vllm-fake';
import { MODEL_DIR, maxAbsDiff, randomIds } from '../local/helpers';
import { reweightedModel } from '../local/reweighted';

let reweighted: string;
let tok: Tokenizer;
beforeAll(async () => {
  reweighted = reweightedModel();
  tok = await Tokenizer.load(MODEL_DIR);
});
afterAll(() => rmSync(reweighted, { recursive: true, force: true }));

/** A server answering every request with `status` and `body` (or never, with status 0). */
async function canned(status: number, body: string): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    req.resume();
    if (status === 0) return;
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
}

describe('updateWeightsFromDisk against the strict SGLang fake', () => {
  let fakes: FakeServer[];
  beforeAll(async () => {
    fakes = [await startSglangFake(fakeModel(tok)), await startSglangFake(fakeModel(tok))];
  });
  afterAll(async () => {
    for (const f of fakes) await f.close();
  });

  it('posts { model_path } to every replica; each then reports the new model_path', async () => {
    const backend = await connectCompletionsServers({ urls: fakes.map((f) => f.url), api: 'sglang', modelDir: MODEL_DIR });
    const results = await backend.updateWeightsFromDisk(reweighted);
    expect(results.map((r) => r.url)).toEqual(fakes.map((f) => f.url));
    for (const r of results) expect(r).toMatchObject({ message: 'Succeeded to update model weights.', numPausedRequests: 0 });
    for (const f of fakes) {
      expect(f.requests.filter((b) => 'model_path' in b)).toEqual([{ model_path: reweighted }]);
      const info = (await (await fetch(`${f.url}/get_model_info`)).json()) as { model_path: string };
      expect(info.model_path).toBe(reweighted);
    }
  });

  it('a directory that fails to load: the error names each endpoint and its message', async () => {
    const backend = await connectCompletionsServers({ urls: fakes.map((f) => f.url), api: 'sglang', modelDir: MODEL_DIR });
    const err = await backend.updateWeightsFromDisk('/nonexistent/step-9').catch((e: Error) => e);
    expect(err).toMatchObject({ code: 'ERR_SERVER' });
    expect((err as Error).message).toMatch(/failed on 2 of 2 endpoints/);
    for (const f of fakes) expect((err as Error).message).toContain(`${f.url}/update_weights_from_disk: HTTP 400: Failed to get weights iterator: /nonexistent/step-9 has no config.json.`);
    await expect(backend.updateWeightsFromDisk('')).rejects.toThrow(/expected a model directory path/);
  });

  it('one replica down: the error names that endpoint only; the fake\'s 422 for a bad body is read too', async () => {
    const down = await canned(200, '{}');
    await down.close();
    const backend = await connectCompletionsServers({ urls: [fakes[0]!.url, down.url], api: 'sglang', modelDir: MODEL_DIR, model: 'fake-model', maxContextTokens: 4096 });
    const err = (await backend.updateWeightsFromDisk(reweighted).catch((e: Error) => e)) as Error;
    expect(err.message).toMatch(new RegExp(`failed on 1 of 2 endpoints: ${down.url}/update_weights_from_disk: connection failed: ECONNREFUSED`));
    expect(err.message).not.toContain(fakes[0]!.url);
    const r = await fetch(`${fakes[0]!.url}/update_weights_from_disk`, { method: 'POST', body: JSON.stringify({ load_format: 'auto' }) });
    expect(r.status).toBe(422);
    expect(await r.json()).toMatchObject({ detail: [{ type: 'missing', loc: ['body', 'model_path'] }] });
  });
});

describe('updateWeightsFromDisk on servers without the endpoint, or silent', () => {
  it('vLLM (FastAPI 404): a clear error saying how vLLM takes new weights', async () => {
    const vllm = await canned(404, '{"detail":"Not Found"}');
    try {
      const backend = await connectCompletionsServers({ urls: vllm.url, api: 'vllm', modelDir: MODEL_DIR, model: 'm', maxContextTokens: 2048 });
      await expect(backend.updateWeightsFromDisk(reweighted)).rejects.toThrow(/HTTP 404: the server has no POST \/update_weights_from_disk \(vLLM serves no reload from a directory: restart it with --model DIR/);
    } finally {
      await vllm.close();
    }
  });

  it('no answer within the client timeout: an error naming the endpoint and the timeout', async () => {
    const silent = await canned(0, '');
    try {
      const backend = await connectCompletionsServers({ urls: silent.url, api: 'sglang', modelDir: MODEL_DIR, model: 'm', maxContextTokens: 2048, timeoutMs: 300 });
      await expect(backend.updateWeightsFromDisk(reweighted)).rejects.toThrow(`${silent.url}/update_weights_from_disk: no answer within 300 ms`);
    } finally {
      await silent.close();
    }
  });
});

describe('updateWeightsFromDisk on two mempo serve replicas', () => {
  const models: LocalModel[] = [];
  const servers: http.Server[] = [];
  const urls: string[] = [];
  beforeAll(async () => {
    for (let k = 0; k < 2; k++) {
      const m = await LocalModel.load(MODEL_DIR);
      const s = createCompletionsServer(m);
      models.push(m);
      servers.push(s);
      urls.push(await listen(s, 0));
    }
  });
  afterAll(async () => {
    for (const s of servers) {
      s.closeAllConnections();
      await new Promise((r) => s.close(r));
    }
    for (const m of models) await m.dispose();
  });

  it.each(['sglang', 'vllm'] as const)('--server-api %s: both replicas answer with the new weights, then with the old ones exactly', async (api) => {
    const backend = await connectCompletionsServers({ urls, api, modelDir: MODEL_DIR, scoreBatchSize: 1 });
    // Four single-item requests, round robin: two on each replica.
    const item = { contextIds: randomIds(20, 11), targetIds: randomIds(5, 12) };
    const items = [item, item, item, item];
    const before = await backend.score(items);
    for (const s of before) expect(s).toEqual(before[0]);
    const results = await backend.updateWeightsFromDisk(reweighted);
    expect(results.map((r) => r.url)).toEqual(urls);
    for (const r of results) expect(r.message).toMatch(/^Succeeded to update model weights from /);
    const after = await backend.score(items);
    for (const s of after) expect(s).toEqual(after[0]);
    expect(maxAbsDiff(after[0]!, before[0]!)).toBeGreaterThan(1e-2);
    expect(backend.stats().endpoints.map((e) => e.requests)).toEqual([4, 4]);
    await backend.updateWeightsFromDisk(MODEL_DIR);
    expect(await backend.score(items)).toEqual(before);
  });
});
