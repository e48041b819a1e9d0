// `npm run bench:serve`: the HTTP inference path (HttpCompletionsBackend) against the in-process
// model, on this machine.
//
// 1. Rollout throughput (trajectories/s): the same seeded rollout (embedded model and questions,
//    memory rewards on, local BM25 retriever in this process for every row, so that only the model
//    path differs) run in-process, then over 1 and 2 spawned `mempo serve` replicas on loopback.
//    Every replica and the in-process model get the same ONNX Runtime intra-op thread count
//    (--threads, default 1); the batches must come out token for token identical.
// 2. The client's own overhead per request, with tinybench: HttpCompletionsBackend.generate /
//    .score against (a) a stubbed fetch that returns a fixed valid answer (request building,
//    JSON, validation, dispatch; no socket) and (b) a trivial HTTP server in this process that
//    answers the same fixed body at once (adds Node's HTTP client and server over loopback).
//
// Flags: --quick (a smoke run: tiny rollout, short timings), --json (figures as JSON on stdout),
// --threads N (ORT threads per replica and in-process, default 1), --questions N, --group N,
// --skip-rollout, --skip-overhead.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Bench } from 'tinybench';

const require = createRequire(import.meta.url);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CLI = path.join(root, 'dist', 'cli', 'main.js');
const mempo = require(path.join(root, 'dist', 'index.js'));

