#!/usr/bin/env node
/**
 * The `mempo` command: `mempo rollout --out DIR` runs the MemPO pipeline (docs/algorithm.md §1-§8) and writes
 * batch.jsonl, summary.json and report.html; `mempo eval` measures a context policy; `mempo export`
 * writes a finished batch for another trainer (docs/export.md); `mempo train` optimises the policy
 * (docs/algorithm.md §9) through a learner (docs/learner.md).
 */
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { MempoError } from '../errors';
import { addPipelineOptions, addServerOptions, int, intOrNone, NONE, orNull, pipelineOptionsFromFlags, serverSettingsFromFlags } from './options';
import { EMBEDDED, packageVersion } from '../paths';
import { DEFAULTS } from '../options';
import { executeRun, openEngine, selectQuestions, shuffled } from './run';
import { agentOptions, agentTasks, executeAgentRollout, refuseBuiltInFlags } from './agent';
import { loadAgentModule } from '../agents/agent-module';
import type { RunIO, RunSettings } from './run-settings';
import { openCorpus } from './inputs';
import { createRetrievalServer, listen, RETRIEVAL_SERVER_DEFAULTS, RETRIEVER_GUARDED } from '../servers/retrieval-server';
import { COMPLETIONS_SERVER_DEFAULTS } from '../servers/completions-server';
import { checkToken, requireTokenOffLoopback, SERVER_TOKEN_ENV } from '../servers/auth';
import { startServe } from './serve';
import { exportCommand, exportFormatList } from './export';
import { trainCommand } from './train-command';
import type { ExportFormat } from '../io/export';
import type { Server } from 'node:http';
import { readFileSync } from 'node:fs';

