/**
 * The file formats of docs/export.md, byte for byte against layouts written out here from their
 * specs (safetensors: u64 LE header length, space-padded JSON, LE data; .npy v1.0: magic,
 * u16 LE header length, 64-byte aligned header; zip: stored entries, CRC-32 from node:zlib).
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32 as zlibCrc32 } from 'node:zlib';
import { crc32, encodeNpy, encodeNpz, encodeSafetensors, encodeZip } from '../../src/io/export';
import { float32, int32, int64, uint8 } from '../../src/io/export-tensor';
import { strings } from '../../src/io/export-npz';
import { writeFileAtomic, type WriteFn } from '../../src/io/run-dir';
import { writeSync } from 'node:fs';

const bytes = (...xs: number[]) => Uint8Array.from(xs);
const ascii = (s: string) => Uint8Array.from(Buffer.from(s, 'latin1'));
const cat = (...parts: Uint8Array[]) => Uint8Array.from(Buffer.concat(parts));
const u64 = (n: number) => bytes(n & 0xff, (n >>> 8) & 0xff, 0, 0, 0, 0, 0, 0);

describe('safetensors', () => {
  test('header, offsets and data match the layout computed by hand', () => {
    // Given smallest element first: the writer lays out I64, then F32, then BOOL (each aligned).
    const out = encodeSafetensors(
      [['c', uint8([3], [1, 0, 1], 'BOOL')], ['b', float32([1], [0.5])], ['a', int64([2], [1, -2])]],
      { format: 'pt' },
    );
    const json =
      '{"__metadata__":{"format":"pt"},' +
      '"a":{"dtype":"I64","shape":[2],"data_offsets":[0,16]},' +
      '"b":{"dtype":"F32","shape":[1],"data_offsets":[16,20]},' +
      '"c":{"dtype":"BOOL","shape":[3],"data_offsets":[20,23]}}';
    const padded = json + ' '.repeat((8 - (json.length % 8)) % 8);
    const data = bytes(
      1, 0, 0, 0, 0, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // I64 1, -2
      0, 0, 0, 0x3f, // F32 0.5
      1, 0, 1, // BOOL
    );
    expect(padded.length % 8).toBe(0);
    expect(Buffer.from(out).equals(Buffer.from(cat(u64(padded.length), ascii(padded), data)))).toBe(true);
  });

  test('empty tensors, no metadata, and refusals', () => {
    const out = encodeSafetensors([['x', float32([0, 3], [])]]);
    const json = '{"x":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0]}}';
    const padded = json + ' '.repeat((8 - (json.length % 8)) % 8);
    expect(Buffer.from(out).equals(Buffer.from(cat(u64(padded.length), ascii(padded))))).toBe(true);
    expect(() => encodeSafetensors([['x', { dtype: 'F32', shape: [2, 2], data: new Float32Array(3) }]])).toThrow('holds 4 values, the data has 3');
    expect(() => encodeSafetensors([['x', float32([1], [1])], ['x', float32([1], [1])]])).toThrow('given twice');
    expect(() => encodeSafetensors([['__metadata__', float32([1], [1])]])).toThrow('cannot be named');
  });
});

describe('.npy and .npz', () => {
  const header = (dict: string) => {
    const total = Math.ceil((10 + dict.length + 1) / 64) * 64;
    return cat(bytes(0x93), ascii('NUMPY'), bytes(1, 0, (total - 10) & 0xff, (total - 10) >> 8), ascii(dict + ' '.repeat(total - 11 - dict.length) + '\n'));
  };

  test('.npy v1.0 headers of 2-d, 1-d, 0-d and string arrays', () => {
    const a = encodeNpy(int32([2, 3], [1, 2, 3, 4, 5, -6]));
    const ints = bytes(1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5, 0, 0, 0, 0xfa, 0xff, 0xff, 0xff);
    expect(Buffer.from(a).equals(Buffer.from(cat(header("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }"), ints)))).toBe(true);
    expect(a.length).toBe(128 + 24);
    const b = encodeNpy(uint8([3], [1, 0, 1], 'BOOL'));
    expect(Buffer.from(b).equals(Buffer.from(cat(header("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }"), bytes(1, 0, 1))))).toBe(true);
    const c = encodeNpy(int64([], [7]));
    expect(Buffer.from(c).equals(Buffer.from(cat(header("{'descr': '<i8', 'fortran_order': False, 'shape': (), }"), bytes(7, 0, 0, 0, 0, 0, 0, 0))))).toBe(true);
    // UTF-32LE code points, fixed width = the longest string (an astral character is one point).
    const s = encodeNpy(strings(['ab', '\u{1F600}']));
    const utf32 = bytes(0x61, 0, 0, 0, 0x62, 0, 0, 0, 0x00, 0xf6, 0x01, 0, 0, 0, 0, 0);
    expect(Buffer.from(s).equals(Buffer.from(cat(header("{'descr': '<U2', 'fortran_order': False, 'shape': (2,), }"), utf32)))).toBe(true);
  });

  test('CRC-32 matches node:zlib and the standard check value', () => {
    expect(crc32(ascii('123456789'))).toBe(0xcbf43926);
    const data = Uint8Array.from({ length: 1000 }, (_, i) => (i * 37) & 0xff);
    expect(crc32(data)).toBe(zlibCrc32(data));
  });

  test('zip: stored local entries, central directory and end record at the offsets computed by hand', () => {
    const d1 = ascii('hello');
    const d2 = bytes(0, 1, 2);
    const z = Buffer.from(encodeZip([['a.npy', d1], ['bb.npy', d2]]));
    const local2 = 30 + 5 + 5;
    const cd = local2 + 30 + 6 + 3;
    expect(z.length).toBe(cd + (46 + 5) + (46 + 6) + 22);
    // Local headers: signature, method 0 (stored), CRC, sizes, name, data.
    expect(z.readUInt32LE(0)).toBe(0x04034b50);
    expect(z.readUInt16LE(8)).toBe(0);
    expect(z.readUInt32LE(14)).toBe(zlibCrc32(d1));
    expect([z.readUInt32LE(18), z.readUInt32LE(22), z.readUInt16LE(26)]).toEqual([5, 5, 5]);
    expect(z.subarray(30, 35).toString('latin1')).toBe('a.npy');
    expect(z.subarray(35, 40).toString('latin1')).toBe('hello');
    expect(z.readUInt32LE(local2)).toBe(0x04034b50);
    expect(z.readUInt32LE(local2 + 14)).toBe(zlibCrc32(d2));
    // Central directory entries point at the local headers.
    expect(z.readUInt32LE(cd)).toBe(0x02014b50);
    expect(z.readUInt32LE(cd + 42)).toBe(0);
    expect(z.readUInt32LE(cd + 46 + 5)).toBe(0x02014b50);
    expect(z.readUInt32LE(cd + 46 + 5 + 42)).toBe(local2);
    // End of central directory: 2 entries, its size and offset.
    const end = z.length - 22;
    expect(z.readUInt32LE(end)).toBe(0x06054b50);
    expect([z.readUInt16LE(end + 8), z.readUInt16LE(end + 10), z.readUInt32LE(end + 12), z.readUInt32LE(end + 16)]).toEqual([2, 2, 46 + 5 + 46 + 6, cd]);
  });

  test('npz names entries NAME.npy and refuses names NumPy could not index', () => {
    const z = Buffer.from(encodeNpz([['x', float32([1], [1])]]));
    expect(z.subarray(30, 35).toString('latin1')).toBe('x.npy');
    expect(() => encodeNpz([['a/b', float32([1], [1])]])).toThrow('not a unique identifier-like name');
    expect(() => encodeNpz([['a', float32([1], [1])], ['a', float32([1], [1])]])).toThrow('not a unique');
  });
});

test('a binary file is written atomically through short writes', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mempo-export-bin-'));
  const file = join(dir, 'x.safetensors');
  const data = encodeSafetensors([['a', float32([300], Array.from({ length: 300 }, (_, i) => i / 7))]]);
  const oneByte: WriteFn = (fd, buf, off, len) => writeSync(fd, buf, off, Math.min(len, 1));
  writeFileAtomic(file, data, { write: oneByte });
  expect(Buffer.from(readFileSync(file)).equals(Buffer.from(data))).toBe(true);
});
