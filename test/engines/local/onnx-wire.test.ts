/**
 * The protobuf wire reader (src/engines/local/onnx-wire.ts) refuses malformed bytes at once,
 * naming what and where: field number 0 (a zero-filled model.onnx used to become one field per
 * two bytes: 5 s and 1.3 GB for 20 MB), groups and undefined wire types, varints over 10 bytes,
 * lengths past the end. A valid but pathological message is bounded by a field budget.
 */
import { FieldBudgetError, fields, Msg, WireError } from '../../../src/engines/local/onnx-wire';
import { MAX_REWRITE_FIELDS, rewriteSelectLogits } from '../../../src/engines/local/onnx-select';

const wireError = (buf: Uint8Array): WireError => {
  try {
    fields(buf);
  } catch (err) {
    if (err instanceof WireError) return err;
    throw err;
  }
  throw new Error('fields() accepted the bytes');
};

describe('fields', () => {
  it('reads the fields Msg writes, each kind of wire type', () => {
    const buf = new Msg().int(1, 300).str(2, 'abc').float(3, 1.5).msg(4, new Msg().int(1, 7)).finish();
    const fs = fields(buf);
    expect(fs.map((f) => [f.no, f.wire])).toEqual([[1, 0], [2, 2], [3, 5], [4, 2]]);
    expect(fs[0]!.int).toBe(300n);
    expect(Buffer.from(fs[1]!.body).toString()).toBe('abc');
    expect(fields(fs[3]!.body)[0]!.int).toBe(7n);
  });

  it.each([
    ['zero bytes', new Uint8Array(16), 'field number 0 (not a protobuf message) at byte 0'],
    ['a group start (wire type 3)', Uint8Array.of(0x08, 0x01, 0x0b), 'field 1: wire type 3 (a group; onnx.proto has none) at byte 2'],
    ['a group end (wire type 4)', Uint8Array.of(0x0c), 'field 1: wire type 4 (a group; onnx.proto has none) at byte 0'],
    ['wire type 6', Uint8Array.of(0x0e), 'field 1: wire type 6 (not a protobuf wire type) at byte 0'],
    ['wire type 7', Uint8Array.of(0x0f), 'field 1: wire type 7 (not a protobuf wire type) at byte 0'],
    ['a length past the end', Uint8Array.of(0x0a, 0x05, 0x61), 'field 1: length 5 runs past the end of its message (1 bytes left) at byte 0'],
    ['a huge length', Uint8Array.of(0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f), 'field 1: length 4294967295 runs past the end of its message (0 bytes left) at byte 0'],
    ['an 11-byte varint', Uint8Array.of(0x08, ...new Array<number>(10).fill(0x80), 0x01), 'field 1: a varint longer than 10 bytes at byte 1'],
    ['a truncated varint', Uint8Array.of(0x08, 0x80), 'field 1: truncated varint at byte 1'],
    ['a fixed64 past the end', Uint8Array.of(0x09, 1, 2, 3), 'field 1 runs past the end of its message at byte 0'],
    ['field number 2^29', Uint8Array.of(0x80, 0x80, 0x80, 0x80, 0x10), 'field number 536870912 (protobuf allows at most 536870911) at byte 0'],
  ])('refuses %s, naming the byte', (_name, buf, message) => {
    expect(wireError(buf).message).toBe(message);
  });

  it('names the byte of the file, not of the nested message, through byteIn', () => {
    const inner = Uint8Array.of(0x08, 0x01, 0x00, 0x00);
    const file = Buffer.concat([Buffer.from([0x08, 0x05]), new Msg().bytes(7, inner).finish()]);
    const graph = fields(file).find((f) => f.no === 7)!;
    const err = wireError(graph.body);
    expect(err.byteIn(file)).toBe('field number 0 (not a protobuf message) at byte 6');
    // A view into a larger buffer (Node's pooled Buffers are): offsets still count from the view.
    const pool = new Uint8Array(100);
    pool.set(file, 40);
    const view = pool.subarray(40, 40 + file.length);
    expect(wireError(fields(view).find((f) => f.no === 7)!.body).byteIn(view)).toBe('field number 0 (not a protobuf message) at byte 6');
  });

  it('stops at its budget', () => {
    const buf = new Uint8Array(20).fill(0x08).map((b, i) => (i % 2 === 0 ? b : 0));
    expect(fields(buf, { left: 10 })).toHaveLength(10);
    expect(() => fields(buf, { left: 9 })).toThrow(FieldBudgetError);
  });
});

describe('rewriteSelectLogits on hostile bytes', () => {
  it('a zero-filled 20 MB file is malformed at byte 0, found without reading on', () => {
    const r = rewriteSelectLogits(new Uint8Array(20e6));
    expect(r.malformed).toBe('field number 0 (not a protobuf message) at byte 0');
  });

  it('valid protobuf with more fields than the budget falls back to full logits (ONNX Runtime judges the file), not malformed', () => {
    const n = MAX_REWRITE_FIELDS + 1;
    const buf = new Uint8Array(2 * n);
    for (let i = 0; i < buf.length; i += 2) buf[i] = 0x08; // ir_version = 0, n times
    const r = rewriteSelectLogits(buf);
    expect(r).toEqual({ reason: `the model has more than ${MAX_REWRITE_FIELDS} protobuf fields, more than the rewrite reads` });
  });
});
