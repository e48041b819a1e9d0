/**
 * `mempo rollout|train --agent FILE` (docs/agents.md): the user's agent module (src/agents/agent-module.ts)
 * runs task × group against the OpenAI-compatible endpoint, started in-process on loopback over the
 * embedded runtime that the run samples with; collectEpisodes turns what the endpoint recorded into
 * the pipeline's records. `rollout` writes batch.jsonl, summary.json, report.html (and --export); `train`
 * trains on one such batch per step (TrainContext.rollout), and the learner's weights reach the
 * endpoint through the run's sync (the server's model is the run's model).
 *
 * Flags that configure the built-in agent (its loop, sampling, tools, context, reward, schedule)
 * cannot apply to an agent of one's own: given on the command line with --agent they are refused by name.
 */
import { existsSync } from 'node:fs';
import type { Server } from 'node:http';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { int } from './options';
import type { BatchRecord, Question } from '../contracts';
import { MempoError } from '../errors';
import { EpisodeRecorder } from '../agents/capture';
import { collectEpisodes, type CollectResult } from '../agents/collect';
import type { AgentModule } from '../agents/agent-module';
import type { AgentTask } from '../agents/episode-records';
import type { LocalModel } from '../engines/local/local-model';
import { writeExports } from '../io/export';
import { clearRunDir, writeFileAtomic } from '../io/run-dir';
import { summarize } from '../pipeline/summary';
import { createCompletionsServer, listen } from '../servers/completions-server';
import type { RolloutSource } from '../train/step';
import { padTokenIdOf } from './export';
import { checkModelConfig, checkManifest } from './inputs';
import { holdRunDir } from './run-dir';
import { writeOutputs, printOutcome } from './run-output';
import type { RunEngine, RunIO, RunOutcome, RunSettings } from './run-settings';

/** Flags (commander attribute names) that still apply with --agent; any other given on the command line is refused. */
const WITH_AGENT = new Set([
  // inputs and outputs
  'questions', 'split', 'shuffle', 'offset', 'limit', 'model', 'threads', 'quiet', 'json', 'out', 'export', 'force', 'report', 'reportQuestions',
  // the group, seeds and batches behind client.seedFor, the advantages and the memory reward over what the agent wrote
  'groupSize', 'seed', 'questionsPerBatch', 'memoryReward', 'memSpan', 'answerTemplate', 'targetTokenization', 'gold', 'emptyKept', 'threshold',
  'scorerMaxBatchTokens', 'eps', 'normByStd', 'memGrouping', 'alpha',
  // mempo train: the loop, the update and the learner
  'steps', 'questionsPerStep', 'ppoEpochs', 'miniBatches', 'microBatchTokens', 'lr', 'weightDecay', 'maxGradNorm', 'klCoef', 'klType', 'clipLow',
  'clipHigh', 'clipC', 'aggMode', 'oldLogp', 'checkpointEvery', 'keepCheckpoints', 'resume', 'learner', 'learnerToken', 'learnerTimeout', 'learnerProcs',
  'python', 'device',
  // the agent's own
  'agent', 'agentConcurrency',
]);

/** The flags of --agent, on `mempo rollout` and `mempo train`. */
export function agentOptions(cmd: Command): Command {
  return cmd
    .option('--agent <file>', 'an agent module of your own (.mjs / .js exporting agent(task, client), reward(task, episode), optionally tasks): run task × -n against an in-process OpenAI-compatible endpoint over --model and train on what it recorded (docs/agents.md)')
    .option('--agent-concurrency <n>', 'agent runs at once (--agent)', int(1), 8);
}

/** Why a refused flag cannot apply (by what it configures). */
function why(attr: string): string {
  if (/^(server|retriever|corpus|pages|topk|docMaxChars|observationFormat|page)/.test(attr)) return 'your agent brings its own tools and talks to the in-process endpoint';
  if (/^eval/.test(attr)) return "the evaluation runs mempo's built-in agent, not yours";
  if (attr === 'resume') return 'mempo rollout --agent writes its batch whole; rerun with --force';
  if (attr === 'asyncLevel') return 'overlapped steps are not supported with --agent';
  if (/^(formatScore|budgetScore|metric|requireAnswer)$/.test(attr)) return "the outcome reward is your module's reward export";
  if (attr === 'formatPenalty') return "the format check reads the built-in agent's rounds; your module's reward export scores yours";
  return "it configures mempo's built-in agent (its rounds, sampling, context and prompts); your agent sets its own";
}

