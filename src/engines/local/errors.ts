/**
 * Helpers for the model runtime's errors (MempoError, src/errors.ts): the package-wide
 * "Expected X for Y but received Z" wording with the runtime's way of showing a value.
 */
import { Shown, expected } from '../../validate';
import { MempoError, type RuntimeErrorCode } from '../../errors';

export { MempoRuntimeError, type RuntimeErrorCode } from '../../errors';

/**
 * "Expected <what> for <argument> but received <value>": the package-wide wording of
 * src/validate.ts, with the value written by `describe` below.
 */
export function expectedError(code: RuntimeErrorCode, what: string, argument: string, value: unknown): MempoError {
  return new MempoError(code, expected(what, argument, new Shown(describe(value))));
}

/** A bad argument (`ERR_INVALID_ARGUMENT`), in the package-wide wording. */
export function invalidArgument(what: string, argument: string, value: unknown): MempoError {
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
