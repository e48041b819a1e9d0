/**
 * Errors raised by the model runtime. Every error has a stable `code` and a message that names
 * the file, tensor or item at fault.
 */
import { Shown, expected } from '../../validate';

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

/**
 * "Expected <what> for <argument> but received <value>": the package-wide wording of
 * src/validate.ts, with the value written by `describe` below.
 */
export function expectedError(code: RuntimeErrorCode, what: string, argument: string, value: unknown): MempoRuntimeError {
  return new MempoRuntimeError(code, expected(what, argument, new Shown(describe(value))));
}

/** A bad argument (`ERR_INVALID_ARGUMENT`), in the package-wide wording. */
export function invalidArgument(what: string, argument: string, value: unknown): MempoRuntimeError {
  return expectedError('ERR_INVALID_ARGUMENT', what, argument, value);
}

/**
 * The received value as the engine's messages show it ("an array of length 2", "a value of type
 * object"); kept apart from the kernels' `describe`, whose wording differs, so that messages
 * users may match on stay as they are.
 */
export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (Array.isArray(value)) return `an array of length ${value.length}`;
  if (ArrayBuffer.isView(value)) return `a ${value.constructor.name}`;
  return `a value of type ${typeof value}`;
}
