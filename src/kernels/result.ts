/**
 * The results of the kernels: one size rule and one allocation failure for both backends, so
 * that an impossible output is the same catchable RangeError on the native addon and the JS twin,
 * thrown before anything large is allocated.
 */
import { constants } from 'buffer';
import { rangeError, Shown } from '../validate';

/**
 * The largest ArrayBuffer Node creates for an addon (buffer.constants.MAX_LENGTH bytes: 4 GiB on
 * Node 20). Results larger than this are refused on both backends, although the JS twin alone
 * could allocate some of them.
 */
export const MAX_RESULT_BYTES = constants.MAX_LENGTH;

/** Throws unless a Float32Array of `elements` values fits MAX_RESULT_BYTES; `shape` shows how it was computed. */
export function checkResultSize(elements: number, argument: string, shape: string): void {
  if (elements * Float32Array.BYTES_PER_ELEMENT > MAX_RESULT_BYTES) {
    throw rangeError(
      `a result of at most ${MAX_RESULT_BYTES / Float32Array.BYTES_PER_ELEMENT} float32 values (${MAX_RESULT_BYTES} bytes, the largest buffer Node hands an addon)`,
      argument,
      new Shown(`${shape} = ${elements}`),
    );
  }
}

/** `new Float32Array(n)` with the native addon's wording when memory runs out (native/napi/alloc.h). */
export function newResult(n: number): Float32Array {
  try {
    return new Float32Array(n);
  } catch (err) {
    // (By name: the typed-array constructor may come from another realm than this RangeError.)
    if ((err as Error)?.name !== 'RangeError') throw err;
    throw new RangeError(`Cannot allocate the result (a Float32Array of length ${n}): out of memory`, { cause: err });
  }
}
