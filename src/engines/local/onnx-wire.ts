/**
 * The protobuf wire format, just enough of it for onnx-select.ts to read and rewrite an ONNX
 * ModelProto in memory: a message is split into its fields (each keeps its raw bytes, so
 * anything not rewritten is copied unchanged), and new messages are encoded by `Msg`.
 * Field numbers are onnx.proto's; tools/real-vocab/onnx.ts is the writer this mirrors.
 */

/** One field of a message: its number, wire type and where its bytes lie in the buffer. */
export interface Field {
  no: number;
  wire: number;
  /** The whole field, tag included (copied verbatim when kept). */
  start: number;
  end: number;
  /** Varint value (wire 0), else 0n. */
  int: bigint;
  /** Payload of a length-delimited field (wire 2). */
  body: Uint8Array;
}

/**
 * Thrown on bytes that are not a valid message. `at` is the offset of the bad field in the
 * underlying ArrayBuffer, so that a caller holding the whole file can name the file's byte
 * (`byteIn`): nested messages are subarrays of it.
 */
export class WireError extends Error {
  constructor(readonly what: string, readonly at: number) {
    super(`${what} at byte ${at}`);
  }

  /** The message with the offset counted from the start of `root` (the file's bytes). */
  byteIn(root: Uint8Array): string {
    return `${this.what} at byte ${this.at - root.byteOffset}`;
  }
}

/** A varint as a Number: exact up to 2^53, enough for tags and lengths (anything longer is invalid anyway). */
function readSize(buf: Uint8Array, at: number, what: () => string): [number, number] {
  const first = buf[at];
  if (first !== undefined && first < 0x80) return [first, at + 1];
  let v = 0;
  let scale = 1;
  for (let i = at; i < buf.length; i++) {
    if (i === at + 10) throw new WireError(`${what()}: a varint longer than 10 bytes`, buf.byteOffset + at);
    const b = buf[i]!;
    v += (b & 0x7f) * scale;
    if (b < 0x80) return [v, i + 1];
    scale *= 128;
  }
  throw new WireError(`${what()}: truncated varint`, buf.byteOffset + at);
}

/** BigInt(0..127): most varints in a model are one byte, and BigInt() per field dominated the parse. */
const SMALL = Array.from({ length: 128 }, (_, i) => BigInt(i));

function readVarint(buf: Uint8Array, at: number, what: () => string): [bigint, number] {
  const first = buf[at];
  if (first !== undefined && first < 0x80) return [SMALL[first]!, at + 1];
  let v = 0n;
  let shift = 0n;
  for (let i = at; i < buf.length; i++) {
    if (i === at + 10) throw new WireError(`${what()}: a varint longer than 10 bytes`, buf.byteOffset + at);
    const b = buf[i]!;
    v |= BigInt(b & 0x7f) << shift;
    if (b < 0x80) return [BigInt.asUintN(64, v), i + 1];
    shift += 7n;
  }
  throw new WireError(`${what()}: truncated varint`, buf.byteOffset + at);
}

const TAG = () => 'field tag';

/**
 * How many more fields a parse may read. Valid protobuf can still be pathological (20 MB of
 * `08 00` is ten million ir_version fields: seconds of parsing and a gigabyte of Field objects
 * here, while ONNX Runtime's C++ parser rejects the model at once); a budget bounds that.
 */
export interface FieldBudget {
  left: number;
}

/** Thrown when a parse runs out of its FieldBudget: the bytes may be valid, there are just too many fields. */
export class FieldBudgetError extends Error {}

/** Largest field number protobuf allows (2^29 - 1). */
const MAX_FIELD = 2 ** 29 - 1;

/**
 * The fields of the message `buf`, in order. Anything protobuf's own parser refuses is a
 * WireError at once, naming the byte: field number 0 (so a zero-filled file stops at byte 0
 * instead of becoming one field per two bytes), field numbers past 2^29 - 1, wire types 3 and
 * 4 (groups: onnx.proto has none) and 6 and 7 (undefined), varints over 10 bytes, and lengths
 * past the end of the message. With `budget`, each field read takes one from it.
 */
