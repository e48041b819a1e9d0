/**
 * `TrainContext.rollout` (issue 45 item 3): `runTraining` trains on batches an agent made through
 * the OpenAI-compatible endpoint (collectEpisodes), with the real torch learner, and the weights
 * the learner writes are what the endpoint serves next: the server's prompt log-probs after the
 * run equal a fresh model loaded from the last checkpoint, and differ from the starting ones.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EpisodeRecorder } from '../../src/agents/capture';
import { collectEpisodes, type AgentClient } from '../../src/agents/collect';
import type { Question } from '../../src/contracts';
import { CausalLM } from '../../src/engines/local/causal-lm';
import { LocalModel } from '../../src/engines/local/local-model';
import { spawnLearner, type SpawnedLearner } from '../../src/learner/spawn';
import { resolveOptions } from '../../src/options';
import { createCompletionsServer, listen } from '../../src/servers/completions-server';
import { runTraining } from '../../src/train/loop';
import { resolveTrainOptions } from '../../src/train/options';
import type { TrainContext } from '../../src/train/step';
import { CORPUS, MODEL_DIR } from '../pipeline/helpers';
import { Bm25Retriever } from '../../src/retrieval/bm25';

jest.setTimeout(240_000);

const PROBE = [5, 17, 42, 99, 7, 3, 250, 11];
const root = mkdtempSync(join(tmpdir(), 'mempo-rollout-source-'));
let local: LocalModel;
let server: Server;
let base: string;
let learner: SpawnedLearner;
const recorder = new EpisodeRecorder();

async function post(path: string, body: unknown, headers: Record<string, string> = {}): Promise<Record<string, unknown>> {
  const res = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  const json = (await res.json()) as Record<string, unknown>;
  if (res.status !== 200) throw new Error(`${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** The endpoint's teacher-forced log-probs of PROBE (its current weights). */
async function probe(): Promise<number[]> {
  const r = await post('/v1/completions', { prompt: PROBE, max_tokens: 0, prompt_logprobs: 0 });
  const choice = (r['choices'] as Array<{ prompt_logprobs: Array<null | Record<string, { logprob: number }>> }>)[0]!;
  return choice.prompt_logprobs.slice(1).map((x, i) => x![String(PROBE[i + 1])]!.logprob);
}

beforeAll(async () => {
  local = await LocalModel.load(MODEL_DIR, { load: { sessionOptions: { intraOpNumThreads: 1 } } });
  server = createCompletionsServer(local, { recorder });
  base = await listen(server, 0);
  learner = await spawnLearner({ model: MODEL_DIR, seed: 3, threads: 1 });
});
afterAll(async () => {
  await learner?.close();
  await new Promise((r) => server.close(r));
  await local.dispose();
  rmSync(root, { recursive: true, force: true });
});

it('runTraining trains on collectEpisodes batches and the endpoint then serves the learner\'s weights', async () => {
  const endpoint = { baseURL: `${base}/v1`, model: 'mempo-tiny', recorder };
  /** One sampled call per episode, prompted with the question's ids; the endpoint records it under the episode's header. */
  const seen: Array<{ step: number; episode: string; seed: number }> = [];
  let step = 0;
  const agent = async (task: Question, c: AgentClient) => {
    const prompt = local.codec.encode(task.question);
    const seed = c.seedFor(1);
    seen.push({ step, episode: c.episode, seed });
    const r = await post('/v1/completions', { model: c.model, prompt, max_tokens: 12, temperature: 1, seed, return_token_ids: true }, c.headers);
    const ch = (r['choices'] as Array<{ token_ids: number[] }>)[0]!;
    return ch.token_ids.length;
  };
  const tasks: Question[] = [
    { id: 'a', question: 'In which country is Mamek?', golds: ['Thersekle'], hops: 1, objectives: 1 },
    { id: 'b', question: 'Who published The Hollow Winter?', golds: ['Faithhe Works'], hops: 1, objectives: 1 },
  ];
  const train = resolveTrainOptions({ steps: 2, questionsPerStep: 2, evalEvery: 0, seed: 4, checkpointEvery: 1, keepCheckpoints: 2, optim: { lr: 5e-3 }, loss: { klCoef: 0 } });
  const sources: number[] = [];
  const ctx: TrainContext = {
    generator: local, scorer: null, retriever: Bm25Retriever.fromJsonl(CORPUS), learner,
    sync: async (dir) => { await local.reload(dir); },
    pipeline: resolveOptions({ rollout: { groupSize: 3 } }), train, dev: [],
    rollout: async (s, questions, seed) => {
      step = s;
      sources.push(seed);
      const out = await collectEpisodes({ tasks: questions, groupSize: 3, agent, reward: (_t, ep) => ep.result, endpoint, seed });
      return { records: out.records };
    },
  };
  const before = await probe();
  const metrics = await runTraining(ctx, { out: join(root, 'run'), order: tasks, resume: false });
  const after = await probe();

  expect(metrics.map((m) => m.step)).toEqual([1, 2]);
  // every episode of each step trained: 2 tasks × 3 samples, one row each, every sampled token
  const perStep = [1, 2].map((s) => seen.filter((x) => x.step === s));
  expect(perStep.map((x) => x.length)).toEqual([6, 6]);
  for (const m of metrics) {
    expect(m.trajectories).toBe(6);
    expect(m.trained).toBe(6);
    expect(m.loss).not.toBeNull();
  }
  // the source got each step's seed and handed each run a distinct request seed
  expect(new Set(sources).size).toBe(2);
  expect(new Set(seen.map((x) => x.seed)).size).toBe(12);
  // the endpoint serves the learner's last checkpoint: a fresh model loaded from it scores PROBE alike
  const fresh = await CausalLM.load(join(root, 'run', 'checkpoints', 'step-2'), { sessionOptions: { intraOpNumThreads: 1 } });
  try {
    const [lp] = await fresh.scoreTargets([{ contextIds: PROBE.slice(0, 1), targetIds: PROBE.slice(1) }], { sharePrefixes: false });
    // same runtime, same weights, same pass: equal to float32 rounding of the JSON round trip
    Array.from(lp!).forEach((x, i) => expect(after[i]).toBeCloseTo(x, 5));
  } finally {
    await fresh.dispose();
  }
  const moved = Math.max(...before.map((x, i) => Math.abs(x - after[i]!)));
  expect(moved).toBeGreaterThan(1e-3);
});
