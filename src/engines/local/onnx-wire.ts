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

/** Thrown on bytes that are not a valid message; the caller turns it into a fallback reason. */
export class WireError extends Error {}

function readVarint(buf: Uint8Array, at: number): [bigint, number] {
  let v = 0n;
  let shift = 0n;
  for (let i = at; i < buf.length && i < at + 10; i++) {
    const b = buf[i]!;
    v |= BigInt(b & 0x7f) << shift;
    if (b < 0x80) return [v, i + 1];
    shift += 7n;
  }
  throw new WireError(`truncated varint at byte ${at}`);
}

/** The fields of the message `buf`, in order. */
export function fields(buf: Uint8Array): Field[] {
  const out: Field[] = [];
  const empty = buf.subarray(0, 0);
  let at = 0;
  while (at < buf.length) {
    const start = at;
    const [tag, p] = readVarint(buf, at);
    const no = Number(tag >> 3n);
    const wire = Number(tag & 7n);
    let int = 0n;
    let body = empty;
    if (wire === 0) [int, at] = readVarint(buf, p);
    else if (wire === 1) at = p + 8;
    else if (wire === 5) at = p + 4;
    else if (wire === 2) {
      const [len, q] = readVarint(buf, p);
      at = q + Number(len);
      if (at > buf.length) throw new WireError(`field ${no} at byte ${start} runs past the end`);
      body = buf.subarray(q, at);
    } else throw new WireError(`unsupported wire type ${wire} at byte ${start}`);
    if (at > buf.length) throw new WireError(`field ${no} at byte ${start} runs past the end`);
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
