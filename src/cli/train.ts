/**
 * `mempo train --out DIR` (docs/algorithm.md §9, docs/learner.md): the rollout engines (the local
 * model, or inference servers), the learner (spawned torch learner, or --learner URL), the
 * training loop, metrics.jsonl, checkpoints and train-report.html.
 */
import { join, resolve } from 'node:path';
import type { Learner, Question, Retriever } from '../contracts';
import { MempoError } from '../errors';
import { readQuestionFiles, readQuestions } from '../io/questions';
import { writeFileAtomic } from '../io/write';
import { HttpLearner } from '../learner/http-learner';
import { spawnLearner } from '../learner/spawn';
import { runTraining } from '../train/loop';
import { completeCheckpointDirs, removeSaveTemps, removeTrainingRun, resumePoint, runContents, trainSettings, TRAIN_REPORT, type ResumePoint } from '../train/checkpoint';
import type { StepMetrics } from '../train/metrics';
import type { TrainOptions } from '../train/options';
import type { TrainPhase } from '../train/step';
import { trainReportHtml } from '../io/train-report';
import { checkManifest, checkModelConfig, describeRetriever, dropOverlong } from './inputs';
import { openEngine, openRetriever, shuffled } from './run';
import { agentRolloutSource, agentTasks, openAgentEndpoint, type AgentRunSettings } from './agent';
import type { LocalModel } from '../engines/local/local-model';
import type { RunIO, RunSettings } from './run-settings';
import { fingerprint, holdRunDir } from './run-dir';

export interface TrainSettings {
  /** Model, questions, retriever, server and pipeline options, as `mempo rollout` reads them. */
  run: RunSettings;
  out: string;
  train: TrainOptions;
  /** Dev questions file of the evaluation slice (`train.evalQuestions` of them, a fixed seeded shuffle). */
  evalQuestions: string;
  learner: { url: string | null; token: string | null; python: string | null; device: 'auto' | 'cpu' | 'cuda'; procs: number; timeoutMs: number };
  force: boolean;
  report: boolean;
  /** `--agent FILE`: each step's batch from an agent of one's own (src/cli/agent.ts); `fromFlags`: --questions / --split given. */
  agent?: (AgentRunSettings & { fromFlags: boolean }) | null;
}

function fmt(x: number | null | undefined, d = 3): string {
  return x === null || x === undefined ? '-' : x.toFixed(d);
}

/** One status line per phase change and per step (a terminal gets it rewritten in place). */
function trainProgress(io: RunIO, quiet: boolean, steps: number) {
  const tty = (io.stderr as NodeJS.WriteStream).isTTY === true;
  let last = '';
  const show = (s: string, keep: boolean) => {
    if (quiet) return;
    if (tty) io.stderr.write(`\r\x1b[2K${s}${keep ? '\n' : ''}`);
    else if (keep) io.stderr.write(`${s}\n`);
  };
  return {
    onPhase(step: number, phase: TrainPhase) {
      show(`step ${step}/${steps} [${phase}]${last}`, false);
    },
    onStepDone(m: StepMetrics) {
      if (m.step === 0) {
        show(`step 0/${steps}: eval EM ${fmt(m.eval?.em)} (starting policy)`, true);
        return;
      }
      last = ` last score ${fmt(m.meanScore)}`;
      const ev = m.eval === null ? '' : `, eval EM ${fmt(m.eval.em)}`;
      show(`step ${m.step}/${steps}: score ${fmt(m.meanScore)}, memory reward ${fmt(m.memoryReward.mean)}, loss ${fmt(m.loss, 4)}, clip ${fmt(m.clipFrac)}, KL ${fmt(m.klRef, 5)}, grad norm ${fmt(m.gradNorm)}${ev}, ${Math.round((m.wallMs['total'] ?? 0) / 1000)} s`, true);
    },
  };
}

async function openLearner(s: TrainSettings, io: RunIO): Promise<Learner> {
  const http = { timeoutMs: s.learner.timeoutMs, ...(s.learner.token === null ? {} : { token: s.learner.token }) };
  if (s.learner.url !== null) return new HttpLearner(s.learner.url, http);
  const log = (l: string) => { if (!s.run.quiet) io.stderr.write(`learner: ${l}\n`); };
  return spawnLearner({ ...http, model: s.run.model, seed: s.train.seed, device: s.learner.device, procs: s.learner.procs, ...(s.learner.python === null ? {} : { python: s.learner.python }), onLog: log });
}

