/**
 * Checks of what `mempo rollout` / `mempo eval` / `mempo serve` are given, before the work
 * starts: thread count, the model directory's config.json and manifest.json, the corpus, and
 * questions whose prompt does not fit the model's context.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join, relative, sep } from 'node:path';
import { MempoError } from '../errors';
import { readModelConfig, readServerModelConfig } from '../engines/local/model-dir';
import { chatRendererFor, renderPrompt } from '../protocol/chat';
import { agentSystemPrompt } from '../pipeline/trajectory';
import { Bm25Retriever } from '../retrieval/bm25';
import { HttpRetriever } from '../retrieval/http-retriever';
import { PageStore } from '../retrieval/pages';
import type { Generator, Question, Retriever } from '../contracts';
import type { PipelineOptions } from '../options';

export interface Warn {
  (message: string): void;
}

/**
 * ONNX Runtime intra-op threads: at most the cores this process may use. More threads than
 * cores only contend (1,000 threads did not finish a 2-question run), and a script written for
 * a bigger machine should still run, so a larger value is lowered with a warning.
 */
export function boundThreads(requested: number | null | undefined, warn: Warn, flag = '--threads'): number {
  const cores = Math.max(1, availableParallelism());
  if (requested === null || requested === undefined) return cores;
  if (requested <= cores) return requested;
  warn(`${flag} ${requested} is more than the ${cores} cores this machine has; using ${cores}`);
  return cores;
}

/** Integer ids of a config `eos_token_id` (a number or a list). */
/**
 * The model directory's config.json (and generation_config.json), read before anything loads:
 * an eos or pad id outside the vocabulary is an error naming the file (readModelConfig checks it).
 * With --server the weights live on the server, so only what that path reads is checked
 * (readServerModelConfig: no architecture fields); a directory without config.json is left to the engine.
 */
export function checkModelConfig(dir: string, server = false): void {
  if (server) {
    readServerModelConfig(dir);
    return;
  }
  const configPath = join(dir, 'config.json');
  if (!existsSync(configPath)) return;
  readModelConfig({ dir, configPath, modelPath: '' });
}

/**
 * The model directory's manifest.json (`{ files: { name: { sha256, bytes } } }`), when there is
 * one: a manifest that does not parse, or a file whose size differs from it, is a warning
 * naming the manifest (the model may still load; the sha256 sums are left to `npm test`).
 */
export function checkManifest(dir: string, warn: Warn): void {
  const path = join(dir, 'manifest.json');
  if (!existsSync(path)) return;
  let files: unknown;
  try {
    files = (JSON.parse(readFileSync(path, 'utf8')) as { files?: unknown } | null)?.files;
  } catch (err) {
    warn(`${path} is not valid JSON (${(err as Error).message}); the model files are not checked against it`);
    return;
  }
  if (files === null || typeof files !== 'object' || Array.isArray(files)) {
    warn(`${path} has no "files" object; the model files are not checked against it`);
    return;
  }
  for (const [name, entry] of Object.entries(files as Record<string, unknown>)) {
    const bytes = (entry as { bytes?: unknown } | null)?.bytes;
    const file = join(dir, name);
    if (!existsSync(file)) warn(`${path} lists ${name}, which is missing`);
    else if (typeof bytes === 'number' && statSync(file).size !== bytes) warn(`${path}: ${name} is ${statSync(file).size} bytes, the manifest says ${bytes}`);
  }
}

/** The local BM25 retriever over `corpus`, with `pages` its page tool; a corpus (or pages file) without lines is an error naming it. */
export function openCorpus(corpus: string, pages: string | null = null): Bm25Retriever {
  const store = pages === null ? null : PageStore.fromJsonl(pages);
  if (store !== null && store.size === 0) throw new MempoError('ERR_INVALID_INPUT', `${pages}: the pages file has no pages`);
  const r = Bm25Retriever.fromJsonl(corpus, {}, store);
  if (r.size === 0) throw new MempoError('ERR_INVALID_INPUT', `${corpus}: the corpus has no documents`);
  return r;
}

/** How the banner and the report name a retriever: "retrieval server URL" or "BM25 over FILE (N documents)". */
export function describeRetriever(r: Retriever): string {
  const shown = (file: string) => {
    const rel = relative(process.cwd(), file);
    return rel.length > 0 && !rel.startsWith('..') && !rel.startsWith(sep) ? rel : file;
  };
  if (r instanceof HttpRetriever) return `retrieval server ${r.url}`;
  if (r instanceof Bm25Retriever) {
    const file = r.name.replace(/^bm25:/, '');
    return `BM25 over ${shown(file)} (${r.size} documents)${r.pages === null ? '' : `, ${r.pages.size} pages from ${shown(r.pages.name.replace(/^pages:/, ''))}`}`;
  }
  return r.name;
}

/**
 * Questions whose round-1 prompt already fills the model's context (no token could be
 * generated, every trajectory would end as 'context' with score 0) are left out of the run
 * with a warning naming them; none left is an error.
 */
export function dropOverlong(questions: readonly Question[], generator: Generator, options: PipelineOptions, file: string, warn: Warn): Question[] {
  const limit = generator.maxContextTokens;
  const renderer = chatRendererFor(generator.codec, options.rollout.chatTemplate);
  const kept: Question[] = [];
  const over: string[] = [];
  const tokens = (question: string) => generator.codec.encode(renderPrompt(question, agentSystemPrompt(options), renderer)).length;
  for (const q of questions) {
    // A huge question (30 MB took ~30 s to encode, once per sample in the rollout): a prefix of
    // it already twice over the context settles it (a cut changes only the tokens near the cut).
    const cut = 64 * limit;
    const head = q.question.length > cut ? tokens(q.question.slice(0, cut)) : 0;
    const n = head >= 2 * limit ? head : tokens(q.question);
    if (n < limit) kept.push(q);
    else over.push(`${JSON.stringify(q.id)} (${n === head ? 'over ' : ''}${n} tokens)`);
  }
  if (over.length === 0) return kept;
  const list = `${over.slice(0, 5).join(', ')}${over.length > 5 ? `, … (${over.length - 5} more)` : ''}`;
  const why = `the prompt of ${over.length === 1 ? 'question' : 'questions'} ${list} in ${file} is not shorter than the model's context (${limit} tokens)`;
  if (kept.length === 0) throw new MempoError('ERR_INVALID_INPUT', `${why}: no question left to run`);
  warn(`${why}: ${over.length} ${over.length === 1 ? 'question' : 'questions'} left out of this run`);
  return kept;
}
