import { rangeError, typeError } from '../validate';

/**
 * Map arbitrary group labels (uids: numbers or strings) to dense ids 0..count-1 in order of
 * first appearance, so kernels index per-group statistics by a small integer.
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

/** Combine two dense id sets into one (group, round) key set. */
export function pairGroups(a: Int32Array, b: Int32Array): DenseGroups {
  const ids = new Int32Array(a.length);
  const seen = new Map<string, number>();
  for (let i = 0; i < a.length; i++) {
    const key = `${a[i]}:${b[i]}`;
    let id = seen.get(key);
    if (id === undefined) {
      id = seen.size;
      seen.set(key, id);
    }
    ids[i] = id;
  }
  return { ids, count: seen.size };
}
