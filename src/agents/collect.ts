/**
 * `collectEpisodes`: runs a developer's own agent `groupSize` times per task
 * against the OpenAI-compatible endpoint, each run under its own episode id, and turns what the
 * endpoint captured into the pipeline's `BatchRecord`s: GRPO groups per task, one sample per
 * context the agent built, the outcome advantage on every sampled token of an episode, and the
 * MemPO memory reward where the agent writes `<mem>` and the task has golds.
 *
 * The agent sees only a base URL, an API key and one header (`x-mempo-episode`); it is written
 * with whatever client it likes (the `openai` SDK, the Vercel AI SDK, fetch). An agent or reward
 * that throws fails its episode only (excluded, named in `failed`); an episode the agent left
 * unfinished past the recorder's idle limit is named in `expired`.
 */
import type { BatchRecord, TargetScorer, TextCodec } from '../contracts';
import { MempoError } from '../errors';
import { mixSeed } from '../rng';
import { advantageSchema, memorySchema, parseOptions, type AdvantageOptions, type MemoryOptions } from '../options';
import { EPISODE_HEADER, type CapturedCall, type EpisodeRecorder } from './capture';
import { episodeRecords, type AgentRecordSource, type AgentTask, type RecordOrigin, type ScoredEpisode } from './episode-records';
import { scoreEpisodeMemory } from './episode-memory';

export { EPISODE_HEADER };

/** What an agent run gets: where the endpoint is and how to tag its calls. */
export interface AgentClient {
  /** e.g. http://127.0.0.1:PORT/v1 — the `baseURL` of the `openai` SDK. */
  baseURL: string;
  /** The endpoint's bearer token ('none' on loopback without one). */
  apiKey: string;
  /** The model name the endpoint serves. */
  model: string;
  /** The episode id of this run. */
  episode: string;
  /** Headers to send on every call: `{ 'x-mempo-episode': episode }` (the SDKs' `defaultHeaders`). */
  headers: Record<string, string>;
  /** Which run of its task's group this is (0-based). */
  sample: number;
  /** The model's context (prompt + new tokens), when the endpoint said; a call past it is refused. */
  maxContextTokens: number | null;
  /**
   * A sampling seed for the run's call `round` (1-based): the seed the built-in pipeline's
   * continuous schedule gives round `round` of this trajectory, mixSeed(seed, batch, slot,
   * sample, round), where the task is question `slot` of batch `batch` of `questionsPerBatch`.
   * Send it as the request's `seed` to sample what the built-in agent would (docs/agents.md).
   */
  seedFor(round: number): number;
}

/** What the reward sees of a finished run. */
export interface AgentEpisode<R = unknown> {
  id: string;
  /** What the agent function returned. */
  result: R;
  calls: readonly CapturedCall[];
}

export interface CaptureEndpoint {
  baseURL: string;
  apiKey?: string;
  model: string;
  recorder: EpisodeRecorder;
  /** The served model's context (max_model_len), handed to the agent as `client.maxContextTokens`. */
  maxContextTokens?: number;
}

export interface CollectOptions<T extends AgentTask, R> {
  tasks: readonly T[];
  /** Runs per task: its GRPO group (default 4). */
  groupSize?: number;
  agent: (task: T, client: AgentClient) => Promise<R>;
  reward: (task: T, episode: AgentEpisode<R>) => number | Promise<number>;
  endpoint: CaptureEndpoint;
  /** Agent runs at once (default 8). */
  concurrency?: number;
  /** The memory reward's scorer and tokenizer (the endpoint's model); without them only the outcome advantage is written. */
  scorer?: TargetScorer;
  codec?: TextCodec;
  memory?: Partial<MemoryOptions>;
  advantage?: Partial<AdvantageOptions>;
  /** Prefix of the episode ids (default 'ep'): ids are `${prefix}-${task.id}-${sample}`. */
  episodePrefix?: string;
  /** The run's seed behind `client.seedFor` (default 0). */
  seed?: number;
  /** Tasks per batch behind `client.seedFor`'s (batch, slot) (default: all tasks one batch). */
  questionsPerBatch?: number;
}

export interface CollectResult {
  records: BatchRecord[];
  /** Per record: its episode and which of the episode's samples it is. */
  sources: AgentRecordSource[];
  /** Episodes whose agent or reward threw, with the error. */
  failed: Array<{ episode: string; error: string }>;
  /** Episodes that expired unfinished (their calls are dropped). */
  expired: string[];
  /** Memory-reward snapshots scored (one scorer call for all). */
  snapshots: number;
}