/** Refuses, by name, a flag given on the command line that cannot apply with --agent. */
export function refuseBuiltInFlags(cmd: Command, kind: 'rollout' | 'train', file: string): void {
  for (const opt of cmd.options) {
    const attr = opt.attributeName();
    if (cmd.getOptionValueSource(attr) !== 'cli') continue;
    if (WITH_AGENT.has(attr) && !(kind === 'rollout' && attr === 'resume')) continue;
    // --no-pages only picks the search-only world's default split: harmless.
    if (attr === 'pages' && cmd.getOptionValue(attr) === false) continue;
    throw new MempoError('ERR_INVALID_OPTION', `${opt.long ?? opt.flags} cannot go with --agent ${file}: ${why(attr)} (docs/agents.md)`);
  }
}

/** The endpoint an agent run talks to: `mempo serve`'s handler over `local`, on loopback, recording tagged calls. */
export interface AgentEndpoint {
  baseURL: string;
  model: string;
  recorder: EpisodeRecorder;
  maxContextTokens: number;
  close(): Promise<void>;
}

export async function openAgentEndpoint(local: LocalModel, modelName = 'mempo-tiny'): Promise<AgentEndpoint> {
  const recorder = new EpisodeRecorder();
  const server: Server = createCompletionsServer(local, { modelName, recorder });
  const url = await listen(server, 0, '127.0.0.1');
  return {
    baseURL: `${url}/v1`, model: modelName, recorder, maxContextTokens: local.maxContextTokens,
    close: () => new Promise<void>((res) => {
      server.close(() => res());
      server.closeAllConnections();
    }),
  };
}

export interface AgentRunSettings {
  module: AgentModule;
  /** Agent runs at once. */
  concurrency: number;
}

/** The tasks of an agent run: the module's own unless --questions / --split were given, then --shuffle, --offset, --limit. */
export function agentTasks(s: RunSettings, mod: AgentModule, fromFlags: boolean, read: () => Question[], shuffle: <T>(xs: readonly T[], seed: number) => T[]): AgentTask[] {
  if (fromFlags || mod.tasks === null) return read();
  let tasks = mod.tasks;
  if (s.shuffle) tasks = shuffle(tasks, s.options.rollout.seed);
  tasks = tasks.slice(s.offset);
  if (s.limit !== null) tasks = tasks.slice(0, s.limit);
  if (tasks.length === 0) throw new MempoError('ERR_INVALID_INPUT', `--agent ${mod.file}: no tasks after --offset ${s.offset}${s.limit === null ? '' : ` --limit ${s.limit}`}`);
  return tasks;
}

/** One batch of `tasks` × group by the agent, with the memory reward where it applies. */
export function collectBatch(s: RunSettings, a: AgentRunSettings, endpoint: AgentEndpoint, local: LocalModel, tasks: readonly AgentTask[], seed: number, prefix: string): Promise<CollectResult> {
  const memory = s.options.memory.enabled;
  return collectEpisodes({
    tasks, groupSize: s.options.rollout.groupSize, concurrency: a.concurrency,
    agent: a.module.agent, reward: a.module.reward,
    endpoint: { baseURL: endpoint.baseURL, model: endpoint.model, recorder: endpoint.recorder, maxContextTokens: endpoint.maxContextTokens },
    seed, questionsPerBatch: s.options.rollout.questionsPerBatch, episodePrefix: prefix,
    codec: local.codec, ...(memory ? { scorer: local } : {}),
    memory: s.options.memory, advantage: s.options.advantage,
  });
}

