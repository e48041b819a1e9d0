import { rangeError, typeError } from '../validate';

/**
 * Map arbitrary group labels (uids: numbers or strings) to dense ids 0..count-1 in order of
 * first appearance, so kernels index per-group statistics by a small integer. An Int32Array of
 * ids in [0, length) (a trainer's own integer group ids) is taken as it is, copied, with count
 * max + 1: no per-label map work. Only which labels share a group reaches the results, so both
 * paths give the same advantages bit for bit.
 */
export interface DenseGroups {
  ids: Int32Array;
  count: number;
}

export function denseGroups(labels: unknown, argument: string, length: number, shape: string): DenseGroups {
  const ok =
    Array.isArray(labels) ||
    (ArrayBuffer.isView(labels) && !(labels instanceof DataView) && !(labels instanceof BigInt64Array) && !(labels instanceof BigUint64Array));
  if (!ok) throw typeError(`an array of numbers or strings of length ${shape}`, argument, labels);
  const arr = labels as ArrayLike<unknown>;
  if (arr.length !== length) throw rangeError(`an array of numbers or strings of length ${shape}`, argument, labels);
  if (labels instanceof Int32Array) {
    const direct = integerIds(labels);
    if (direct) return direct;
  }
  const ids = new Int32Array(length);
  const seen = new Map<number | string, number>();
  for (let i = 0; i < length; i++) {
    const label = arr[i];
    if (!((typeof label === 'number' && Number.isFinite(label)) || typeof label === 'string')) {
      throw typeError('a finite number or a string', `${argument}[${i}]`, label);
    }
    let id = seen.get(label);
    if (id === undefined) {
      id = seen.size;
      seen.set(label, id);
    }
    ids[i] = id;
  }
  return { ids, count: seen.size };
}

/** ids in [0, length) as they are (a copy: the caller may change its array afterwards), else null. */
function integerIds(labels: Int32Array): DenseGroups | null {
  const n = labels.length;
  const ids = labels.slice();
  let max = -1;
  for (let i = 0; i < n; i++) {
    const v = ids[i]!;
    if (v < 0 || v >= n) return null;
    if (v > max) max = v;
  }
  return { ids, count: max + 1 };
}

/** Combine two dense id sets into one (group, round) key set, numbered by first appearance. */
export function pairGroups(a: Int32Array, b: Int32Array): DenseGroups {
  const ids = new Int32Array(a.length);
  let countA = 0, minB = 0, maxB = 0;
  for (let i = 0; i < a.length; i++) {
    countA = Math.max(countA, a[i]! + 1);
    minB = Math.min(minB, b[i]!);
    maxB = Math.max(maxB, b[i]!);
  }
  // A numeric key (exact below 2^53, true for any real batch), else the string key.
  const numeric = (maxB - minB + 1) * countA <= Number.MAX_SAFE_INTEGER;
  const seen = new Map<number | string, number>();
  for (let i = 0; i < a.length; i++) {
    const key = numeric ? (b[i]! - minB) * countA + a[i]! : `${a[i]}:${b[i]}`;
    let id = seen.get(key);
    if (id === undefined) {
      id = seen.size;
      seen.set(key, id);
    }
    ids[i] = id;
  }
  return { ids, count: seen.size };
}