/** The training questions in the run's seeded order (all of --questions after --offset / --limit). */
function trainOrder(s: TrainSettings): Question[] {
  const a = s.agent ?? null;
  if (a !== null && !a.fromFlags && a.module.tasks !== null) {
    // The module's own tasks, sliced like questions; Question's optional fields stay unset.
    return shuffled(agentTasks(s.run, a.module, false, () => [], shuffled) as Question[], s.train.seed);
  }
  let qs = readQuestionFiles(s.run.questions).slice(s.run.offset);
  if (s.run.limit !== null) qs = qs.slice(0, s.run.limit);
  if (qs.length === 0) throw new MempoError('ERR_INVALID_INPUT', `${s.run.questions.join(', ')}: no training questions after --offset ${s.run.offset}`);
  return shuffled(qs, s.train.seed);
}

/** What names the run's data beyond the options (trainer.json, checked on --resume): the questions file and slice, model, corpus or retriever, eval file. */
function runIdentity(s: TrainSettings): Record<string, unknown> {
  const { kind: _kind, options: _options, ...id } = fingerprint(s.run);
  return { kind: 'train', ...id, evalFile: resolve(s.evalQuestions), ...(s.agent ? { agent: s.agent.module.file, questionsFrom: s.agent.fromFlags || s.agent.module.tasks === null ? 'flags' : 'module' } : {}) };
}

/**
 * The run directory before the learner starts (the caller holds its lock): removes what a killed
 * save left; with --resume, the checkpoint to continue from (resumePoint: refuses when there is
 * none unless --force, or none verifies, or the settings differ); else refuses an earlier run
 * unless --force, which removes it, saying what.
 */
function prepareTrainDir(s: TrainSettings, out: string, settings: Record<string, unknown>, io: RunIO): ResumePoint | null {
  const log = (m: string) => { if (!s.run.quiet) io.stderr.write(`${m}\n`); };
  const temps = removeSaveTemps(out);
  if (temps.length > 0) log(`mempo train: removed ${temps.join(', ')} from ${out} (left by a save that was killed)`);
  if (s.run.resume && (!s.force || completeCheckpointDirs(out).length > 0)) {
    return resumePoint(out, settings, (m) => void io.stderr.write(`warning: ${m}\n`));
  }
  const held = runContents(out);
  if (held.length === 0) return null;
  if (!s.force) throw new MempoError('ERR_RESUME', `${out} holds a training run (metrics.jsonl or checkpoints/); pass --resume to continue it or --force to start over (it holds ${held.join(', ')})`);
  removeTrainingRun(out);
  log(`mempo train: --force: removed ${held.join(', ')} of the earlier run in ${out}`);
  return null;
}

export async function executeTrain(s: TrainSettings, io: RunIO): Promise<StepMetrics[]> {
  if (s.out.trim().length === 0) throw new MempoError('ERR_INVALID_OPTION', '--out: the output directory is an empty path');
  if (s.run.options.rollout.context !== 'full') throw new MempoError('ERR_INVALID_OPTION', "--context: mempo train samples with the 'full' context policy (docs/algorithm.md §9); the memory policy is what --eval-every evaluates");
  const out = resolve(s.out);
  const warn = (m: string) => void io.stderr.write(`warning: ${m}\n`);
  const order = trainOrder(s);
  // A fixed mixed slice (the split is ordered by kind): shuffled with seed 0 whatever the run's seed, so every run evaluates on the same questions.
  // With --agent there is no dev evaluation (it would run the built-in agent): evalEvery is 0.
  const dev = s.agent ? [] : shuffled(readQuestions(s.evalQuestions), 0).slice(0, s.train.evalQuestions);
  checkModelConfig(s.run.model, (s.run.server ?? null) !== null);
  checkManifest(s.run.model, warn);
  // Before the settings: a retrieval server with pages turns the page tool on (options.tool.access).
  const retriever = await openRetriever(s.run);
  const settings = trainSettings(s.run.options, s.train, order, dev, runIdentity(s));
  // One writer per directory, from before it is touched until the learner has stopped.
  const held = holdRunDir(out, 'mempo train', io, s.run.quiet);
  try {
    const from = prepareTrainDir(s, out, settings, io);
    return await train(s, io, out, { order, dev, settings, from, retriever });
  } finally {
    held.release();
  }
}