export function fields(buf: Uint8Array, budget?: FieldBudget): Field[] {
  const out: Field[] = [];
  const empty = buf.subarray(0, 0);
  let at = 0;
  let no = 0;
  // Names the field in a varint error; built only then (a string per field would double the parse time).
  const value = () => `field ${no}`;
  const length = () => `field ${no} length`;
  while (at < buf.length) {
    const start = at;
    if (budget !== undefined && --budget.left < 0) throw new FieldBudgetError('more protobuf fields than the parse may read');
    const [tag, p] = readSize(buf, at, TAG);
    no = Math.floor(tag / 8);
    const wire = tag % 8;
    if (no === 0) throw new WireError('field number 0 (not a protobuf message)', buf.byteOffset + start);
    if (no > MAX_FIELD) throw new WireError(`field number ${no} (protobuf allows at most ${MAX_FIELD})`, buf.byteOffset + start);
    let int = 0n;
    let body = empty;
    if (wire === 0) [int, at] = readVarint(buf, p, value);
    else if (wire === 1) at = p + 8;
    else if (wire === 5) at = p + 4;
    else if (wire === 2) {
      const [len, q] = readSize(buf, p, length);
      if (len > buf.length - q) throw new WireError(`field ${no}: length ${len} runs past the end of its message (${buf.length - q} bytes left)`, buf.byteOffset + start);
      at = q + len;
      body = buf.subarray(q, at);
    } else throw new WireError(`field ${no}: wire type ${wire} (${wire === 3 || wire === 4 ? 'a group; onnx.proto has none' : 'not a protobuf wire type'})`, buf.byteOffset + start);
    if (at > buf.length) throw new WireError(`field ${no} runs past the end of its message`, buf.byteOffset + start);
    out.push({ no, wire, start, end: at, int, body });
  }
  return out;
}

const utf8 = new TextDecoder();
export const str = (f: Field): string => utf8.decode(f.body);

/** The strings of repeated string field `no`. */
export function strings(fs: readonly Field[], no: number): string[] {
  return fs.filter((f) => f.no === no && f.wire === 2).map(str);
}

/** The first string of field `no`, or ''. */
export function firstString(fs: readonly Field[], no: number): string {
  const f = fs.find((x) => x.no === no && x.wire === 2);
  return f === undefined ? '' : str(f);
}

/** The last varint of field `no` (protobuf: the last one wins), or undefined. */
export function lastInt(fs: readonly Field[], no: number): bigint | undefined {
  let v: bigint | undefined;
  for (const f of fs) if (f.no === no && f.wire === 0) v = f.int;
  return v;
}

/** A message being encoded: fields appended in order. */
export class Msg {
  private readonly chunks: Uint8Array[] = [];

  private varint(v: bigint): void {
    let x = BigInt.asUintN(64, v);
    const bytes: number[] = [];
    while (x >= 0x80n) {
      bytes.push(Number(x & 0x7fn) | 0x80);
      x >>= 7n;
    }
    bytes.push(Number(x));
    this.chunks.push(Uint8Array.from(bytes));
  }

  int(no: number, v: number | bigint): this {
    this.varint(BigInt((no << 3) | 0));
    this.varint(BigInt(v));
    return this;
  }

  /** A fixed32 float field (wire type 5). */
  float(no: number, v: number): this {
    this.varint(BigInt((no << 3) | 5));
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, v, true);
    this.chunks.push(b);
    return this;
  }

  bytes(no: number, b: Uint8Array): this {
    this.varint(BigInt((no << 3) | 2));
    this.varint(BigInt(b.length));
    this.chunks.push(b);
    return this;
  }

  str(no: number, s: string): this {
    return this.bytes(no, new TextEncoder().encode(s));
  }

  msg(no: number, m: Msg): this {
    return this.bytes(no, m.finish());
  }

  /** Appends an existing field's bytes unchanged. */
  raw(buf: Uint8Array, f: Field): this {
    this.chunks.push(buf.subarray(f.start, f.end));
    return this;
  }

  finish(): Buffer {
    return Buffer.concat(this.chunks);
  }
}
