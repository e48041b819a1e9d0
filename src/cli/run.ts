/**
 * What `mempo rollout` and `mempo eval` do: load the questions, model and retriever, run the
 * pipeline with batch.jsonl written line by line, then write summary.json (and report.html /
 * eval.json) atomically.
 */
import { join, resolve } from 'node:path';
import { CausalLM } from '../engines/local/causal-lm';
import { createRng, mixSeed } from '../rng';
import type { BatchRecord } from '../pipeline/batch';
import { LocalModel } from '../engines/local/local-model';
import { connectCompletionsServers } from '../engines/http/connect';
import { JsonlWriter, sortBatchFile } from '../io/run-dir';
import { checkFailures, printOutcome, writeOutputs } from './run-output';
import { runPipeline, type PipelineResult } from '../pipeline/pipeline';
import { readQuestionFiles, type Question } from '../io/questions';
import { summarize } from '../pipeline/summary';
import { evalReport } from '../pipeline/eval-report';
import { MempoError } from '../errors';
import { HttpRetriever } from '../retrieval/http-retriever';
import { checkToken, SERVER_TOKEN_ENV } from '../servers/auth';
import type { Retriever } from '../contracts';
import { EMBEDDED } from '../paths';
import { progressBars } from './progress';
import { holdRunDir, prepareRunDir } from './run-dir';
import { boundThreads, checkManifest, checkModelConfig, describeRetriever, dropOverlong, openCorpus } from './inputs';
import { writeExports } from '../io/export';
import { padTokenIdOf } from './export';
import type { RunEngine, RunIO, RunOutcome, RunSettings } from './run-settings';


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

function log(io: RunIO, quiet: boolean, msg: string): void {
  if (!quiet) io.stderr.write(`${msg}\n`);
}

export async function executeRun(s: RunSettings, io: RunIO): Promise<RunOutcome> {
  const t0 = performance.now();
  if (s.kind === 'rollout' && s.out === null) throw new MempoError('ERR_INVALID_OPTION', 'mempo rollout needs --out DIR');
  if (s.out !== null && s.out.trim().length === 0) throw new MempoError('ERR_INVALID_OPTION', '--out: the output directory is an empty path');
  const warn = (m: string) => void io.stderr.write(`warning: ${m}\n`);
  const out = s.out === null ? null : resolve(s.out);
  // Inputs first: a malformed file fails before the run directory is touched and the model loads.
  const questions = selectQuestions(s);
  checkModelConfig(s.model, (s.server ?? null) !== null);
  checkManifest(s.model, warn);
  // One writer per directory: held from before it is touched until the last output is written.
  const held = out === null ? null : holdRunDir(out, `mempo ${s.kind}`, io, s.quiet);
  try {
    return await runIn(s, io, out, questions, t0, warn);
  } finally {
    held?.release();
  }
}

async function runIn(s: RunSettings, io: RunIO, out: string | null, questions: Question[], t0: number, warn: (m: string) => void): Promise<RunOutcome> {
  const batchPath = out === null ? null : join(out, 'batch.jsonl');
  const tl = performance.now();
  const retriever = await openRetriever(s);
  const kept = out === null ? { previous: [], skip: new Set<string>() } : prepareRunDir(s, out, io, questions);

  const engine = await openEngine(s, io, warn);
  const timings: Record<string, number> = { load: performance.now() - tl };
  const runQuestions = dropOverlong(questions, engine.engine, s.options, s.questions.join(', '), warn);
  log(io, s.quiet, `mempo ${s.kind}: ${runQuestions.length} questions × ${s.options.rollout.groupSize} samples, ${engine.source}, ${describeRetriever(retriever)}, context ${s.options.rollout.context}${out ? `, out ${out}` : ''}`);

  const result = await runWithProgress(s, io, runQuestions, engine, retriever, kept.skip, batchPath);
  // A resumed run appended the groups it redid: put the file back in the order an uninterrupted run writes.
  if (s.resume && batchPath !== null) sortBatchFile(batchPath, questions.map((q) => q.id));
  const all = inQuestionOrder(questions, [...kept.previous, ...result.records]);
  const wallMs = performance.now() - t0;
  // Kinds and page facts come from the questions; the page tool's figures show when the run had it.
  const codec = engine.engine.codec;
  const context = { questions, access: s.options.tool.access, decode: (ids: number[]) => codec.decode(ids) };
  const summary = summarize(all, { stats: result.stats, newTrajectories: result.records.length, extraWallMs: { ...timings, run: wallMs } }, context);
  const serverStats = engine.server?.stats() ?? null;
  const ev = s.kind === 'eval' ? evalReport(all, context) : null;
  const outcome: RunOutcome = { summary, eval: ev, records: all, wallMs, server: serverStats };
  if (out !== null) writeOutputs(s, out, outcome, engine, retriever);
  if (out !== null && (s.export ?? []).length > 0) {
    const files = writeExports(out, all, s.export!, await padTokenIdOf(s.model, engine.engine.codec));
    log(io, s.quiet, `mempo ${s.kind}: exported ${files.join(', ')}`);
  }
  printOutcome(s, io, outcome, out);
  checkFailures(io, outcome, result.records);
  return outcome;
}

