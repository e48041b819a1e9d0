/**
 * Errors of the rollout pipeline (tools, inputs, options). Every error has a stable `code` and a
 * message naming the file, line, field or option at fault.
 */
export type PipelineErrorCode =
  | 'ERR_INVALID_OPTION'
  | 'ERR_INVALID_INPUT'
  | 'ERR_INPUT_FILE'
  | 'ERR_RETRIEVER_DOWN'
  | 'ERR_RETRIEVER_RESPONSE'
  /** Every trajectory of a batch failed on the inference servers (generation or scoring). */
  | 'ERR_BACKEND'
  | 'ERR_TOKENIZER_PROTOCOL'
  | 'ERR_RESUME';

export class MempoPipelineError extends Error {
  readonly code: PipelineErrorCode;
  constructor(code: PipelineErrorCode, message: string) {
    super(message);
    this.name = 'MempoPipelineError';
    this.code = code;
  }
}
