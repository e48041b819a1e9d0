/**
 * The shapes that `mempo rollout` / `eval` (run.ts) and the modules below it (run-dir.ts, run-output.ts,
 * export.ts, train.ts, serve.ts) share: declared here, under all of them, so that none imports run.ts back.
 */
import type { CausalLM } from '../engines/local/causal-lm';
import type { BatchRecord } from '../pipeline/batch';
import type { Generator, TargetScorer } from '../contracts';
import type { BackendStats, HttpCompletionsBackend } from '../engines/http/client';
import type { ServerSettings } from './options';
import type { PipelineOptions } from '../options';
import type { RunSummary } from '../pipeline/summary';
import type { EvalReport } from '../pipeline/eval-report';
import type { ExportFormat } from '../io/export';

export interface RunIO {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

export interface RunSettings {
  kind: 'rollout' | 'eval';
  out: string | null;
  /** Questions files, read as one list (several: interleaved in proportion, `readQuestionFiles`). */
  questions: string[];
  offset: number;
  limit: number | null;
  /** Shuffle the questions (seeded by the run's seed) before --offset / --limit. */
  shuffle: boolean;
  model: string;
  corpus: string | null;
  retriever: string | null;
  /** `--pages`: the local page tool's pages JSONL beside the corpus (docs/algorithm.md §1). */
  pages?: string | null;
  resume: boolean;
  force: boolean;
  quiet: boolean;
  json: boolean;
  report: boolean;
  reportQuestions: number;
  threads: number | null;
  /** Inference servers for generation and scoring (--server); null = the local model. */
  server?: ServerSettings | null;
  /** `--export`: also write the batch in these layouts for other trainers (docs/export.md). */
  export?: ExportFormat[];
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

/** The model a run samples and scores with: inference servers (--server) or the local ONNX model. */
export interface RunEngine {
  engine: Generator & TargetScorer;
  /** What the banner says. */
  source: string;
  /** Set with --server. */
  server: HttpCompletionsBackend | null;
  /** Set for the local model (disposed at the end). */
  local: CausalLM | null;
}