async function train(
  s: TrainSettings, io: RunIO, out: string,
  run: { order: Question[]; dev: Question[]; settings: Record<string, unknown>; from: ResumePoint | null; retriever: Retriever },
): Promise<StepMetrics[]> {
  const warn = (m: string) => void io.stderr.write(`warning: ${m}\n`);
  const retriever = run.retriever;
  const engine = await openEngine(s.run, io, warn);
  const learner = await openLearner(s, io).catch(async (e: unknown) => {
    await engine.local?.dispose();
    throw e;
  });
  const progress = trainProgress(io, s.run.quiet, s.train.steps);
  const agent = s.agent ?? null;
  const endpoint = agent === null ? null : await openAgentEndpoint(engine.engine as LocalModel).catch(async (e: unknown) => {
    await learner.close();
    await engine.local?.dispose();
    throw e;
  });
  // Ctrl-C: the checkpoints on disk are whole (a step in progress is redone); the learner exits with us (--parent-pid).
  const onSigint = (sig: NodeJS.Signals) => {
    io.stderr.write(`\ninterrupted: ${out} keeps its complete checkpoints; rerun with --resume to continue from the newest\n`);
    process.exit(sig === 'SIGTERM' ? 143 : 130);
  };
  process.once('SIGINT', onSigint);
  process.once('SIGTERM', onSigint);
  try {
    const info = await learner.info();
    const memory = s.run.options.memory.enabled;
    if (!s.run.quiet) {
      const who = agent === null || endpoint === null ? describeRetriever(retriever) : `agent ${agent.module.file} against ${endpoint.baseURL}`;
      io.stderr.write(`mempo train: ${s.train.steps} steps × ${s.train.questionsPerStep} questions × ${s.run.options.rollout.groupSize} samples (${memory ? 'MemPO' : 'GRPO: no memory reward'}), ${engine.source}, ${who}, ${learner.name} (${info.learner}, ${info.parameters} parameters, ${info.device}/${info.dtype}), out ${out}\n`);
    }
    const sync = async (dir: string): Promise<void> => {
      if (engine.server !== null) await engine.server.updateWeightsFromDisk(dir);
      else await engine.local!.reload(dir);
    };
    const writeReport = (all: readonly StepMetrics[]) => {
      // the title names the directory as typed: no machine path in a report that is shared
      if (s.report) writeFileAtomic(join(out, TRAIN_REPORT), trainReportHtml(all, { title: `mempo train — ${s.out}`, memoryReward: memory }));
    };
    return await runTraining(
      {
        generator: engine.engine, scorer: memory ? engine.engine : null, retriever, learner, sync,
        pipeline: s.run.options, train: s.train,
        dev: dropOverlong(run.dev, engine.engine, s.run.options, s.evalQuestions, warn),
        onPhase: progress.onPhase,
        ...(engine.local === null ? {} : { baseWeights: s.run.model }),
        ...(info.maxContext === undefined ? {} : { maxContext: info.maxContext }),
        ...(agent === null || endpoint === null ? {} : { rollout: agentRolloutSource(s.run, agent, endpoint, engine.engine as LocalModel, io) }),
      },
      {
        out,
        // An agent renders its own prompts: the built-in prompt's length says nothing about them.
        order: agent !== null ? run.order : dropOverlong(run.order, engine.engine, s.run.options, s.run.questions.join(', '), warn),
        resume: run.from !== null,
        ...(run.from === null ? {} : { from: run.from }),
        settings: run.settings,
        notice: warn,
        onStepDone: (m, all) => {
          progress.onStepDone(m);
          writeReport(all);
        },
      },
    );
  } finally {
    process.removeListener('SIGINT', onSigint);
    process.removeListener('SIGTERM', onSigint);
    await endpoint?.close();
    await learner.close();
    await engine.local?.dispose();
  }
}
