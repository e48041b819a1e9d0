import { MempoRuntimeError, describe } from './errors';

/** Checks that `ids` is an array of integer token ids in [0, vocab); `label` names the item. */
export function checkTokenIds(ids: unknown, vocab: number, label: string): ArrayLike<number> {
  if (!Array.isArray(ids) && !(ArrayBuffer.isView(ids) && !(ids instanceof DataView) && !(ids instanceof BigInt64Array) && !(ids instanceof BigUint64Array))) {
    throw new MempoRuntimeError('ERR_INVALID_ARGUMENT', `Expected an array of token ids for ${label} but received ${describe(ids)}`);
  }
  const arr = ids as ArrayLike<number>;
  for (let i = 0; i < arr.length; i++) {
    const v = arr[i]!;
    if (!Number.isInteger(v) || v < 0 || v >= vocab) {
      throw new MempoRuntimeError(
        'ERR_TOKEN_OUT_OF_VOCAB',
        `Expected a token id in [0, ${vocab}) for ${label}[${i}] but received ${describe(v)}`,
      );
    }
  }
  return arr;
}