/** Failed and expired episodes, named (at most 5 each) on stderr; none usable is an error. */
export function reportEpisodes(io: RunIO, got: CollectResult, what: string): void {
  if (got.failed.length > 0) io.stderr.write(`warning: ${what}: ${got.failed.length} episodes failed and were excluded: ${got.failed.slice(0, 5).map((f) => f.error).join('; ')}${got.failed.length > 5 ? '; …' : ''}\n`);
  if (got.expired.length > 0) io.stderr.write(`warning: ${what}: ${got.expired.length} episodes expired unfinished: ${got.expired.slice(0, 5).join(', ')}${got.expired.length > 5 ? ', …' : ''}\n`);
  if (got.records.length === 0 || got.records.every((r) => r.excluded)) {
    throw new MempoError('ERR_INVALID_INPUT', `${what}: no episode of the agent gave a record to train on${got.failed[0] === undefined ? '' : ` (first failure: ${got.failed[0].error})`}`);
  }
}

/** TrainContext.rollout for `mempo train --agent`: step k's batch from the agent, seeded mixSeed(seed, k) like the built-in rollout. */
export function agentRolloutSource(s: RunSettings, a: AgentRunSettings, endpoint: AgentEndpoint, local: LocalModel, io: RunIO): RolloutSource {
  return async (step, questions, seed) => {
    const got = await collectBatch(s, a, endpoint, local, questions, seed, `s${step}`);
    reportEpisodes(io, got, `step ${step}`);
    return { records: got.records };
  };
}

/** `mempo rollout --agent`: the batch of every task × group, written as the built-in rollout writes it. */
export async function executeAgentRollout(s: RunSettings, a: AgentRunSettings, tasks: readonly AgentTask[], io: RunIO, open: () => Promise<RunEngine>): Promise<RunOutcome> {
  const t0 = performance.now();
  if (s.out === null || s.out.trim().length === 0) throw new MempoError('ERR_INVALID_OPTION', '--out: mempo rollout --agent needs an output directory');
  const out = resolve(s.out);
  const warn = (m: string) => void io.stderr.write(`warning: ${m}\n`);
  checkModelConfig(s.model, false);
  checkManifest(s.model, warn);
  const held = holdRunDir(out, 'mempo rollout', io, s.quiet);
  try {
    const batch = join(out, 'batch.jsonl');
    if (existsSync(batch) && !s.force) throw new MempoError('ERR_RESUME', `${batch} exists; pass --force to replace it (mempo rollout --agent writes its batch whole, it does not resume)`);
    clearRunDir(out, false);
    const engine = await open();
    const local = engine.engine as LocalModel;
    const endpoint = await openAgentEndpoint(local);
    let got: CollectResult;
    try {
      if (!s.quiet) io.stderr.write(`mempo rollout: ${tasks.length} tasks × ${s.options.rollout.groupSize} runs of ${a.module.file} against ${endpoint.baseURL} (${engine.source}), out ${out}\n`);
      got = await collectBatch(s, a, endpoint, local, tasks, s.options.rollout.seed, 'ep');
    } finally {
      await endpoint.close();
    }
    reportEpisodes(io, got, 'mempo rollout --agent');
    const records: BatchRecord[] = got.records;
    // Whole, then renamed: a batch of an agent run is never half there.
    writeFileAtomic(batch, records.map((r) => `${JSON.stringify(r)}\n`).join(''));
    const wallMs = performance.now() - t0;
    const summary = { ...summarize(records, null, { decode: (ids: number[]) => local.codec.decode(ids) }), episodes: { failed: got.failed, expired: got.expired } };
    const outcome: RunOutcome = { summary, eval: null, records, wallMs, server: null };
    // The report's note names the agent where a built-in run names its retriever.
    writeOutputs(s, out, outcome, engine, { name: `agent ${a.module.file}`, search: () => Promise.reject(new MempoError('ERR_INVALID_ARGUMENT', 'the agent brings its own tools')) });
    if ((s.export ?? []).length > 0) {
      const files = writeExports(out, records, s.export!, await padTokenIdOf(s.model, local.codec));
      if (!s.quiet) io.stderr.write(`mempo rollout: exported ${files.join(', ')}\n`);
    }
    await engine.local?.dispose();
    printOutcome(s, io, outcome, out);
    return outcome;
  } finally {
    held.release();
  }
}
