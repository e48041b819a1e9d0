/**
 * End to end over real HTTP: two `mempo serve` replicas and one `mempo serve-retriever`, spawned
 * from the built CLI (dist/cli/main.js) on loopback ports, drive `mempo rollout --server ...` in
 * both dialects (vLLM /v1/completions, SGLang /generate); the batch must equal, token for token,
 * the in-process run with the same seed, greedy and sampled. Then faults through whole runs: a
 * replica SIGKILLed mid-run, a replica answering 500 for a while, a retriever timing out, servers
 * whose answers are wrong for some requests (only those trajectories fail) or for all (the run
 * stops, and --resume finishes it).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { main } from '../../../src/cli/main';
import { createRng } from '../../../src/rng';
import { mixSeed } from '../../../src/rng';
import { streamSeed } from '../../../src/engines/http/client';

const ROOT = resolve(__dirname, '..', '..', '..');
const CLI = join(ROOT, 'dist', 'cli', 'main.js');

/** Every .ts file under `dir`, recursively. */
function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    return e.isDirectory() ? tsFiles(p) : e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [p] : [];
  });
}

// The replicas run the built CLI: every source file must have its build output, at least as new
// (whatever the layout of src/; tsconfig.build.json maps src/X.ts to dist/X.js).
function checkBuilt(): void {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run npm run build:ts first`);
  const src = join(ROOT, 'src');
  for (const f of tsFiles(src)) {
    const out = join(ROOT, 'dist', relative(src, f)).replace(/\.ts$/, '.js');
    if (!existsSync(out) || statSync(f).mtimeMs > statSync(out).mtimeMs) throw new Error(`dist/ is older than src/ (${relative(ROOT, f)}): run npm run build:ts first`);
  }
}

interface Child {
  proc: ChildProcess;
  url: string;
  stderr: () => string;
}

/** Spawns `node dist/cli/main.js ...args` and waits for its "listening on URL" line. */
function startCli(args: string[]): Promise<Child> {
  return new Promise((resolveChild, reject) => {
    const proc = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, env: { ...process.env }, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    const timer = setTimeout(() => reject(new Error(`mempo ${args.join(' ')} did not start within 60 s: ${err}`)), 60_000);
    proc.stderr!.on('data', (c: Buffer) => {
      err += c.toString();
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        resolveChild({ proc, url: m[1]!, stderr: () => err });
      }
    });
    proc.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`mempo ${args.join(' ')} exited (${code ?? signal}) before listening: ${err}`));
    });
  });
}

function stop(c: Child | undefined): Promise<void> {
  if (c === undefined || c.proc.exitCode !== null || c.proc.signalCode !== null) return Promise.resolve();
  return new Promise((r) => {
    c.proc.once('exit', () => r());
    c.proc.kill('SIGTERM');
  });
}

/**
 * A pass-through HTTP proxy whose `decide(n)` (n = 1, 2, ... per POST request) can answer an error,
 * delay the request, or run an action before forwarding it. `close()` refuses new connections and
 * drops open ones.
 */
interface Proxy {
  url: string;
  count: () => number;
  close: () => Promise<void>;
}
type Decision = { status: number } | { delayMs: number } | { before: () => void } | null;
async function proxy(target: string, decide: (n: number) => Decision): Promise<Proxy> {
  let n = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const d = req.method === 'POST' ? decide(++n) : null;
      if (d !== null && 'status' in d) {
        res.writeHead(d.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: `injected ${d.status}` } }));
        return;
      }
      if (d !== null && 'before' in d) d.before();
      const forward = () =>
        fetch(target + (req.url ?? '/'), { method: req.method, headers: { 'content-type': 'application/json' }, body: req.method === 'POST' ? Buffer.concat(chunks) : undefined })
          .then(async (r) => {
            const body = await r.text();
            if (res.destroyed) return;
            res.writeHead(r.status, { 'content-type': 'application/json' });
            res.end(body);
          })
          .catch(() => res.destroy());
      if (d !== null && 'delayMs' in d) setTimeout(forward, d.delayMs);
      else void forward();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    count: () => n,
    close: () => new Promise<void>((r) => {
      server.close(() => r());
      server.closeAllConnections();
    }),
  };
}

/**
 * A pass-through HTTP proxy that may rewrite each POST answer: `edit(request body, answer text)`
 * returns the text to send instead (the upstream status is kept). GETs pass through.
 */
async function tamperer(target: string, edit: (req: Record<string, any>, answer: string) => string): Promise<Proxy> {
  let n = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = req.method === 'POST' ? Buffer.concat(chunks) : undefined;
      if (body !== undefined) n++;
      fetch(target + (req.url ?? '/'), { method: req.method, headers: { 'content-type': 'application/json' }, body })
        .then(async (r) => {
          const text = await r.text();
          res.writeHead(r.status, { 'content-type': 'application/json' });
          res.end(body === undefined ? text : edit(JSON.parse(body.toString()) as Record<string, any>, text));
        })
        .catch(() => res.destroy());
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    count: () => n,
    close: () => new Promise<void>((r) => {
      server.close(() => r());
      server.closeAllConnections();
    }),
  };
}

function sink(): Writable & { text: () => string } {
  const chunks: string[] = [];
  const w = new Writable({ write(c: Buffer, _e, cb) { chunks.push(c.toString()); cb(); } }) as Writable & { text: () => string };
  w.text = () => chunks.join('');
  return w;
}

interface Rec {
  uid: string;
  sample: number;
  promptIds: number[];
  responseIds: number[];
  responseMask: number[];
  oldLogp: number[] | null;
  rounds: { index: number; start: number; end: number; memSpan: [number, number] | null; memReward: number | null; pFull: number | null; pMem: number | null; action: string | null; query: string | null; answer: string | null; finishReason: string; observation: unknown }[];
  score: number | null;
  formatValid: boolean;
  outcomeAdvantage: number[];
  memoryAdvantage: number[];
  advantages: number[];
  text: string;
  doneReason: string | null;
  error: string | null;
  excluded: boolean;
}

interface Run {
  code: number;
  err: string;
  records: Rec[];
  summary: Record<string, any>;
  out: string;
}

const tmp = mkdtempSync(join(tmpdir(), 'mempo-serve-e2e-'));
let runNo = 0;
// 2 questions × 2 samples, at most 2 rounds of at most 40 tokens: small enough for this 2-core machine.
// The search-only world (--no-pages) in every run: the in-process reference and the runs over `serve-retriever`'s corpus.
const SMALL = ['--limit', '2', '-n', '2', '--max-turns', '2', '--max-round-tokens', '40', '--threads', '1', '--no-report', '--seed', '3', '--no-pages'];

async function rollout(args: string[], dir?: string): Promise<Run> {
  const out = dir ?? join(tmp, `run-${++runNo}`);
  const stdout = sink();
  const stderr = sink();
  const code = await main(['rollout', '--out', out, ...SMALL, ...args], { stdout, stderr });
  const batch = join(out, 'batch.jsonl');
  const records = existsSync(batch) ? readFileSync(batch, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Rec) : [];
  const sp = join(out, 'summary.json');
  const summary = existsSync(sp) ? (JSON.parse(readFileSync(sp, 'utf8')) as Record<string, any>) : {};
  return { code, err: stderr.text(), records, summary, out };
}

const close = (a: number, b: number, tol: number) => Math.abs(a - b) <= tol;

/** Every record is internally consistent: lengths, masks, rounds inside the response. */
function expectWellFormed(records: Rec[]): void {
  for (const r of records) {
    const n = r.responseIds.length;
    expect(r.responseMask.length).toBe(n);
    expect(r.advantages.length).toBe(n);
    if (r.oldLogp !== null) {
      expect(r.oldLogp.length).toBe(n);
      r.oldLogp.forEach((lp, k) => expect(r.responseMask[k] ? lp <= 0 && Number.isFinite(lp) : lp === 0).toBe(true));
    }
    let at = 0;
    for (const round of r.rounds) {
      expect(round.start).toBe(at);
      expect(round.end).toBeGreaterThanOrEqual(round.start);
      for (let k = round.start; k < round.end; k++) expect(r.responseMask[k]).toBe(1);
      at = round.observation ? (round.observation as { end: number }).end : round.end;
    }
    expect(at).toBe(n);
  }
}

/**
 * `b` equals the in-process batch `a`: the same tokens, rounds, scores; log-probs, memory rewards
 * and outcome advantages within 1e-4. Memory advantages are compared only in groups whose memory
 * rewards differ by more than 1e-2: in a group of (near-)identical trajectories the rewards agree
 * to ~1e-7 but the group std is ~1e-7 too, so (r - mean) / (std + 1e-6) turns float noise into
 * advantages of up to ~0.1 — in-process scoring of identical items in different micro-batch
 * positions already shows it.
 */
function expectSameBatch(a: Rec[], b: Rec[]): void {
  expect(b.length).toBe(a.length);
  expectWellFormed(b);
  a.forEach((x, i) => expectSameRecord(a, x, b[i]!));
}

/** One record of `b` equals its in-process twin `x` (from batch `a`), as expectSameBatch says. */
function expectSameRecord(a: Rec[], x: Rec, y: Rec, advantages = true): void {
  const spread = new Map<string, number>();
  for (const uid of new Set(a.map((r) => r.uid))) {
    const xs = a.filter((r) => r.uid === uid).flatMap((r) => r.rounds.map((q) => q.memReward).filter((v): v is number => v !== null));
    spread.set(uid, xs.length ? Math.max(...xs) - Math.min(...xs) : 0);
  }
  {
    expect([y.uid, y.sample]).toEqual([x.uid, x.sample]);
    expect(y.promptIds).toEqual(x.promptIds);
    expect(y.responseIds).toEqual(x.responseIds);
    expect(y.responseMask).toEqual(x.responseMask);
    expect([y.text, y.score, y.formatValid, y.doneReason, y.error, y.excluded]).toEqual([x.text, x.score, x.formatValid, x.doneReason, x.error, x.excluded]);
    expect(y.rounds.map((q) => [q.index, q.start, q.end, q.memSpan, q.action, q.query, q.answer, q.finishReason])).toEqual(
      x.rounds.map((q) => [q.index, q.start, q.end, q.memSpan, q.action, q.query, q.answer, q.finishReason]),
    );
    x.rounds.forEach((q, k) => {
      for (const f of ['memReward', 'pFull', 'pMem'] as const) {
        const u = q[f];
        const v = y.rounds[k]![f];
        expect(u === null ? v === null : v !== null && close(u, v, 1e-4)).toBe(true);
      }
    });
    expect(x.oldLogp!.every((lp, k) => close(lp, y.oldLogp![k]!, 1e-4))).toBe(true);
    if (!advantages) return;
    expect(x.outcomeAdvantage.every((v, k) => close(v, y.outcomeAdvantage[k]!, 1e-4))).toBe(true);
    if (spread.get(x.uid)! > 1e-2) {
      expect(x.memoryAdvantage.every((v, k) => close(v, y.memoryAdvantage[k]!, 1e-4))).toBe(true);
      expect(x.advantages.every((v, k) => close(v, y.advantages[k]!, 1e-4))).toBe(true);
    }
  }
}

test('streamSeed(seed, i) starts stream 0 where createRng(seed, i) starts', () => {
  for (const seed of [0, 1, 3, 0x7fffffff, 0xffffffff, 2 ** 40 + 12345]) {
    for (const i of [0, 1, 2, 15, 63]) {
      const a = createRng(seed, i);
      const b = createRng(streamSeed(seed, i), 0);
      expect(streamSeed(seed, i)).toBeLessThan(2 ** 32);
      for (let k = 0; k < 5; k++) expect(b()).toBe(a());
    }
  }
});

describe('rollout over mempo serve replicas', () => {
  let replicas: Child[] = [];
  let retriever: Child | undefined;
  let greedy: Run;
  let sampled: Run;

  beforeAll(async () => {
    checkBuilt();
    [replicas, retriever] = await Promise.all([
      Promise.all([0, 1].map(() => startCli(['serve', '--port', '0', '--max-concurrency', '2']))),
      startCli(['serve-retriever', '--port', '0']),
    ]);
    // The in-process references: the local model, the local BM25 corpus.
    greedy = await rollout(['--temperature', '0', '--quiet']);
    sampled = await rollout(['--temperature', '1', '--quiet']);
    expect([greedy.code, sampled.code]).toEqual([0, 0]);
    expect(greedy.records.length).toBe(4);
  }, 120_000);

  afterAll(async () => {
    await Promise.all([...replicas, retriever].map(stop));
  });

  const servers = () => ['--server', `${replicas[0]!.url},${replicas[1]!.url}`];

  for (const api of ['vllm', 'sglang']) {
    test(`${api}: greedy and seeded sampling over two replicas give the in-process batch token for token`, async () => {
      const g = await rollout(['--temperature', '0', ...servers(), '--server-api', api, '--retriever', retriever!.url]);
      expect(g.code).toBe(0);
      expect(g.err).toContain(`server model "mempo-tiny" (from ${replicas[0]!.url}/v1/models)`);
      expectSameBatch(greedy.records, g.records);
      const s = await rollout(['--temperature', '1', ...servers(), '--server-api', api, '--retriever', retriever!.url, '--quiet']);
      expect(s.code).toBe(0);
      expectSameBatch(sampled.records, s.records);
      // Both replicas served requests; scoring went out in batches of several items.
      const st = s.summary['server'];
      expect(st).toMatchObject({ api, model: 'mempo-tiny', failedRequests: 0, retries: 0 });
      expect(st.endpoints.map((e: any) => e.url)).toEqual(replicas.map((r) => (api === 'vllm' ? `${r.url}/v1/completions` : `${r.url}/generate`)));
      for (const e of st.endpoints) expect(e.requests).toBeGreaterThan(0);
      expect(st.scoredItems).toBe(s.summary['scoredItems']);
      expect(st.scoringRequests).toBeLessThan(st.scoredItems);
    }, 120_000);
  }

  test('bad server flags are errors naming the flag', async () => {
    const r1 = await rollout(['--server', 'ftp://example.org']);
    expect(r1.code).toBe(2);
    expect(r1.err).toContain("option '--server <url>' argument 'ftp://example.org' is invalid");
    const r2 = await rollout(['--server-api', 'sglang']);
    expect(r2.code).toBe(2);
    expect(r2.err).toContain('--server-api needs --server URL');
    const r3 = await rollout([...servers(), '--server-api', 'openai']);
    expect(r3.err).toContain("argument 'openai' is invalid. Allowed choices are vllm, sglang.");
    const r4 = await rollout([...servers(), '--server-model', 'qwen']);
    expect(r4.code).toBe(2);
    expect(r4.err).toContain(`--server-model: model "qwen" is not served: ${replicas[0]!.url}/v1/models lists "mempo-tiny"`);
    expect(existsSync(join(r4.out, 'batch.jsonl'))).toBe(false);
  }, 60_000);

  test('a replica SIGKILLed mid-run: the run finishes on the other, no trajectory lost', async () => {
    const victim = await startCli(['serve', '--port', '0']);
    // In front of the victim: after 3 requests went through, the 4th kills it and the proxy stops listening.
    let killed = false;
    const p = await proxy(victim.url, (n) => (n === 4 ? { before: () => { killed = true; victim.proc.kill('SIGKILL'); void p.close(); } } : null));
    try {
      const r = await rollout(['--temperature', '0', '--server', p.url, '--server', replicas[1]!.url, '--server-backoff', '10', '--quiet']);
      expect(killed).toBe(true);
      expect(r.code).toBe(0);
      expectSameBatch(greedy.records, r.records);
      const [dead, live] = r.summary['server'].endpoints;
      expect(dead.failures).toBeGreaterThan(0);
      expect(dead.lastError).toMatch(/connection failed/);
      expect(live.failures).toBe(0);
      expect(r.summary['server'].failedRequests).toBe(0);
      expect(r.err).toMatch(/warning: \d+ of \d+ server requests failed and were retried/);
    } finally {
      await p.close();
      await stop(victim);
    }
  }, 120_000);

  test('a replica answering 500 for a while: retries and cooldown carry the run, the errors are reported', async () => {
    const p = await proxy(replicas[0]!.url, (n) => (n <= 5 ? { status: 500 } : null));
    try {
      const r = await rollout(['--temperature', '0', '--server', `${p.url},${replicas[1]!.url}`, '--server-backoff', '10', '--quiet']);
      expect(r.code).toBe(0);
      expectSameBatch(greedy.records, r.records);
      // At least 3 failures in a row took it out of rotation (requests already in flight there fail too);
      // every failed try was retried once, on the other replica, and succeeded.
      const st = r.summary['server'];
      const bad = st.endpoints[0];
      expect(bad.failures).toBeGreaterThanOrEqual(3);
      expect(bad.failures).toBeLessThanOrEqual(5);
      expect(bad.cooldowns).toBe(1);
      expect(bad.lastError).toContain('HTTP 500: {"error":{"message":"injected 500"}}');
      expect(st.endpoints[1].failures).toBe(0);
      expect(st.retries).toBe(bad.failures);
      expect(st.failedRequests).toBe(0);
      expect(r.err).toContain(`warning: ${bad.failures} of ${st.requests} server requests failed and were retried (${bad.failures} retries); ${p.url}/v1/completions: ${bad.failures} failed, out of rotation 1×`);
      // A lone replica that answers 500 twice: the retries go to it again and succeed.
      const q = await proxy(replicas[1]!.url, (n) => (n <= 2 ? { status: 503 } : null));
      try {
        const lone = await rollout(['--temperature', '0', '--server', q.url, '--server-backoff', '10', '--quiet']);
        expect(lone.code).toBe(0);
        expectSameBatch(greedy.records, lone.records);
        expect(lone.summary['server']).toMatchObject({ retries: 2, failedRequests: 0 });
      } finally {
        await q.close();
      }
    } finally {
      await p.close();
    }
  }, 120_000);

  test('the retriever timing out: those trajectories are tool failures excluded from advantages, the run completes whole', async () => {
    // The first search request (the second POST: the first is the run's /access probe) waits 1.5 s before it is forwarded; the client gives up after 400 ms.
    const p = await proxy(retriever!.url.replace(/\/retrieve$/, ''), (n) => (n === 2 ? { delayMs: 1500 } : null));
    try {
      const r = await rollout([
        '--temperature', '0', ...servers(), '--retriever', `${p.url}/retrieve`, '--retriever-timeout', '400', '--retriever-retries', '0', '--questions-per-batch', '1',
      ]);
      expect(r.code).toBe(0);
      expect(r.records.length).toBe(4);
      expectWellFormed(r.records);
      const failed = r.records.filter((x) => x.error !== null);
      expect(failed.length).toBeGreaterThan(0);
      expect(failed.length).toBeLessThan(r.records.length);
      for (const f of failed) {
        expect(f).toMatchObject({ excluded: true, score: null, doneReason: 'tool-error' });
        expect(f.error).toContain(`The retrieval server at ${p.url}/retrieve did not answer after 1 attempt (last error: no answer within 400 ms)`);
        expect(f.advantages.every((v) => v === 0)).toBe(true);
        expect(f.rounds.every((q) => q.memReward === null)).toBe(true);
      }
      // The first question's searches failed; the second's went through.
      expect(new Set(failed.map((f) => f.uid)).size).toBe(1);
      expect(r.summary['toolErrors']).toBe(failed.length);
      expect(r.summary['excluded']).toBe(failed.length);
      expect(r.err).toContain(`warning: ${failed.length} trajectories hit a tool failure and were excluded from advantages`);
      // Nothing half-written: only whole files, no temporaries.
      expect(readdirSync(r.out).sort()).toEqual(['batch.jsonl', 'run.json', 'summary.json']);
      expect(readFileSync(join(r.out, 'batch.jsonl'), 'utf8').endsWith('\n')).toBe(true);
    } finally {
      await p.close();
    }
  }, 120_000);

  test('wrong answers (malformed JSON, token ids that do not match, another model) fail only the trajectories concerned; the rest equal the in-process run', async () => {
    // 3 questions × 2 samples, greedy: every trajectory searches in round 1 and answers in round 2.
    const three = ['--limit', '3', '--temperature', '0', '--quiet'];
    const ref = await rollout(three);
    expect(ref.code).toBe(0);
    expect(ref.records.map((r) => r.rounds.length)).toEqual([2, 2, 2, 2, 2, 2]);
    const [q0, q1, q2] = [...new Set(ref.records.map((r) => r.uid))] as [string, string, string];
    // Round 1 is one generation call of 6 requests; request i carries the seed of stream i of (seed 3, batch 0, step 0).
    const seedOf = (i: number) => streamSeed(mixSeed(3, 0, 0), i);
    const prompt0 = ref.records[0]!.promptIds;
    const edit = (req: Record<string, any>, answer: string): string => {
      if (req['prompt_logprobs'] === 0) {
        // Scoring (one item per request here): the items of q0's trajectories come back from another model.
        const p = req['prompt'][0] as number[];
        return prompt0.every((id, k) => p[k] === id) ? answer.replace('"model":"mempo-tiny"', '"model":"other"') : answer;
      }
      if (req['seed'] === seedOf(1)) return answer.slice(0, 40); // q0 sample 1, round 1: cut-off JSON
      if (req['seed'] === seedOf(2)) {
        // q1 sample 0, round 1: the echoed prompt ids are not the ones sent.
        const j = JSON.parse(answer);
        j.choices[0].prompt_token_ids[3] += 1;
        return JSON.stringify(j);
      }
      return answer;
    };
    const [pa, pb] = await Promise.all(replicas.map((r) => tamperer(r.url, edit)));
    try {
      const r = await rollout([...three, '--server', `${pa!.url},${pb!.url}`, '--server-score-batch', '1']);
      expect(r.code).toBe(0);
      expect(r.records.length).toBe(6);
      expectWellFormed(r.records);
      const at = (uid: string, sample: number) => r.records.find((x) => x.uid === uid && x.sample === sample)!;
      const failed = r.records.filter((x) => x.error !== null).map((x) => `${x.uid}/${x.sample}`);
      expect(failed).toEqual([`${q0}/0`, `${q0}/1`, `${q1}/0`]);
      const server = `http://127\\.0\\.0\\.1:(${new URL(pa!.url).port}|${new URL(pb!.url).port})/v1/completions`;
      expect(at(q0, 0).error).toMatch(new RegExp(`^${server} \\(scoring item \\d+ \\(${q0} sample 0 round 2, full context\\)\\): the answer comes from model "other", expected "mempo-tiny"$`));
      expect(at(q0, 1).error).toMatch(new RegExp(`^${server} \\(generation request 1 \\(${q0} sample 1 round 1\\)\\): the answer is not valid JSON: `));
      expect(at(q1, 0).error).toMatch(new RegExp(`^${server} \\(generation request 2 \\(${q1} sample 0 round 1\\)\\): "prompt_token_ids" do not match the ${at(q1, 0).promptIds.length} prompt tokens sent$`));
      for (const f of [at(q0, 0), at(q0, 1), at(q1, 0)]) {
        expect(f).toMatchObject({ doneReason: 'backend-error', excluded: true, score: null });
        expect(f.advantages.every((v) => v === 0)).toBe(true);
        expect(f.rounds.every((q) => q.memReward === null)).toBe(true);
      }
      // q0 sample 0 was generated whole and failed only on scoring; the generation failures keep no round.
      expect(at(q0, 0).responseIds).toEqual(ref.records[0]!.responseIds);
      expect([at(q0, 1).rounds.length, at(q1, 0).rounds.length]).toEqual([0, 0]);
      // The others equal the in-process run: q2's group entirely, q1 sample 1 up to its group's advantages
      // (normalised over the one sample left, as after a tool failure).
      ref.records.forEach((x) => {
        if (x.uid === q2) expectSameRecord(ref.records, x, at(x.uid, x.sample));
      });
      expectSameRecord(ref.records, ref.records[3]!, at(q1, 1), false);
      const st = r.summary;
      expect(st).toMatchObject({ trajectories: 6, excluded: 3, toolErrors: 0, backendErrors: 3 });
      // the three that did not fail end as they did in process
      const reasons: Record<string, number> = { 'backend-error': 3 };
      for (const x of [ref.records[3]!, ...ref.records.filter((y) => y.uid === q2)]) reasons[String(x.doneReason)] = (reasons[String(x.doneReason)] ?? 0) + 1;
      expect(st['doneReasons']).toEqual(reasons);
      // 2 generation requests and the 2 scoring requests of q0 sample 0 failed for good; none was retried.
      expect(st['server']).toMatchObject({ failedRequests: 4, failedGenerations: 2, failedItems: 2, retries: 0 });
      expect(r.err).toContain(`warning: 3 trajectories failed on the inference server (an answer missing or wrong) and were excluded from advantages; first error: ${at(q0, 0).error}`);
      expect(readdirSync(r.out).sort()).toEqual(['batch.jsonl', 'run.json', 'summary.json']);
      expect(readFileSync(join(r.out, 'batch.jsonl'), 'utf8').endsWith('\n')).toBe(true);
    } finally {
      await Promise.all([pa!.close(), pb!.close()]);
    }
  }, 180_000);

  test('servers that answer every request wrong stop the run with nothing half-written; --resume on good servers finishes it', async () => {
    const bad = await tamperer(replicas[0]!.url, (_req, answer) => answer.replace('"model":"mempo-tiny"', '"model":"other"'));
    try {
      const r = await rollout(['--temperature', '0', '--server', bad.url, '--questions-per-batch', '1']);
      expect(r.code).toBe(1);
      expect(r.err).toContain(
        `error: batch 1 of 2: all 2 trajectories failed on the inference server, so the run stops (no batch was finished; a resumed run redoes this one); ` +
          `first error: ${bad.url}/v1/completions (generation request 0 (${greedy.records[0]!.uid} sample 0 round 1)): the answer comes from model "other", expected "mempo-tiny"`,
      );
      expect(bad.count()).toBe(2);
      expect(readdirSync(r.out).sort()).toEqual(['batch.jsonl', 'run.json']);
      expect(readFileSync(join(r.out, 'batch.jsonl'), 'utf8')).toBe('');
      const again = await rollout(['--temperature', '0', ...servers(), '--questions-per-batch', '1', '--resume', '--quiet'], r.out);
      expect(again.code).toBe(0);
      expectSameBatch(greedy.records, again.records);
    } finally {
      await bad.close();
    }
  }, 120_000);
});
