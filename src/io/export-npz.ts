/**
 * NumPy's .npz, written without a dependency (docs/export.md): a zip archive of stored (not
 * compressed) `NAME.npy` entries, each an .npy v1.0 file: the magic, a Python-literal header
 * dict padded with spaces and a newline to a multiple of 64 bytes, then the raw data in C order.
 * `numpy.load(file)` reads it without pickle (no object arrays are written).
 */
import { MempoError } from '../errors';
import { checked, tensorBytes, type Tensor } from './export-tensor';

/** A 1-D array of strings, stored as NumPy's fixed-width `<U` (UTF-32LE code points). */
export interface StringArray {
  dtype: 'STR';
  shape: [number];
  values: string[];
}

export type NpyArray = Tensor | StringArray;

const DESCR: Record<Tensor['dtype'], string> = { I64: '<i8', I32: '<i4', F32: '<f4', U8: '|u1', BOOL: '|b1' };

export function strings(values: readonly string[]): StringArray {
  return { dtype: 'STR', shape: [values.length], values: [...values] };
}

function stringBytes(a: StringArray): { descr: string; bytes: Uint8Array } {
  const points = a.values.map((s) => Array.from(s, (c) => c.codePointAt(0)!));
  const width = Math.max(1, ...points.map((p) => p.length));
  const bytes = new Uint8Array(4 * width * points.length);
  const v = new DataView(bytes.buffer);
  points.forEach((p, i) => p.forEach((cp, j) => v.setUint32(4 * (i * width + j), cp, true)));
  return { descr: `<U${width}`, bytes };
}

/** One .npy v1.0 file. */
export function encodeNpy(a: NpyArray): Uint8Array {
  const { descr, bytes } = a.dtype === 'STR' ? stringBytes(a) : { descr: DESCR[checked(a).dtype], bytes: tensorBytes(a) };
  const shape = a.shape.length === 1 ? `(${a.shape[0]},)` : `(${a.shape.join(', ')})`;
  const dict = `{'descr': '${descr}', 'fortran_order': False, 'shape': ${shape}, }`;
  // magic (6) + version (2) + header length (2) + header, a multiple of 64 as NumPy writes it.
  const total = Math.ceil((10 + dict.length + 1) / 64) * 64;
  const headerLength = total - 10;
  if (headerLength > 0xffff) throw new MempoError('ERR_INVALID_ARGUMENT', `The .npy header of shape ${shape} is too long for format 1.0`);
  const out = new Uint8Array(total + bytes.length);
  out.set([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0], 0);
  new DataView(out.buffer).setUint16(8, headerLength, true);
  out.set(Buffer.from(dict, 'latin1'), 10);
  out.fill(0x20, 10 + dict.length, total - 1);
  out[total - 1] = 0x0a;
  out.set(bytes, total);
  return out;
}

let crcTable: Uint32Array | null = null;

/** CRC-32 (IEEE 802.3, zip's), table-driven. */
export function crc32(data: Uint8Array): number {
  if (crcTable === null) {
    crcTable = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      crcTable[n] = c >>> 0;
    }
  }
  let c = 0xffffffff;
  for (let i = 0; i < data.length; i++) c = crcTable[(c ^ data[i]!) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

// MS-DOS date of 1980-01-01, time 00:00: a fixed stamp keeps the same batch byte-identical.
const DOS_DATE = (0 << 9) | (1 << 5) | 1;
const ZIP32_LIMIT = 0xffffffff;

/** A zip archive of stored entries (no ZIP64: an archive over 4 GiB is an error). */
export function encodeZip(entries: ReadonlyArray<readonly [string, Uint8Array]>): Uint8Array {
  const locals: Uint8Array[] = [];
  const centrals: Uint8Array[] = [];
  let offset = 0;
  for (const [name, data] of entries) {
    const n = Buffer.from(name, 'utf8');
    const crc = crc32(data);
    if (offset + 30 + n.length + data.length > ZIP32_LIMIT) {
      throw new MempoError('ERR_INVALID_ARGUMENT', 'The .npz archive would pass 4 GiB, which needs ZIP64 (not written); export the batch as safetensors (--export verl) instead');
    }
    const local = new Uint8Array(30 + n.length);
    const lv = new DataView(local.buffer);
    lv.setUint32(0, 0x04034b50, true);
    lv.setUint16(4, 20, true);
    lv.setUint16(12, DOS_DATE, true);
    lv.setUint32(14, crc, true);
    lv.setUint32(18, data.length, true);
    lv.setUint32(22, data.length, true);
    lv.setUint16(26, n.length, true);
    local.set(n, 30);
    const central = new Uint8Array(46 + n.length);
    const cv = new DataView(central.buffer);
    cv.setUint32(0, 0x02014b50, true);
    cv.setUint16(4, 20, true);
    cv.setUint16(6, 20, true);
    cv.setUint16(14, DOS_DATE, true);
    cv.setUint32(16, crc, true);
    cv.setUint32(20, data.length, true);
    cv.setUint32(24, data.length, true);
    cv.setUint16(28, n.length, true);
    cv.setUint32(42, offset, true);
    central.set(n, 46);
    locals.push(local, data);
    centrals.push(central);
    offset += local.length + data.length;
  }
  const cdSize = centrals.reduce((a, c) => a + c.length, 0);
  if (entries.length > 0xffff || offset + cdSize > ZIP32_LIMIT) throw new MempoError('ERR_INVALID_ARGUMENT', 'The .npz archive is too large for a zip without ZIP64');
  const end = new Uint8Array(22);
  const ev = new DataView(end.buffer);
  ev.setUint32(0, 0x06054b50, true);
  ev.setUint16(8, entries.length, true);
  ev.setUint16(10, entries.length, true);
  ev.setUint32(12, cdSize, true);
  ev.setUint32(16, offset, true);
  return Buffer.concat([...locals, ...centrals, end]);
}

/** A .npz of `arrays` (`numpy.load(f)[name]`). */
export function encodeNpz(arrays: ReadonlyArray<readonly [string, NpyArray]>): Uint8Array {
  const seen = new Set<string>();
  for (const [name] of arrays) {
    if (!/^[A-Za-z_][A-Za-z0-9_.]*$/.test(name) || seen.has(name)) throw new MempoError('ERR_INVALID_ARGUMENT', `Array name ${JSON.stringify(name)} is not a unique identifier-like name`);
    seen.add(name);
  }
  return encodeZip(arrays.map(([name, a]) => [`${name}.npy`, encodeNpy(a)] as const));
}