/** The questions file, shuffled (seeded) and sliced by --offset / --limit. */
export function selectQuestions(s: RunSettings): Question[] {
  let questions: Question[] = readQuestionFiles(s.questions);
  if (s.shuffle) questions = shuffled(questions, s.options.rollout.seed);
  questions = questions.slice(s.offset);
  if (s.limit !== null) questions = questions.slice(0, s.limit);
  if (questions.length === 0) throw new MempoError('ERR_INVALID_INPUT', `${s.questions.join(', ')}: no questions after --offset ${s.offset}${s.limit === null ? '' : ` --limit ${s.limit}`}`);
  return questions;
}

/**
 * The run's tools: a retrieval server (whose /access, when it has pages, turns the page tool on:
 * `options.tool.access`), or BM25 over the local corpus with `--pages` as its page tool.
 */
export async function openRetriever(s: RunSettings): Promise<Retriever> {
  const pages = s.pages ?? null;
  if (s.retriever !== null) {
    if (pages !== null) {
      throw new MempoError('ERR_INVALID_OPTION', '--pages gives the local corpus its pages; with --retriever the server answers /access itself (mempo serve-retriever --pages FILE)');
    }
    // mempo serve-retriever's token, when it has one: MEMPO_SERVE_TOKEN, as the inference-server client sends it.
    const token = checkToken(process.env[SERVER_TOKEN_ENV], SERVER_TOKEN_ENV);
    const r = new HttpRetriever(s.retriever, { timeoutMs: s.options.tool.timeoutMs, retries: s.options.tool.retries, backoffMs: s.options.tool.backoffMs, ...(token === undefined ? {} : { token }) });
    if (await r.hasPages()) s.options.tool.access = true;
    return r;
  }
  const r = openCorpus(s.corpus ?? EMBEDDED.corpus(), pages);
  if (pages !== null) s.options.tool.access = true;
  return r;
}


export async function openEngine(s: RunSettings, io: RunIO, warn: (m: string) => void): Promise<RunEngine> {
  const srv = s.server ?? null;
  if (srv === null) {
    const threads = boundThreads(s.threads, warn);
    const model = await CausalLM.load(s.model, { sessionOptions: { intraOpNumThreads: threads, interOpNumThreads: 1 } });
    const engine = new LocalModel(model, { scorerMaxBatchTokens: s.options.memory.scorerMaxBatchTokens });
    return { engine, source: `model ${s.model}`, server: null, local: model };
  }
  // Generation and scoring over HTTP: the model directory gives only the tokenizer (config files optional).
  const server = await connectCompletionsServers({
    urls: srv.urls, api: srv.api, model: srv.model, modelDir: s.model, maxInFlight: srv.maxInFlight, timeoutMs: srv.timeoutMs,
    retries: srv.retries, backoffMs: srv.backoffMs, scoreBatchSize: srv.scoreBatchSize, sendSeed: srv.sendSeed,
    log: (line) => log(io, s.quiet, `mempo ${s.kind}: ${line}`),
  }).catch((err: Error) => {
    if (!(err instanceof MempoError)) throw err;
    throw new MempoError(err.code, `${err.message.startsWith('model ') ? '--server-model' : '--server'}: ${err.message}`);
  });
  const source = `${srv.api} server${server.urls.length > 1 ? 's' : ''} ${server.urls.join(', ')} (model "${server.model}", tokenizer ${s.model})`;
  return { engine: server, source, server, local: null };
}

/** Runs the pipeline with batch.jsonl written line by line and a progress bar; Ctrl-C leaves whole lines. */
async function runWithProgress(
  s: RunSettings, io: RunIO, questions: Question[], engine: RunEngine, retriever: Retriever, skip: Set<string>, batchPath: string | null,
): Promise<PipelineResult> {
  const bars = progressBars(io.stderr, !s.quiet);
  const writer = batchPath === null ? null : new JsonlWriter(batchPath, true);
  const onSigint = () => {
    bars.stop();
    writer?.close();
    io.stderr.write(`\ninterrupted: ${batchPath ?? 'the run'} holds only whole lines; rerun with --resume to finish it\n`);
    process.exit(130);
  };
  process.once('SIGINT', onSigint);
  try {
    return await runPipeline({
      questions,
      generator: engine.engine,
      scorer: s.options.memory.enabled ? engine.engine : null,
      retriever,
      options: s.options,
      skipUids: skip,
      onBatch: (recs, b) => {
        writer?.write(recs);
        bars.onBatchWritten(b);
      },
      progress: bars,
    });
  } finally {
    process.removeListener('SIGINT', onSigint);
    bars.stop();
    writer?.close();
    await engine.local?.dispose();
  }
}

/** Records in question order (previous complete groups and this run's), samples in order. */
function inQuestionOrder(questions: readonly Question[], records: BatchRecord[]): BatchRecord[] {
  const order = new Map(questions.map((q, i) => [q.id, i]));
  return records.sort((a, b) => (order.get(a.uid) ?? 0) - (order.get(b.uid) ?? 0) || a.sample - b.sample);
}