const args = process.argv.slice(2);
const json = args.includes('--json');
const quick = args.includes('--quick');
const flag = (name, def) => {
  const i = args.indexOf(name);
  if (i < 0) return def;
  const v = Number(args[i + 1]);
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name}: expected a positive integer, received ${JSON.stringify(args[i + 1])}`);
  return v;
};
const threads = flag('--threads', 1);
const nQuestions = flag('--questions', quick ? 2 : 8);
const groupSize = flag('--group', quick ? 2 : 8);
const log = json ? () => {} : (...a) => console.log(...a);

const MODEL = path.join(root, 'models', 'mempo-tiny');
const QUESTIONS = path.join(root, 'data', 'world', 'train.jsonl');
const CORPUS = path.join(root, 'data', 'world', 'corpus.jsonl');

const machine = {
  cpu: os.cpus()[0]?.model ?? 'unknown',
  cores: os.cpus().length,
  node: process.version,
  loadAverage: os.loadavg().map((x) => Number(x.toFixed(2))),
  date: new Date().toISOString(),
};
log(`machine: ${machine.cpu}, ${machine.cores} cores, Node ${machine.node}, load average ${machine.loadAverage.join(' ')} at ${machine.date}`);

// ---------------------------------------------------------------------------------------------
// 1. Rollout throughput
// ---------------------------------------------------------------------------------------------

/** Spawns `mempo serve` and resolves with its URL once it listens. */
function startReplica() {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [CLI, 'serve', '--port', '0', '--threads', String(threads), '--max-concurrency', '1'], { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    const timer = setTimeout(() => { proc.kill('SIGKILL'); reject(new Error(`mempo serve did not start within 60 s: ${err}`)); }, 60_000);
    proc.stderr.on('data', (c) => {
      err += c.toString();
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, url: m[1] });
      }
    });
    proc.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`mempo serve exited (${code ?? signal}) before listening: ${err}`));
    });
  });
}

function stopReplica(r) {
  if (r.proc.exitCode !== null || r.proc.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    r.proc.once('exit', () => resolve());
    r.proc.kill('SIGTERM');
  });
}

const pipelineOptions = {
  rollout: { groupSize, maxTurns: 3, maxRoundTokens: 64, questionsPerBatch: 8, seed: 11, sampling: { temperature: 1 } },
};

async function timedRollout(name, engine, questions, retriever) {
  // Warm-up on one question (ORT session, connections, JIT); then the timed run.
  await mempo.runPipeline({ questions: questions.slice(0, 1), generator: engine, scorer: engine, retriever, options: { ...pipelineOptions, rollout: { ...pipelineOptions.rollout, groupSize: 1 } } });
  const t0 = performance.now();
  const { records, stats } = await mempo.runPipeline({ questions, generator: engine, scorer: engine, retriever, options: pipelineOptions });
  const s = (performance.now() - t0) / 1000;
  const generated = records.reduce((a, r) => a + r.responseMask.reduce((x, m) => x + m, 0), 0);
  const row = {
    name,
    trajectories: records.length,
    seconds: s,
    trajectoriesPerSec: records.length / s,
    generatedTokens: generated,
    tokensPerSec: generated / s,
    scoredItems: stats.scoredItems,
    generateSec: stats.times.generateMs / 1000,
    scoreSec: stats.times.scoreMs / 1000,
    failed: records.filter((r) => r.error !== null).length,
  };
  log(
    `${name.padEnd(32)} ${String(row.trajectories).padStart(4)} trajectories in ${s.toFixed(2).padStart(7)} s = ${row.trajectoriesPerSec.toFixed(2).padStart(7)} traj/s ` +
      `(${row.tokensPerSec.toFixed(0)} generated tok/s; generate ${row.generateSec.toFixed(2)} s, score ${row.scoreSec.toFixed(2)} s of ${row.scoredItems} items)`,
  );
  return { row, records };
}

const sameTokens = (a, b) => a.length === b.length && a.every((r, i) => r.uid === b[i].uid && r.sample === b[i].sample && r.responseIds.length === b[i].responseIds.length && r.responseIds.every((x, k) => x === b[i].responseIds[k]));

let rollout = null;
if (!args.includes('--skip-rollout')) {
  const questions = mempo.readQuestions(QUESTIONS).slice(0, nQuestions);
  const retriever = mempo.Bm25Retriever.fromJsonl(CORPUS);
  log(`\nrollout: ${questions.length} questions × ${groupSize} samples, ≤ 3 rounds of ≤ 64 tokens, temperature 1, seed 11, memory rewards on; ` +
    `retriever: local BM25 over the embedded corpus in this process; ORT intra-op threads ${threads} in-process and per replica; mempo serve --max-concurrency 1; client max in flight 8 per replica, score batch 8`);
  const rows = [];
  const inProcess = async (t) => {
    const local = await mempo.LocalModel.load(MODEL, { load: { sessionOptions: { intraOpNumThreads: t, interOpNumThreads: 1 } } });
    try {
      return await timedRollout(`in-process, ${t} ORT thread${t > 1 ? 's' : ''}`, local, questions, retriever);
    } finally {
      await local.dispose();
    }
  };
  const ref = await inProcess(threads);
  rows.push({ ...ref.row, threads, identicalToInProcess: true });
  // For reference: the in-process model on every core (what 2 replicas of 1 thread compete for).
  if (machine.cores > threads) {
    const all = await inProcess(machine.cores);
    rows.push({ ...all.row, threads: machine.cores, identicalToInProcess: sameTokens(ref.records, all.records) });
  }
  const replicas = [];
  try {
    for (const n of [1, 2]) {
      while (replicas.length < n) replicas.push(await startReplica());
      const backend = await mempo.connectCompletionsServers({ urls: replicas.map((r) => r.url), modelDir: MODEL });
      const run = await timedRollout(`${n} mempo serve replica${n > 1 ? 's' : ''} × ${threads} ORT thread${threads > 1 ? 's' : ''}`, backend, questions, retriever);
      const st = backend.stats();
      rows.push({ ...run.row, replicas: n, threads, identicalToInProcess: sameTokens(ref.records, run.records), requests: st.requests, retries: st.retries, perEndpoint: st.endpoints.map((e) => e.requests) });
      log(sameTokens(ref.records, run.records) ? `${''.padEnd(33)}(the same tokens as the in-process batch; ${st.requests} requests: ${st.endpoints.map((e) => e.requests).join(' + ')})` : '  WARNING: the batch differs from the in-process one (tokens)');
    }
  } finally {
    await Promise.all(replicas.map(stopReplica));
  }
  rollout = { questions: questions.length, groupSize, threads, options: pipelineOptions, rows };
}

// ---------------------------------------------------------------------------------------------
// 2. Client overhead per request
// ---------------------------------------------------------------------------------------------

const codec = { encode: () => [], decode: () => '', tokenId: () => undefined };
const ramp = (n, from) => Array.from({ length: n }, (_, k) => (from + 7 * k) % 2000 + 20);
// A MemPO-sized round: a 300-token context, 40 generated tokens; scoring items of 300 + 8 tokens.
const PROMPT = ramp(300, 1);
const GENERATED = ramp(40, 5);
const genAnswer = JSON.stringify({
  id: 'cmpl-0', object: 'text_completion', created: 0, model: 'fake',
  choices: [{
    index: 0, text: 'x'.repeat(120), finish_reason: 'length', token_ids: GENERATED, prompt_token_ids: PROMPT,
    logprobs: { tokens: GENERATED.map((id) => `token_id:${id}`), token_logprobs: GENERATED.map((_, k) => -0.1 - k / 100), top_logprobs: null, text_offset: GENERATED.map((_, k) => 3 * k) },
  }],
  usage: { prompt_tokens: PROMPT.length, completion_tokens: GENERATED.length, total_tokens: PROMPT.length + GENERATED.length },
});
const ITEMS = Array.from({ length: 8 }, (_, i) => ({ contextIds: ramp(300, 3 + i), targetIds: ramp(8, 900 + i) }));
const scoreAnswer = JSON.stringify({
  id: 'cmpl-1', object: 'text_completion', created: 0, model: 'fake',
  choices: ITEMS.map((it, index) => {
    const p = [...it.contextIds, ...it.targetIds];
    return {
      index, text: 'x', finish_reason: 'length', logprobs: null,
      prompt_logprobs: p.map((id, k) => (k === 0 ? null : { [String(id)]: { logprob: -1 - (k % 5) / 10, rank: 1, decoded_token: 'tok' } })),
    };
  }),
  usage: { prompt_tokens: 8 * 308, completion_tokens: 8, total_tokens: 8 * 309 },
});
const PARAMS = { temperature: 1, topP: 1, topK: 0, seed: 1, stop: ['</search>', '</answer>'] };
const genRequests = (n) => Array.from({ length: n }, (_, i) => ({ ids: PROMPT, maxNewTokens: 64, tag: { uid: 'q', sample: i, round: 1 } }));

const stubFetch = async (_url, init) => {
  const body = String(init.body);
  return new Response(body.includes('"prompt_logprobs"') ? scoreAnswer : genAnswer, { status: 200, headers: { 'content-type': 'application/json' } });
};

async function fakeServer() {
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(body.includes('"prompt_logprobs"') ? scoreAnswer : genAnswer);
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { server, url: `http://127.0.0.1:${server.address().port}` };
}

