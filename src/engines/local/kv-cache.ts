/**
 * The key/value cache of a batch: one `[batch, heads, length, headDim]` float32 tensor per layer
 * for keys and one for values, handed back to the model as `past_key_values.*` unchanged from the
 * previous step's `present.*` outputs (no copy in JS).
 *
 * Rows leave only through `compact`, called when sequences finish: it keeps the given rows and
 * drops leading columns that are padding for every kept row, in one copy. When the kept rows are
 * a prefix of the batch and nothing is trimmed, the tensors are re-viewed without copying.
 */
import { getOrt, type OrtTensor } from './ort';

export class KVCache {
  constructor(
    readonly keys: OrtTensor[],
    readonly values: OrtTensor[],
    readonly batch: number,
    readonly length: number,
    readonly heads: number,
    readonly headDim: number,
  ) {}

  static empty(layers: number, batch: number, heads: number, headDim: number): KVCache {
    const ort = getOrt();
    const make = () => new ort.Tensor('float32', new Float32Array(0), [batch, heads, 0, headDim]);
    return new KVCache(
      Array.from({ length: layers }, make),
      Array.from({ length: layers }, make),
      batch,
      0,
      heads,
      headDim,
    );
  }

  /** Keeps rows `keep` (in that order) and drops the first `trim` columns of every row. */
  compact(keep: readonly number[], trim: number): KVCache {
    const H = this.heads;
    const D = this.headDim;
    const L = this.length;
    const newLen = L - trim;
    const isPrefix = keep.every((r, i) => r === i);
    const ort = getOrt();
    const remap = (t: OrtTensor): OrtTensor => {
      const src = t.data as Float32Array;
      if (isPrefix && trim === 0) {
        return new ort.Tensor('float32', src.subarray(0, keep.length * H * L * D), [keep.length, H, L, D]);
      }
      const dst = new Float32Array(keep.length * H * newLen * D);
      const rowIn = H * L * D;
      const rowOut = H * newLen * D;
      for (let i = 0; i < keep.length; i++) {
        const r = keep[i]!;
        if (trim === 0) {
          dst.set(src.subarray(r * rowIn, (r + 1) * rowIn), i * rowOut);
          continue;
        }
        for (let h = 0; h < H; h++) {
          const from = r * rowIn + (h * L + trim) * D;
          dst.set(src.subarray(from, from + newLen * D), i * rowOut + h * newLen * D);
        }
      }
      return new ort.Tensor('float32', dst, [keep.length, H, newLen, D]);
    };
    return new KVCache(this.keys.map(remap), this.values.map(remap), keep.length, newLen, H, D);
  }
}
