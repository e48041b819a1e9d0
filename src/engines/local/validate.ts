/** Token-id checks shared by generation and scoring, in the wording of src/validate.ts. */
import { expectedError } from './errors';

/** Plain arrays and numeric typed arrays (not DataView, not the BigInt arrays). */
function isIdArray(ids: unknown): ids is ArrayLike<number> {
  if (Array.isArray(ids)) return true;
  return ArrayBuffer.isView(ids) && !(ids instanceof DataView) && !(ids instanceof BigInt64Array) && !(ids instanceof BigUint64Array);
}

/** Checks that `ids` is an array of integer token ids in [0, vocab); `label` names the item. */
export function checkTokenIds(ids: unknown, vocab: number, label: string): ArrayLike<number> {
  if (!isIdArray(ids)) throw expectedError('ERR_INVALID_ARGUMENT', 'an array of token ids', label, ids);
  for (let i = 0; i < ids.length; i++) {
    const v = ids[i]!;
    if (!Number.isInteger(v) || v < 0 || v >= vocab) {
      throw expectedError('ERR_TOKEN_OUT_OF_VOCAB', `a token id in [0, ${vocab})`, `${label}[${i}]`, v);
    }
  }
  return ids;
}