async function measure(where, what, fn, perCall, time) {
  const name = `${where}: ${what}`;
  const bench = new Bench({ time, warmupTime: Math.min(500, time / 4), warmupIterations: 5 });
  bench.add(name, fn);
  await bench.run();
  const r = bench.tasks[0].result;
  if (!r || r.state !== 'completed') throw new Error(`benchmark task ${name} did not complete: ${r?.state} ${r?.error ?? ''}`);
  const us = (r.latency.mean * 1000) / perCall;
  log(`${where.padEnd(9)} ${what.padEnd(38)} ${us.toFixed(1).padStart(8)} µs per request  (±${r.latency.rme.toFixed(1)} %, ${r.latency.samplesCount ?? r.latency.samples?.length ?? '?'} calls)`);
  return { name, usPerRequest: us, rmePercent: r.latency.rme };
}

let overhead = null;
if (!args.includes('--skip-overhead')) {
  const time = quick ? 300 : 3000;
  log(`\nclient overhead per request (tinybench, ~${time / 1000} s per row; generation: 300-token prompt, 40 tokens back with ids and log-probs; scoring: 8 items of 300 + 8 tokens per request, vLLM prompt_logprobs back)`);
  const fake = await fakeServer();
  const rows = [];
  try {
    log('stub: stubbed fetch returning the fixed answer (client only); loopback: HTTP to a fake server in this process answering the fixed body at once');
    for (const [where, opts] of [['stub', { fetch: stubFetch }], ['loopback', {}]]) {
      const b = new mempo.HttpCompletionsBackend([fake.url], { model: 'fake', codec, maxContextTokens: 2048, maxInFlight: 64, retries: 0, scoreBatchSize: 8, ...opts });
      // Sanity: the fixed answers are valid for these requests.
      const [g] = await b.generate(genRequests(1), PARAMS);
      if (g.tokenIds.length !== GENERATED.length) throw new Error('fake generation answer not accepted');
      const [s] = await b.score(ITEMS);
      if (s.length !== 8) throw new Error('fake scoring answer not accepted');
      rows.push({ where, kind: 'generation', batch: 1, ...(await measure(where, 'generate, 1 request per call', () => b.generate(genRequests(1), PARAMS), 1, time)) });
      rows.push({ where, kind: 'generation', batch: 64, ...(await measure(where, 'generate, 64 requests per call', () => b.generate(genRequests(64), PARAMS), 64, time)) });
      rows.push({ where, kind: 'scoring', batch: 1, ...(await measure(where, 'score, 1 request (8 items) per call', () => b.score(ITEMS), 1, time)) });
      const many = Array.from({ length: 32 }, () => ITEMS).flat();
      rows.push({ where, kind: 'scoring', batch: 32, ...(await measure(where, 'score, 32 requests (256 items) per call', () => b.score(many), 32, time)) });
    }
  } finally {
    fake.server.closeAllConnections();
    await new Promise((r) => fake.server.close(r));
  }
  overhead = { genAnswerBytes: genAnswer.length, scoreAnswerBytes: scoreAnswer.length, rows };
  log(`(answer sizes: generation ${genAnswer.length} bytes, scoring ${scoreAnswer.length} bytes)`);
}

machine.loadAverageAfter = os.loadavg().map((x) => Number(x.toFixed(2)));
log(`\nload average after: ${machine.loadAverageAfter.join(' ')}`);
if (json) process.stdout.write(`${JSON.stringify({ machine, rollout, overhead }, null, 2)}\n`);
