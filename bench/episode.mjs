// `node bench/episode.mjs`: captured episodes against the built-in pipeline's rollout (issue 45
// item 7). The same questions (the first --questions of data/world/train.jsonl, --group samples
// each, the embedded model, BM25 over the embedded corpus, the memory reward on) rolled out
//   pipeline   by runPipeline in this process (the `batch` schedule: one generate call per round
//              for every live trajectory);
//   agent      by collectEpisodes (src/agents/collect.ts) with a protocol agent written here: one
//              trajectory per episode, each round one `/v1/completions` call through the real
//              `openai` SDK to `mempo serve`'s server listening on loopback in this process (token
//              ids in, `return_token_ids` and log-probs out), its contexts, tags and observations
//              made by the pipeline's own protocol functions, BM25 for its searches, the outcome
//              reward of the pipeline as its reward, the memory reward by collectEpisodes' one
//              batched scorer pass. The server does not record tagged calls yet (capture is on
//              another branch), so the agent writes each answer into the recorder itself, as
//              test/train/rollout-source.test.ts does.
// Both share one LocalModel; rounds alternate the order (pipeline first, then agent first ...).
// Reported per contestant: wall seconds, trajectories, generated tokens, model calls, and the wall
// time per trajectory and per generated token; ratio agent / pipeline per round (median, range).
// The agent runs episodes --concurrency at once against a server of --server-concurrency (the
// `mempo serve` default: 1); each request samples alone, where the pipeline batches a round.
// Flags: --questions 4, --group 4, --rounds 2, --threads 1, --concurrency 8, --server-concurrency 1, --json.
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { root, flag, int, spread } from './args.mjs';

const require = createRequire(import.meta.url);
const dist = (p) => require(path.join(root, 'dist', p));
const mempo = dist('index.js');
const { createCompletionsServer, listen } = dist('servers/completions-server.js');
const { EpisodeRecorder } = dist('agents/capture.js');
const { collectEpisodes, EPISODE_HEADER } = dist('agents/collect.js');
const { runPipeline } = dist('pipeline/pipeline.js');
const { newTrajectory, protocolIds } = dist('pipeline/trajectory.js');
const { applyGeneration, applyObservation, roundContext } = dist('pipeline/round.js');
const { outcomeReward } = dist('pipeline/outcome-reward.js');
const { STOP_STRINGS } = dist('protocol/tags.js');
const { mixSeed } = dist('rng.js');
const { renderSearchObservation } = dist('retrieval/observation.js');
const { Bm25Retriever } = dist('retrieval/bm25.js');
const { readQuestions } = dist('io/questions.js');
const { resolveOptions } = dist('options.js');
const { EMBEDDED } = dist('paths.js');

const nQuestions = int('--questions', 4);
const group = int('--group', 4);
const rounds = int('--rounds', 2);
const threads = int('--threads', 1);
const concurrency = int('--concurrency', 8);
const serverConcurrency = int('--server-concurrency', 1);
const json = flag('--json');
const log = json ? (...a) => console.error(...a) : (...a) => console.log(...a);

const machine = { cpu: os.cpus()[0]?.model ?? 'unknown', cores: os.cpus().length, node: process.version, native: mempo.nativeInfo(), loadavgBefore: os.loadavg().map((x) => +x.toFixed(2)), date: new Date().toISOString() };
log(`machine: ${machine.cpu}, ${machine.cores} cores, SIMD ${machine.native.simd}, Node ${machine.node}, load ${machine.loadavgBefore.join(' ')}; ${threads} ORT thread(s)`);

const local = await mempo.LocalModel.load(EMBEDDED.model(), { load: { sessionOptions: { intraOpNumThreads: threads, interOpNumThreads: 1 } } });
const codec = local.codec;
const retriever = Bm25Retriever.fromJsonl(EMBEDDED.corpus());
const questions = readQuestions(EMBEDDED.split('train')).slice(0, nQuestions);
const options = resolveOptions({ rollout: { groupSize: group, questionsPerBatch: nQuestions } });
const ids = protocolIds(codec);
const server = createCompletionsServer(local, { maxConcurrency: serverConcurrency });
const base = await listen(server, 0);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0 });

// Every generate call the model makes (either contestant): calls and generated tokens.
const count = { calls: 0, tokens: 0 };
const inner = local.model.generateWithStats.bind(local.model);
local.model.generateWithStats = async (prompts, o) => {
  const out = await inner(prompts, o);
  count.calls++;
  count.tokens += out.results.reduce((a, r) => a + r.tokenIds.length, 0);
  return out;
};

async function pipeline() {
  const res = await runPipeline({ questions, generator: local, scorer: local, retriever, options });
  return { trajectories: res.records.length, records: res.records };
}

