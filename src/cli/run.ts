/**
 * What `mempo rollout` and `mempo eval` do: load the questions, model and retriever, run the
 * pipeline with batch.jsonl written line by line, then write summary.json (and report.html /
 * eval.json) atomically.
 */
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import { CausalLM } from '../engines/local/causal-lm';
import { createRng } from '../rng';
import { mixSeed } from '../seed';
import type { BatchRecord } from '../pipeline/batch';
import { LocalModel } from '../engines/local/local-model';
import { type Generator, type TargetScorer } from '../contracts';
import { connectCompletionsServers } from '../engines/http/connect';
import type { BackendStats, HttpCompletionsBackend } from '../engines/http/client';
import type { ServerSettings } from './options';
import { JsonlWriter, loadForResume, writeFileAtomic } from '../io/run-dir';
import type { PipelineOptions } from '../options';
import { runPipeline } from '../pipeline/pipeline';
import { readQuestions, type Question } from '../io/questions';
import { evalReport, formatEvalReport, summarize, type EvalReport, type RunSummary } from '../pipeline/summary';
import { renderReport } from '../io/report';
import { Bm25Retriever } from '../retrieval/bm25';
import { MempoPipelineError } from '../errors';
import { HttpRetriever } from '../retrieval/http-retriever';
import type { Retriever } from '../contracts';
import { EMBEDDED } from './paths';
import { progressBars } from './progress';

