/**
 * Errors raised by the model runtime. Every error has a stable `code` and a message that names
 * the file, tensor or item at fault.
 */
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
  | 'ERR_DISPOSED';

export class MempoRuntimeError extends Error {
  readonly code: RuntimeErrorCode;
  constructor(code: RuntimeErrorCode, message: string) {
    super(message);
    this.name = 'MempoRuntimeError';
    this.code = code;
  }
}

/** "Expected <what> for <argument> but received <value>" (the package-wide wording). */
export function invalidArgument(what: string, argument: string, value: unknown): MempoRuntimeError {
  return new MempoRuntimeError(
    'ERR_INVALID_ARGUMENT',
    `Expected ${what} for ${argument} but received ${describe(value)}`,
  );
}

export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (Array.isArray(value)) return `an array of length ${value.length}`;
  if (ArrayBuffer.isView(value)) return `a ${value.constructor.name}`;
  return `a value of type ${typeof value}`;
}