/** The protocol agent: the pipeline's trajectory, each round's generation through the endpoint. */
function makeAgent(recorder) {
  return async (task, c) => {
    const sample = Number(c.episode.split('-').pop());
    const t = newTrajectory(task, sample, codec, options);
    const q = questions.indexOf(task);
    const r = options.rollout;
    let round = 0;
    while (t.state === 'generating') {
      const ctx = roundContext(t, codec, options);
      const budget = Math.min(r.maxRoundTokens, r.maxResponseTokens - t.responseIds.length, local.maxContextTokens - ctx.length);
      if (budget <= 0) break;
      round++;
      const res = await client.completions.create({
        model: c.model, prompt: ctx, max_tokens: budget, temperature: r.sampling.temperature, top_p: r.sampling.topP,
        seed: mixSeed(r.seed, q, sample, round) >>> 0, // a stream of its own per question, sample and round
        stop: [...STOP_STRINGS], logprobs: 0, return_token_ids: true,
      }, { headers: c.headers });
      const ch = res.choices[0];
      // vLLM's 'stop' with no stop_reason is the eos / end-of-turn id; the pipeline calls that 'eos'
      const finishReason = ch.finish_reason === 'length' ? 'length' : ch.stop_reason === null || ch.stop_reason === undefined ? 'eos' : 'stop';
      const out = { tokenIds: ch.token_ids, logprobs: Float32Array.from(ch.logprobs.token_logprobs), finishReason };
      recorder.admit(c.headers[EPISODE_HEADER], ctx.length, budget);
      recorder.record(c.episode, { promptIds: ctx, sampledIds: ch.token_ids, logprobs: ch.logprobs.token_logprobs, finishReason: ch.finish_reason, weightVersion: 0 });
      applyGeneration(t, out, ctx, codec, ids, options);
      if (t.state === 'tool-calling') {
        if (t.pendingQuery === null) throw new Error(`episode ${c.episode}: round ${round} asks for a page; this agent has only the search tool`);
        const docs = await retriever.search([t.pendingQuery], options.tool.topk);
        applyObservation(t, renderSearchObservation(docs[0], { docMaxChars: options.tool.docMaxChars, format: options.tool.observationFormat }), codec, options);
      }
    }
    return t;
  };
}

async function agent() {
  const recorder = new EpisodeRecorder();
  const res = await collectEpisodes({
    tasks: questions, groupSize: group, concurrency, endpoint: { baseURL: `${base}/v1`, model: 'mempo-tiny', recorder },
    agent: makeAgent(recorder), reward: (_task, ep) => outcomeReward(ep.result, codec, options).score ?? 0,
    scorer: local, codec, memory: options.memory, advantage: options.advantage,
  });
  if (res.failed.length > 0 || res.expired.length > 0) throw new Error(`episodes failed: ${JSON.stringify(res.failed)}, expired: ${JSON.stringify(res.expired)}`);
  return { trajectories: group * questions.length, records: res.records, snapshots: res.snapshots };
}

const contestants = { pipeline, agent };
const rows = { pipeline: [], agent: [] };
try {
  for (let r = 0; r < rounds; r++) {
    for (const name of r % 2 === 0 ? ['pipeline', 'agent'] : ['agent', 'pipeline']) {
      count.calls = 0;
      count.tokens = 0;
      const t = performance.now();
      const out = await contestants[name]();
      const s = (performance.now() - t) / 1000;
      const row = { s: +s.toFixed(3), trajectories: out.trajectories, records: out.records.length, generate_calls: count.calls, generated_tokens: count.tokens,
        s_per_trajectory: +(s / out.trajectories).toFixed(4), ms_per_token: +(1000 * s / count.tokens).toFixed(3) };
      rows[name].push(row);
      log(`round ${r + 1} ${name.padEnd(8)} ${row.s} s, ${row.trajectories} trajectories (${row.records} records), ${row.generate_calls} generate calls, ${row.generated_tokens} tokens: ` +
        `${row.s_per_trajectory} s per trajectory, ${row.ms_per_token} ms per token`);
    }
  }
} finally {
  await new Promise((r) => server.close(r));
  await local.dispose();
}
const result = {
  machine: { ...machine, loadavgAfter: os.loadavg().map((x) => +x.toFixed(2)) }, threads, questions: nQuestions, group, concurrency, serverConcurrency, rows,
  ratio_per_trajectory: spread(rows.agent.map((x, i) => x.s_per_trajectory / rows.pipeline[i].s_per_trajectory)),
  ratio_per_token: spread(rows.agent.map((x, i) => x.ms_per_token / rows.pipeline[i].ms_per_token)),
};
log(`agent / pipeline: wall per trajectory ${result.ratio_per_trajectory.median}× (${result.ratio_per_trajectory.min}–${result.ratio_per_trajectory.max}), per generated token ${result.ratio_per_token.median}× (${result.ratio_per_token.min}–${result.ratio_per_token.max})`);
if (json) console.log(JSON.stringify(result, null, 1));
