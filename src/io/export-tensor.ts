/**
 * Named arrays for the files other trainers read (docs/export.md, docs/algorithm.md §8): the
 * dtypes as safetensors spells them, and their bytes in little-endian order whatever the host's.
 */
import { MempoError } from '../errors';

export type TensorDType = 'I64' | 'I32' | 'F32' | 'U8' | 'BOOL';

export interface Tensor {
  dtype: TensorDType;
  shape: number[];
  data: BigInt64Array | Int32Array | Float32Array | Uint8Array;
}

/** Tensors in file order (names unique). */
export type NamedTensors = ReadonlyArray<readonly [string, Tensor]>;

export const ELEMENT_BYTES: Record<TensorDType, number> = { I64: 8, I32: 4, F32: 4, U8: 1, BOOL: 1 };

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

export function numel(shape: readonly number[]): number {
  return shape.reduce((a, d) => a * d, 1);
}

/** An int64 tensor of `values` (token ids, masks, positions: verl's dtype for all of them). */
export function int64(shape: number[], values: ArrayLike<number>): Tensor {
  const data = new BigInt64Array(values.length);
  for (let i = 0; i < values.length; i++) data[i] = BigInt(values[i]!);
  return checked({ dtype: 'I64', shape, data });
}

export function float32(shape: number[], values: ArrayLike<number>): Tensor {
  return checked({ dtype: 'F32', shape, data: Float32Array.from(values) });
}

export function int32(shape: number[], values: ArrayLike<number>): Tensor {
  return checked({ dtype: 'I32', shape, data: Int32Array.from(values) });
}

export function uint8(shape: number[], values: ArrayLike<number>, dtype: 'U8' | 'BOOL' = 'U8'): Tensor {
  return checked({ dtype, shape, data: Uint8Array.from(values) });
}

/** Throws when the shape does not hold the data (a writer must never emit a file a reader mis-slices). */
export function checked(t: Tensor): Tensor {
  if (!t.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) throw new MempoError('ERR_INVALID_ARGUMENT', `Tensor shape [${t.shape.join(', ')}] is not a list of non-negative integers`);
  if (numel(t.shape) !== t.data.length) throw new MempoError('ERR_INVALID_ARGUMENT', `Tensor shape [${t.shape.join(', ')}] holds ${numel(t.shape)} values, the data has ${t.data.length}`);
  return t;
}

/** The tensor's bytes, little-endian (a view of the data on a little-endian host). */
export function tensorBytes(t: Tensor): Uint8Array {
  const d = t.data;
  if (LITTLE_ENDIAN || d instanceof Uint8Array) return new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
  const out = new Uint8Array(d.byteLength);
  const v = new DataView(out.buffer);
  for (let i = 0; i < d.length; i++) {
    if (d instanceof BigInt64Array) v.setBigInt64(8 * i, d[i]!, true);
    else if (d instanceof Int32Array) v.setInt32(4 * i, d[i]!, true);
    else v.setFloat32(4 * i, d[i]!, true);
  }
  return out;
}
