/**
 * The results of the kernels: one size rule and one allocation failure for both backends, so
 * that an impossible output is the same catchable RangeError on the native addon and the JS twin,
 * thrown before anything large is allocated.
 */
import { constants } from 'buffer';
import { checkTyped, rangeError, Shown } from '../validate';

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

/** An optional caller-owned result (`out`): written in place and returned instead of a new array. */
export interface ResultOptions {
  /**
   * A Float32Array of the result's length that the kernel overwrites whole (every element, as a
   * fresh result would hold it) and returns. A trainer reuses one per micro-batch: no allocation,
   * no page faults, no garbage. It must share no memory with an input or with another result.
   */
  out?: Float32Array;
}

/** Whether two views share a byte of one buffer (empty views share nothing). */
function overlaps(a: ArrayBufferView, b: ArrayBufferView): boolean {
  return (
    a.buffer === b.buffer && a.byteLength > 0 && b.byteLength > 0 &&
    a.byteOffset < b.byteOffset + b.byteLength && b.byteOffset < a.byteOffset + a.byteLength
  );
}

/**
 * A caller's result array: exactly a Float32Array of `length` (`shape` says how it was computed)
 * that shares no memory with any typed array among `others` (the inputs, read while the result is
 * written, and the call's other results), named in the error.
 */
export function checkOut(value: unknown, argument: string, length: number, shape: string, others: Record<string, unknown>): Float32Array {
  const out = checkTyped(value, Float32Array, argument, length, shape);
  for (const [name, other] of Object.entries(others)) {
    if (ArrayBuffer.isView(other) && overlaps(out, other)) {
      throw rangeError(`a Float32Array of length ${shape} that shares no memory with ${name}`, argument, new Shown(`a Float32Array over the memory of ${name}`));
    }
  }
  return out;
}