export interface RunIO {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

export interface RunSettings {
  kind: 'rollout' | 'eval';
  out: string | null;
  questions: string;
  offset: number;
  limit: number | null;
  /** Shuffle the questions (seeded by the run's seed) before --offset / --limit. */
  shuffle: boolean;
  model: string;
  corpus: string | null;
  retriever: string | null;
  resume: boolean;
  force: boolean;
  quiet: boolean;
  json: boolean;
  report: boolean;
  reportQuestions: number;
  threads: number | null;
  /** Inference servers for generation and scoring (--server); null = the local model. */
  server?: ServerSettings | null;
  options: PipelineOptions;
}

export interface RunOutcome {
  summary: RunSummary;
  eval: EvalReport | null;
  records: BatchRecord[];
  wallMs: number;
  /** Requests, retries and failures per server (runs with --server). */
  server: BackendStats | null;
}

/** The settings of a run that must match for --resume to continue it. */
function fingerprint(s: RunSettings): Record<string, unknown> {
  return {
    kind: s.kind,
    questions: resolve(s.questions),
    offset: s.offset,
    limit: s.limit,
    shuffle: s.shuffle,
    model: resolve(s.model),
    retriever: s.retriever ?? (s.corpus === null ? null : resolve(s.corpus)),
    ...(s.server ? { server: { api: s.server.api, model: s.server.model } } : {}),
    options: s.options,
  };
}

/** Fisher-Yates with the run's seed: the same seed gives the same slice. */
export function shuffled<T>(items: readonly T[], seed: number): T[] {
  const out = items.slice();
  const rnd = createRng(mixSeed(seed, 0x5eed), 0);
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** A path as the user would type it: relative to the working directory when inside it. */
function shown(p: string): string {
  const r = relative(process.cwd(), resolve(p));
  return r.length > 0 && !r.startsWith('..') && !isAbsolute(r) ? r : resolve(p);
}

function log(io: RunIO, quiet: boolean, msg: string): void {
  if (!quiet) io.stderr.write(`${msg}\n`);
}

export async function executeRun(s: RunSettings, io: RunIO): Promise<RunOutcome> {
  const t0 = performance.now();
  const timings: Record<string, number> = {};
  if (s.kind === 'rollout' && s.out === null) throw new MempoPipelineError('ERR_INVALID_OPTION', 'mempo rollout needs --out DIR');
  const out = s.out === null ? null : resolve(s.out);
  const batchPath = out === null ? null : join(out, 'batch.jsonl');
  const runPath = out === null ? null : join(out, 'run.json');
  const fp = fingerprint(s);

  // Inputs first: a malformed file fails before the model loads.
  let questions: Question[] = readQuestions(s.questions);
  if (s.shuffle) questions = shuffled(questions, s.options.rollout.seed);
  questions = questions.slice(s.offset);
  if (s.limit !== null) questions = questions.slice(0, s.limit);
  if (questions.length === 0) throw new MempoPipelineError('ERR_INVALID_INPUT', `${s.questions}: no questions after --offset ${s.offset}${s.limit === null ? '' : ` --limit ${s.limit}`}`);

  let previous: BatchRecord[] = [];
  let skip = new Set<string>();
  if (out !== null && batchPath !== null && runPath !== null) {
    mkdirSync(out, { recursive: true });
    if (existsSync(batchPath) && !s.resume && !s.force) {
      throw new MempoPipelineError('ERR_RESUME', `${batchPath} already exists: pass --resume to finish that run, or --force to start over`);
    }
    if (s.resume && existsSync(runPath)) {
      const before = JSON.parse(readFileSync(runPath, 'utf8')) as Record<string, unknown>;
      const a = JSON.stringify(before['settings']);
      const b = JSON.stringify(JSON.parse(JSON.stringify(fp)));
      if (a !== b) {
        throw new MempoPipelineError('ERR_RESUME', `--resume: the options differ from the run in ${out} (see ${runPath}); pass the same options, or --force to start over`);
      }
    }
    if (s.resume) {
      const ex = loadForResume(batchPath, s.options.rollout.groupSize);
      previous = ex.records;
      skip = ex.completeUids;
      log(io, s.quiet, `resume: ${skip.size} complete groups kept${ex.droppedLines ? `, ${ex.droppedLines} lines of incomplete groups dropped` : ''}`);
    } else if (existsSync(batchPath)) {
      rmSync(batchPath);
    }
    writeFileAtomic(runPath, `${JSON.stringify({ settings: fp, startedAt: new Date().toISOString() }, null, 2)}\n`);
  }

  const tl = performance.now();
  let retriever: Retriever;
  if (s.retriever !== null) {
    retriever = new HttpRetriever(s.retriever, { timeoutMs: s.options.tool.timeoutMs, retries: s.options.tool.retries, backoffMs: s.options.tool.backoffMs });
  } else {
    retriever = Bm25Retriever.fromJsonl(s.corpus ?? EMBEDDED.corpus());
  }
  let model: CausalLM | null = null;
  let backend: HttpCompletionsBackend | null = null;
  let engine: Generator & TargetScorer;
  let source: string;
  const srv = s.server ?? null;
  if (srv !== null) {
    // Generation and scoring over HTTP: the model directory gives only the tokenizer and config.json.
    backend = await connectCompletionsServers({
      urls: srv.urls, api: srv.api, model: srv.model, modelDir: s.model, maxInFlight: srv.maxInFlight, timeoutMs: srv.timeoutMs,
      retries: srv.retries, backoffMs: srv.backoffMs, scoreBatchSize: srv.scoreBatchSize, sendSeed: srv.sendSeed,
      log: (line) => log(io, s.quiet, `mempo ${s.kind}: ${line}`),
    }).catch((err: Error) => {
      if (!(err instanceof MempoPipelineError)) throw err;
      throw new MempoPipelineError(err.code, `${err.message.startsWith('model ') ? '--server-model' : '--server'}: ${err.message}`);
    });
    engine = backend;
    source = `${srv.api} server${backend.urls.length > 1 ? 's' : ''} ${backend.urls.join(', ')} (model "${backend.model}", tokenizer ${s.model})`;
  } else {
    const threads = s.threads ?? Math.max(1, availableParallelism());
    model = await CausalLM.load(s.model, { sessionOptions: { intraOpNumThreads: threads, interOpNumThreads: 1 } });
    engine = new LocalModel(model, { scorerMaxBatchTokens: s.options.memory.scorerMaxBatchTokens });
    source = `model ${s.model}`;
  }
  timings['load'] = performance.now() - tl;
  log(io, s.quiet, `mempo ${s.kind}: ${questions.length} questions × ${s.options.rollout.groupSize} samples, ${source}, retriever ${retriever.name}, context ${s.options.rollout.context}${out ? `, out ${out}` : ''}`);

  const bars = progressBars(io.stderr, !s.quiet);
  const writer = batchPath === null ? null : new JsonlWriter(batchPath, true);
  const onSigint = () => {
    bars.stop();
    writer?.close();
    io.stderr.write(`\ninterrupted: ${batchPath ?? 'the run'} holds only whole lines; rerun with --resume to finish it\n`);
    process.exit(130);
  };
  process.once('SIGINT', onSigint);
  let result;
  try {
    result = await runPipeline({
      questions,
      generator: engine,
      scorer: s.options.memory.enabled ? engine : null,
      retriever,
      options: s.options,
      skipUids: skip,
      onBatch: (recs) => writer?.write(recs),
      progress: bars,
    });
  } finally {
    process.removeListener('SIGINT', onSigint);
    bars.stop();
    writer?.close();
    await model?.dispose();
  }

  // Records in question order (previous complete groups and this run's).
  const order = new Map(questions.map((q, i) => [q.id, i]));
  const all = [...previous, ...result.records].sort((a, b) => (order.get(a.uid) ?? 0) - (order.get(b.uid) ?? 0) || a.sample - b.sample);
  const tr = performance.now();
  const wallMs = performance.now() - t0;
  const summary = summarize(all, { stats: result.stats, newTrajectories: result.records.length, extraWallMs: { ...timings, run: wallMs } });
  const serverStats = backend?.stats() ?? null;
  const ev = s.kind === 'eval' ? evalReport(all) : null;
  if (out !== null) {
    writeFileAtomic(join(out, 'summary.json'), `${JSON.stringify(serverStats ? { ...summary, server: serverStats } : summary, null, 2)}\n`);
    if (ev) writeFileAtomic(join(out, 'eval.json'), `${JSON.stringify(ev, null, 2)}\n`);
    if (s.report) {
      const codec = engine.codec;
      const html = renderReport(all, {
        pieceOf: (id) => (codec.piece ? codec.piece(id) : codec.decode([id])),
        title: `mempo ${s.kind}: ${all.length} trajectories, ${summary.questions} questions`,
        maxQuestions: s.reportQuestions,
        summary,
        notes: [`questions ${shown(s.questions)} · model ${shown(s.model)}${backend ? ` via ${backend.api} ${backend.urls.join(', ')}` : ''} · retriever ${retriever.name.replace(process.cwd() + sep, '')} · context ${s.options.rollout.context} · seed ${s.options.rollout.seed} · group size ${s.options.rollout.groupSize}`],
      });
      writeFileAtomic(join(out, 'report.html'), html);
    }
  }
  if (s.json) io.stdout.write(`${JSON.stringify(ev ?? (serverStats ? { ...summary, server: serverStats } : summary), null, 2)}\n`);
  else if (ev) io.stdout.write(`${formatEvalReport(ev, `mempo eval (${s.options.rollout.context} context, temperature ${s.options.rollout.sampling.temperature})`)}\n`);
  else if (!s.quiet) {
    io.stdout.write(
      `${summary.trajectories} trajectories (${summary.questions} questions): mean score ${summary.meanScore?.toFixed(3) ?? '–'}, ` +
        `format-valid ${summary.formatValidRate === null ? '–' : (100 * summary.formatValidRate).toFixed(1) + '%'}, ` +
        `memory reward ${summary.memoryReward.mean?.toFixed(4) ?? '–'} ± ${summary.memoryReward.std?.toFixed(4) ?? '–'} (n=${summary.memoryReward.count}), ` +
        `${summary.tokensGenerated} tokens generated, ${(wallMs / 1000).toFixed(1)} s${out ? ` → ${out}` : ''}\n`,
    );
  }
  if (serverStats !== null && serverStats.endpoints.some((e) => e.failures > 0)) {
    // Failed tries that a retry (maybe on another server) made good: say how many and where.
    const where = serverStats.endpoints.filter((e) => e.failures > 0).map((e) => `${e.url}: ${e.failures} failed${e.cooldowns ? `, out of rotation ${e.cooldowns}×` : ''} (last: ${e.lastError})`);
    io.stderr.write(`warning: ${serverStats.endpoints.reduce((a, e) => a + e.failures, 0)} of ${serverStats.requests} server requests failed and were retried (${serverStats.retries} retries); ${where.join('; ')}\n`);
  }
  const failed = result.records.filter((r) => r.error !== null);
  if (failed.length > 0 && failed.length === result.records.length) {
    // Nothing usable came out of this run: say why and fail (the files are written all the same).
    const onServer = failed.filter((r) => r.doneReason === 'backend-error');
    const tool = failed.find((r) => r.doneReason !== 'backend-error');
    if (tool === undefined) throw new MempoPipelineError('ERR_BACKEND', `every trajectory failed on the inference server: ${failed[0]!.error}`);
    if (onServer.length === 0) throw new MempoPipelineError('ERR_RETRIEVER_DOWN', `every trajectory hit a tool failure: ${tool.error}`);
    throw new MempoPipelineError('ERR_RETRIEVER_DOWN', `every trajectory failed (${failed.length - onServer.length} on a tool, ${onServer.length} on the inference server); first tool error: ${tool.error}; first server error: ${onServer[0]!.error}`);
  }
  if (summary.toolErrors > 0) {
    const first = all.find((r) => r.error !== null && r.doneReason !== 'backend-error')?.error;
    io.stderr.write(`warning: ${summary.toolErrors} trajectories hit a tool failure and were excluded from advantages; first error: ${first}\n`);
  }
  if (summary.backendErrors > 0) {
    const first = all.find((r) => r.doneReason === 'backend-error')?.error;
    io.stderr.write(`warning: ${summary.backendErrors} trajectories failed on the inference server (an answer missing or wrong) and were excluded from advantages; first error: ${first}\n`);
  }
  return { summary, eval: ev, records: all, wallMs, server: serverStats };
}
