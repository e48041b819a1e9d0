/**
 * `mempo serve` sheds abandoned work: a request whose client went away leaves the queue, and a
 * running one stops its generation at the next decode step, so the next client is not kept
 * waiting behind work nobody will read.
 */
import * as http from 'node:http';
import { LocalModel } from '../../src/engines/local/local-model';
import { createCompletionsServer, listen } from '../../src/servers/completions-server';
import { Limiter } from '../../src/servers/limiter';
import { RequestError } from '../../src/servers/http';
import { MODEL_DIR } from '../pipeline/helpers';

/** A POST on its own connection; `abort` destroys the socket, as a client timeout does. */
function post(base: string, body: unknown): { done: Promise<{ status: number; ms: number }>; abort: () => void } {
  const t0 = Date.now();
  const req = http.request(`${base}/v1/completions`, { method: 'POST', agent: false, headers: { 'content-type': 'application/json' } });
  const done = new Promise<{ status: number; ms: number }>((resolve, reject) => {
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: Date.now() - t0 }));
    });
    req.on('error', reject);
  });
  req.end(JSON.stringify(body));
  return { done, abort: () => req.destroy() };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('Limiter with an AbortSignal', () => {
  it('drops a queued run whose signal aborts, freeing its place in the queue', async () => {
    const limiter = new Limiter(1, 1);
    let release!: () => void;
    const first = limiter.run(() => new Promise<string>((r) => { release = () => r('first'); }));
    const ac = new AbortController();
    let ranQueued = false;
    const queued = limiter.run(async () => { ranQueued = true; return 'queued'; }, ac.signal);
    ac.abort();
    await expect(queued).rejects.toMatchObject({ status: 499 });
    // The queue (1 place) has room again: this one waits instead of getting 429.
    const next = limiter.run(async () => 'next');
    release();
    expect(await first).toBe('first');
    expect(await next).toBe('next');
    expect(ranQueued).toBe(false);
  }, 10_000);

  it('refuses a run whose signal already aborted and passes the signal to the running one', async () => {
    const limiter = new Limiter(1, 4);
    const ac = new AbortController();
    ac.abort();
    await expect(limiter.run(async () => 1, ac.signal)).rejects.toBeInstanceOf(RequestError);
    const live = new AbortController();
    expect(await limiter.run(async (s) => s === live.signal, live.signal)).toBe(true);
  });
});

describe('mempo serve cancels the work of clients that went away', () => {
  let model: LocalModel;
  beforeAll(async () => {
    model = await LocalModel.load(MODEL_DIR);
  });
  afterAll(() => model.dispose());

  it('generate stops between decode steps once its signal aborts', async () => {
    const ids = model.codec.encode('In which country is Mamek?');
    const ac = new AbortController();
    let steps = 0;
    const run = model.model.generateWithStats([{ ids }, { ids }], {
      maxNewTokens: 200,
      temperature: 100,
      seed: 1,
      decode: false,
      logitsProcessor: (_row, p) => {
        if (p === 0 && ++steps === 5) ac.abort();
      },
      signal: ac.signal,
    });
    await expect(run).rejects.toMatchObject({ name: 'AbortError' });
    expect(steps).toBe(5);
    const already = new AbortController();
    already.abort();
    await expect(model.model.generate([{ ids }], { maxNewTokens: 4, signal: already.signal })).rejects.toMatchObject({ name: 'AbortError' });
    await expect(model.model.generate([{ ids }], { maxNewTokens: 4, signal: 'stop' as never })).rejects.toThrow('options.signal');
  });

  it('a small request after abandoned heavy ones is served before one heavy request would finish', async () => {
    const server = createCompletionsServer(model, { maxConcurrency: 1 });
    const base = await listen(server, 0);
    try {
      const prompt = model.codec.encode('In which country is Mamek?');
      // temperature 100 samples nearly uniformly, so the sequences rarely stop before max_tokens.
      const heavy = (seed: number) => ({ prompt, n: 8, max_tokens: 128, temperature: 100, seed });
      const one = await post(base, heavy(1)).done;
      expect(one.status).toBe(200);
      const abandoned = [2, 3, 4, 5].map((s) => post(base, heavy(s)));
      abandoned.forEach((a) => a.done.catch(() => undefined));
      await sleep(Math.min(500, one.ms / 4));
      abandoned.forEach((a) => a.abort());
      const small = await post(base, { prompt, max_tokens: 1, seed: 9 }).done;
      expect(small.status).toBe(200);
      // Before: the small request waited for all four heavy ones (about 3.5 × one.ms).
      expect(small.ms).toBeLessThan(one.ms / 2);
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