/** Resolves once SIGINT or SIGTERM has closed the server and its open connections. */
function closeOnSignal(server: Server): Promise<void> {
  return new Promise<void>((resolve) => {
    const stop = () => {
      server.close(() => resolve());
      server.closeAllConnections();
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
}

/** Questions of the default `mempo rollout` slice (about two minutes on 2 CPU cores). */
export const DEFAULT_ROLLOUT_LIMIT = DEFAULTS.rolloutLimit;
export const DEFAULT_EVAL_LIMIT = DEFAULTS.evalLimit;

/** The paging the embedded pages were built for (data/world/meta-pages.json). */
function embeddedPaging(): { pageMaxChars: number; pageChunkChars: number; pageMaxChunks: number } {
  return (JSON.parse(readFileSync(EMBEDDED.pagesMeta(), 'utf8')) as { paging: { pageMaxChars: number; pageChunkChars: number; pageMaxChunks: number } }).paging;
}

/**
 * A run's settings from its flags. Without --corpus, --retriever or --pages a run is in the
 * embedded page world: the corpus with URLs, the page tool over its pages (paged as they were
 * built, unless --page-* says otherwise) and, without --questions or --split, the split mixed with
 * its page questions (`train,train-pages`; eval: `dev,dev-pages`). --no-pages: the search-only
 * world (`corpus.jsonl`, no page tool, `train` / `dev`).
 */
function settingsFrom(kind: 'rollout' | 'eval', o: Record<string, unknown>, cmd: Command): RunSettings {
  const pagesFlag = o['pages'] as string | false | undefined;
  const embeddedWorld = o['corpus'] === undefined && o['retriever'] === undefined && pagesFlag === undefined;
  const options = pipelineOptionsFromFlags(o, kind === 'rollout');
  const pages = embeddedWorld ? EMBEDDED.pages() : pagesFlag === false || pagesFlag === undefined ? null : pagesFlag;
  if (embeddedWorld) {
    const paging = embeddedPaging();
    for (const k of ['pageMaxChars', 'pageChunkChars', 'pageMaxChunks'] as const) {
      if (cmd.getOptionValueSource(k) === 'default') options.tool[k] = paging[k];
    }
  }
  // Local pages give the agent the page tool (a retrieval server's are found when it is opened).
  if (pages !== null) options.tool.access = true;
  const split = (o['split'] as string | undefined) ?? `${kind === 'eval' ? 'dev' : 'train'}${embeddedWorld ? `,${kind === 'eval' ? 'dev' : 'train'}-pages` : ''}`;
  return {
    kind,
    out: (o['out'] as string | undefined) ?? null,
    questions: o['questions'] !== undefined ? [o['questions'] as string] : split.split(',').map((name) => EMBEDDED.split(name.trim())),
    offset: (o['offset'] as number | undefined) ?? 0,
    shuffle: Boolean(o['shuffle']),
    limit: o['limit'] === undefined ? null : (orNull(o['limit']) as number | null),
    model: (o['model'] as string | undefined) ?? EMBEDDED.model(),
    corpus: (o['corpus'] as string | undefined) ?? (embeddedWorld ? EMBEDDED.corpusPages() : null),
    retriever: (o['retriever'] as string | undefined) ?? null,
    pages,
    resume: Boolean(o['resume']),
    force: Boolean(o['force']),
    quiet: Boolean(o['quiet']) || Boolean(o['json']),
    json: Boolean(o['json']),
    report: o['report'] !== false,
    reportQuestions: (o['reportQuestions'] as number | undefined) ?? DEFAULTS.reportQuestions,
    threads: (o['threads'] as number | undefined) ?? null,
    server: serverSettingsFromFlags(o),
    export: (o['export'] as ExportFormat[] | undefined) ?? [],
    options,
  };
}

/** `mempo rollout --agent` (src/cli/agent.ts): the module loaded and its tasks chosen before anything is written. */
async function runAgentRollout(opts: Record<string, unknown>, cmd: Command, io: RunIO): Promise<void> {
  const file = opts['agent'] as string;
  refuseBuiltInFlags(cmd, 'rollout', file);
  const s = settingsFrom('rollout', opts, cmd);
  const module = await loadAgentModule(file);
  const fromFlags = cmd.getOptionValueSource('questions') === 'cli' || cmd.getOptionValueSource('split') === 'cli';
  const tasks = agentTasks(s, module, fromFlags, () => selectQuestions(s), shuffled);
  const warn = (m: string) => void io.stderr.write(`warning: ${m}\n`);
  await executeAgentRollout(s, { module, concurrency: opts['agentConcurrency'] as number }, tasks, io, () => openEngine(s, io, warn));
}

function common(cmd: Command, kind: 'rollout' | 'eval' | 'train'): Command {
  cmd
    .option('--questions <file>', 'questions JSONL ({ id, question, golds }; optional hops, objectives)')
    .option('--split <names>', `embedded question split(s) when --questions is not given, comma-separated ones interleaved in proportion (train, dev, test and their -pages splits; default: ${kind === 'eval' ? 'dev,dev-pages' : 'train,train-pages'}, or ${kind === 'eval' ? 'dev' : 'train'} with --no-pages)`)
    .option('--shuffle', 'shuffle the questions with --seed before --offset / --limit (a mixed slice)')
    .option('--offset <n>', 'skip the first n questions', int(0), 0)
    .option('--limit <n>', "questions to run ('none' = all)", intOrNone, kind === 'eval' ? DEFAULT_EVAL_LIMIT : kind === 'train' ? NONE : DEFAULT_ROLLOUT_LIMIT)
    .option('--model <dir>', 'model directory (ONNX + tokenizer, or a Hugging Face directory with its onnx/ export from python3 -m mempo_learner.export_onnx DIR; with --server only the tokenizer, config files optional)', EMBEDDED.model())
    .option('--corpus <file>', 'JSONL corpus ({ id, title, contents, url? } or Search-R1 wiki-18 rows { id, contents } whose first line is the quoted title) for the local BM25 retriever (default: the embedded corpus)')
    .option('--retriever <url>', 'retrieval server (Search-R1 / ASearcher API: POST /retrieve) instead of the local corpus; its POST /access, when it has pages, is the page tool (<access>)')
    .option('--pages <file>', 'pages JSONL ({ url, title, contents }, ASearcher\'s layout) beside the local corpus: the agent gets the page tool, <access>URL</access> (docs/algorithm.md §1); without --corpus, --retriever or --pages the embedded world\'s pages')
    .option('--no-pages', 'the embedded world without pages: corpus.jsonl, no page tool, the train / dev split alone')
    .option('--threads <n>', 'ONNX Runtime intra-op threads (default: all cores; more than the machine has are lowered to that, with a warning)', int(1))
    .option('--quiet', 'no progress bars or messages on stderr')
    .option('--json', 'print summary.json (eval: the eval table) to stdout');
  addServerOptions(cmd);
  // Evaluation runs longer than training rollouts (docs/algorithm.md §7: 8 turns in training, up to 64 in evaluation).
  addPipelineOptions(cmd, kind === 'eval' ? { groupSize: 1, temperature: 0, memoryReward: false, maxTurns: 16, maxResponseTokens: 4096 } : {});
  return cmd;
}

export function buildProgram(io: RunIO, onDone: (code: number) => void): Command {
  const program = new Command();
  program
    .name('mempo')
    .description('MemPO (Self-Memory Policy Optimization) for LLM search agents: rollouts, memory rewards, advantages, training.')
    .version(packageVersion(), '-V, --version', 'print the version')
    .addHelpText('after', '\nmempo <command> --help lists the options of a command. Docs: docs/ in the package (algorithm.md, rollout.md, train.md, learner.md, servers.md, export.md).')
    .showHelpAfterError()
    .configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) })
    .exitOverride();

  // Output options and the action, shared by rollout and eval.
  const runOutputs = (cmd: Command, kind: 'rollout' | 'eval') =>
    cmd
      .option('--resume', 'keep the complete groups already in DIR/batch.jsonl and finish the rest')
      .option('--force', 'overwrite an existing DIR/batch.jsonl')
      .option('--no-report', 'do not write report.html')
      .option('--report-questions <n>', 'questions shown in report.html', int(1), DEFAULTS.reportQuestions)
      .exitOverride()
      .action(async (opts: Record<string, unknown>) => {
        if (kind === 'rollout' && opts['agent'] !== undefined) await runAgentRollout(opts, cmd, io);
        else await executeRun(settingsFrom(kind, opts, cmd), io);
        onDone(0);
      });
  const rollout = common(new Command('rollout'), 'rollout')
    .summary('sample, score and write a training batch')
    .description('Sample groups of multi-turn search trajectories, score them (outcome + memory rewards) and write a training batch: DIR/batch.jsonl, DIR/summary.json, DIR/report.html.')
    .requiredOption('--out <dir>', 'output directory')
    .option('--export <formats>', 'also write the batch for another trainer (docs/export.md): verl (DIR/batch.verl.safetensors), trl (DIR/batch.trl.json), tensors (DIR/batch.tensors.npz); repeat the flag or comma-separate', exportFormatList);
  agentOptions(rollout);
  runOutputs(rollout, 'rollout');
  const evalCmd = common(new Command('eval'), 'eval')
    .summary('evaluate a context policy on a question split')
    .description('Evaluate a context policy: greedy (temperature 0) or sampled rollouts on a question split; prints exact match by hops and by objectives, format-valid round rate, mixed groups, context tokens per question.')
    .option('--out <dir>', 'also write batch.jsonl, summary.json, eval.json and report.html here');
  runOutputs(evalCmd, 'eval');
  const serveRetriever = new Command('serve-retriever')
    .summary('serve a corpus (and pages) over the retrieval API')
    .description('Serve the Search-R1 / ASearcher retrieval API (POST /retrieve) over a JSONL corpus with the local BM25 retriever, and with --pages ASearcher\'s POST /access, until Ctrl-C.')
    .option('--corpus <file>', 'JSONL corpus ({ id, title, contents, url? } or Search-R1 wiki-18 rows { id, contents } whose first line is the quoted title)', EMBEDDED.corpus())
    .option('--pages <file>', 'pages JSONL ({ url, title, contents }) served by POST /access { urls } → { result: [page | null] }')
    .option('--max-page-chars <n>', 'each page answered by /access cut to this many characters', int(1), RETRIEVAL_SERVER_DEFAULTS.maxPageChars)
    .option('--host <host>', 'address to bind (loopback by default; any other needs --token)', '127.0.0.1')
    .option('--port <n>', 'port (0: any free port)', int(0), 8000)
    .option('--token <token>', `bearer token every request must carry (also ${SERVER_TOKEN_ENV}); required when --host is not a loopback address`)
    .option('--max-body <bytes>', 'largest request body accepted', int(1), RETRIEVAL_SERVER_DEFAULTS.maxBodyBytes)
    .option('--max-query-chars <n>', 'longest query accepted (400 past it; BM25 time grows with query length)', int(1), RETRIEVAL_SERVER_DEFAULTS.maxQueryChars)
    .exitOverride()
    .action(async (opts: Record<string, unknown>) => {
      const pages = (opts['pages'] as string | undefined) ?? null;
      const host = opts['host'] as string;
      const token = checkToken((opts['token'] as string | undefined) ?? process.env[SERVER_TOKEN_ENV], opts['token'] !== undefined ? '--token' : SERVER_TOKEN_ENV);
      // Before the corpus is read: a refused bind should not wait for a large corpus to load.
      await requireTokenOffLoopback(host, token !== undefined, RETRIEVER_GUARDED);
      const retriever = openCorpus(opts['corpus'] as string, pages);
      const server = createRetrievalServer(retriever, { maxBodyBytes: opts['maxBody'] as number, maxQueryChars: opts['maxQueryChars'] as number, maxPageChars: opts['maxPageChars'] as number, ...(token === undefined ? {} : { token }) });
      const url = await listen(server, opts['port'] as number, host);
      const paged = retriever.pages === null ? '' : ` and ${retriever.pages.size} pages from ${pages!} (POST ${url.replace(/\/retrieve$/, '/access')})`;
      const auth = token === undefined ? '' : '; every request needs Authorization: Bearer <token>';
      io.stderr.write(`mempo serve-retriever: ${retriever.size} documents from ${opts['corpus'] as string}${paged}, listening on ${url}${auth}\n`);
      await closeOnSignal(server);
      onDone(0);
    });
  const serve = new Command('serve')
    .summary('serve a local model over OpenAI/vLLM/SGLang HTTP')
    .description("Serve a local model over HTTP until Ctrl-C: OpenAI's API as the openai SDK and the AI SDK use it (POST /v1/chat/completions with the model's chat template, tools and tool calls; POST /v1/completions with text or token-id prompts; stream: true on both; n, seed, stop, logprobs, vLLM's return_token_ids; GET /v1/models) and SGLang's native POST /generate (input_ids, sampling_params, return_logprob, logprob_start_len), for your own agents and mempo rollout --server.")
    .option('--model <dir>', 'model directory (ONNX + tokenizer, or a Hugging Face directory with its onnx/ export from python3 -m mempo_learner.export_onnx DIR; with --server only the tokenizer, config files optional)', EMBEDDED.model())
    .option('--host <host>', 'address to bind (loopback by default; any other needs --token)', '127.0.0.1')
    .option('--port <n>', 'port (0: any free port)', int(0), 8001)
    .option('--max-concurrency <n>', 'requests run at once (the rest wait in a queue; 429 when it is full)', int(1), COMPLETIONS_SERVER_DEFAULTS.maxConcurrency)
    .option('--max-body <bytes>', 'largest request body accepted', int(1), COMPLETIONS_SERVER_DEFAULTS.maxBodyBytes)
    .option('--threads <n>', 'ONNX Runtime intra-op threads (default: all cores; more than the machine has are lowered to that, with a warning)', int(1))
    .option('--token <token>', `bearer token every request but GET /health must carry (also ${SERVER_TOKEN_ENV}); required when --host is not a loopback address`)
    .option('--chat-template <file>', "Jinja chat template for POST /v1/chat/completions instead of the model's own (as vLLM's --chat-template)")
    .option('--record <file>', 'record calls tagged with an episode (header x-mempo-episode, metadata.mempo_episode or user) and append each episode finished with POST /v1/episodes/{id}/finish to FILE as a JSON line (fsynced); on Ctrl-C/SIGTERM the unfinished ones are named')
    .exitOverride()
    .action(async (opts: Record<string, unknown>) => {
      const { server, model, record } = await startServe(opts, io);
      await closeOnSignal(server);
      record?.close(io.stderr);
      await model.dispose();
      onDone(0);
    });
  const exportCmd = exportCommand(io, onDone);
  const train = trainCommand(io, onDone, (c) => agentOptions(common(c, 'train')), (o, c) => settingsFrom('rollout', o, c));
  for (const sub of [rollout, evalCmd, train, exportCmd, serveRetriever, serve]) {
    sub.configureOutput({ writeOut: (s) => io.stdout.write(s), writeErr: (s) => io.stderr.write(s) });
    program.addCommand(sub);
  }
  return program;
}

