/**
 * The one error class of everything above the kernels (the kernels keep TypeError / RangeError,
 * like Node's own APIs): pipeline, options and inputs, the local model runtime, retrievers and
 * inference servers. Every error has a stable `code` and a message naming the file, line, field,
 * option, tensor, item or server at fault.
 */

/** Codes of the pipeline: options, inputs, tools, resume. */
export type PipelineErrorCode =
  | 'ERR_INVALID_OPTION'
  | 'ERR_INVALID_INPUT'
  | 'ERR_INPUT_FILE'
  | 'ERR_RETRIEVER_DOWN'
  | 'ERR_RETRIEVER_RESPONSE'
  /** Every trajectory of a batch failed on the inference servers (generation or scoring). */
  | 'ERR_BACKEND'
  | 'ERR_TOKENIZER_PROTOCOL'
  | 'ERR_RESUME'
  /** Another run holds the run directory (its `.lock`, src/io/run-lock.ts). */
  | 'ERR_RUN_LOCKED';

/** Codes of the local model runtime (src/engines/local). */
export type RuntimeErrorCode =
  | 'ERR_MODEL_FILE_MISSING'
  | 'ERR_MODEL_CONFIG'
  | 'ERR_MODEL_IO'
  | 'ERR_TOKENIZER'
  | 'ERR_INVALID_ARGUMENT'
  | 'ERR_CONTEXT_TOO_LONG'
  | 'ERR_EMPTY_TARGET'
  | 'ERR_EMPTY_CONTEXT'
  | 'ERR_TOKEN_OUT_OF_VOCAB'
  | 'ERR_DISPOSED'
  /** onnxruntime-node, an optional dependency the local engine needs, is not installed (or does not load). */
  | 'ERR_MISSING_DEPENDENCY';

/** Codes of the inference-server client (src/engines/http): a wrong answer, or retries exhausted. */
export type ServerErrorCode = 'ERR_SERVER';

/** Codes of the learner (src/learner, docs/learner.md): it died, timed out, or answered outside the protocol. */
export type LearnerErrorCode = 'ERR_LEARNER';

export type MempoErrorCode = PipelineErrorCode | RuntimeErrorCode | ServerErrorCode | LearnerErrorCode;

export class MempoError extends Error {
  readonly code: MempoErrorCode;
  constructor(code: MempoErrorCode, message: string) {
    super(message);
    this.name = 'MempoError';
    this.code = code;
  }
}

// The names each layer used before there was one class: `instanceof` and construction with a
// code keep working for callers that catch them.
export const MempoPipelineError = MempoError;
export type MempoPipelineError = MempoError;
export const MempoRuntimeError = MempoError;
export type MempoRuntimeError = MempoError;

/** An inference server's wrong answer or exhausted retries (code ERR_SERVER). */
export function serverError(message: string): MempoError {
  return new MempoError('ERR_SERVER', message);
}

/** Whether `err` is an inference-server failure (serverError). */
export function isServerError(err: unknown): err is MempoError {
  return err instanceof MempoError && err.code === 'ERR_SERVER';
}