async function pool<X>(items: readonly X[], limit: number, run: (x: X) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await run(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}

function positive(v: number | undefined, name: string, dflt: number): number {
  if (v === undefined) return dflt;
  if (!Number.isSafeInteger(v) || v < 1) throw new MempoError('ERR_INVALID_OPTION', `collectEpisodes: ${name} must be an integer >= 1 but received ${v}`);
  return v;
}

export async function collectEpisodes<T extends AgentTask, R>(o: CollectOptions<T, R>): Promise<CollectResult> {
  const groupSize = positive(o.groupSize, 'groupSize', 4);
  const concurrency = positive(o.concurrency, 'concurrency', 8);
  if (typeof o.agent !== 'function' || typeof o.reward !== 'function') throw new MempoError('ERR_INVALID_OPTION', 'collectEpisodes: agent and reward must be functions');
  const memory = parseOptions(memorySchema, o.memory ?? {}, 'memory');
  const advantage = parseOptions(advantageSchema, o.advantage ?? {}, 'advantage');
  const ids = new Set<string>();
  for (const t of o.tasks) {
    if (ids.has(t.id)) throw new MempoError('ERR_INVALID_INPUT', `collectEpisodes: task id ${JSON.stringify(t.id)} appears twice; each task is one GRPO group`);
    ids.add(t.id);
  }
  const prefix = o.episodePrefix ?? 'ep';
  const seed = o.seed ?? 0;
  if (!Number.isSafeInteger(seed) || seed < 0) throw new MempoError('ERR_INVALID_OPTION', `collectEpisodes: seed must be an integer >= 0 but received ${seed}`);
  const perBatch = positive(o.questionsPerBatch, 'questionsPerBatch', Math.max(1, o.tasks.length));
  const runs = o.tasks.flatMap((task, i) => Array.from({ length: groupSize }, (_, sample) => ({
    task, sample, id: `${prefix}-${task.id}-${sample}`, batch: Math.floor(i / perBatch), slot: i % perBatch,
  })));
  const scored = new Map<string, ScoredEpisode>();
  const failed: CollectResult['failed'] = [];
  const { recorder } = o.endpoint;
  await pool(runs, concurrency, async ({ task, id, sample, batch, slot }) => {
    const client: AgentClient = {
      baseURL: o.endpoint.baseURL, apiKey: o.endpoint.apiKey ?? 'none', model: o.endpoint.model, episode: id, headers: { [EPISODE_HEADER]: id },
      sample, maxContextTokens: o.endpoint.maxContextTokens ?? null, seedFor: (round: number) => mixSeed(seed, batch, slot, sample, round),
    };
    let reward: number | null;
    let error: string | null = null;
    try {
      const result = await o.agent(task, client);
      const calls = recorder.get(id)?.calls ?? [];
      const r = await o.reward(task, { id, result, calls });
      if (typeof r !== 'number' || !Number.isFinite(r)) throw new MempoError('ERR_INVALID_INPUT', `the reward of episode ${id} is ${String(r)}, not a finite number`);
      reward = r;
    } catch (err) {
      reward = null;
      error = `episode ${id}: ${(err as Error).message}`;
      failed.push({ episode: id, error });
    }
    const e = recorder.get(id);
    if (e === undefined) {
      // the agent made no call (or the episode expired): nothing to train on
      if (error === null) failed.push({ episode: id, error: `episode ${id}: the agent made no model call` });
      return;
    }
    recorder.finish(id);
    scored.set(id, { episode: recorder.take(id)!, reward, error });
  });
  const records: BatchRecord[] = [];
  const sources: AgentRecordSource[] = [];
  const origins: RecordOrigin[] = [];
  for (const task of o.tasks) {
    const eps = runs.filter((r) => r.task === task).map((r) => scored.get(r.id)).filter((e): e is ScoredEpisode => e !== undefined);
    const part = episodeRecords(task, eps, { eps: advantage.eps, normByStd: advantage.normByStd, ...(o.codec !== undefined ? { decode: (x: number[]) => o.codec!.decode(x) } : {}) });
    records.push(...part.records);
    sources.push(...part.sources);
    origins.push(...part.origins);
  }
  let snapshots = 0;
  if (o.scorer !== undefined && o.codec !== undefined && memory.enabled) snapshots = await scoreEpisodeMemory(origins, o.codec, o.scorer, memory, advantage);
  const known = new Set(runs.map((r) => r.id));
  failed.sort((a, b) => (a.episode < b.episode ? -1 : a.episode > b.episode ? 1 : 0));
  return { records, sources, failed, expired: recorder.expired.filter((id) => known.has(id)), snapshots };
}