/** Runs the command line; resolves to the exit code. */
export async function main(argv: readonly string[], io: RunIO = { stdout: process.stdout, stderr: process.stderr }): Promise<number> {
  let code = 0;
  const program = buildProgram(io, (c) => { code = c; });
  try {
    if (argv.length === 0) {
      program.outputHelp();
      return 0;
    }
    await program.parseAsync([...argv], { from: 'user' });
    return code;
  } catch (err) {
    // Help and --version exit 0; every other commander error is a usage error (unknown flag or
    // command, invalid or missing value): exit 2, as docs/rollout.md says.
    if (err instanceof CommanderError) return err.exitCode === 0 ? 0 : 2;
    if (err instanceof InvalidArgumentError) {
      io.stderr.write(`error: ${err.message}\n`);
      return 2;
    }
    if (err instanceof MempoError) {
      io.stderr.write(`error: ${err.message}\n`);
      return err.code === 'ERR_INVALID_OPTION' || err.code === 'ERR_INVALID_INPUT' || err.code === 'ERR_INPUT_FILE' ? 2 : 1;
    }
    const e = err as Error & { code?: string };
    io.stderr.write(`error: ${e.code ? `[${e.code}] ` : ''}${e.message}\n`);
    return 1;
  }
}

if (require.main === module) {
  void main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
