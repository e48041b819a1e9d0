/**
 * A minimal ONNX writer: the few protobuf messages of onnx.proto a small inference graph needs
 * (ModelProto, GraphProto, NodeProto, AttributeProto, TensorProto, ValueInfoProto), encoded by
 * hand so that building a model needs neither torch nor the onnx / protobuf packages.
 * Field numbers are onnx.proto's (IR version 8).
 */

// the protobuf writer of the runtime's graph rewrite
import { Msg as Writer } from '../../src/engines/local/onnx-wire';

/** TensorProto.DataType values used here. */
export const DType = { FLOAT: 1, INT64: 7, BOOL: 9 } as const;
export type DTypeCode = (typeof DType)[keyof typeof DType];

export interface Tensor {
  name: string;
  dtype: DTypeCode;
  dims: readonly number[];
  data: Float32Array | BigInt64Array | Uint8Array;
}

export type AttrValue = number | number[] | { int: number } | { ints: number[] } | { str: string } | Tensor;

export interface Node {
  op: string;
  inputs: readonly string[];
  outputs: readonly string[];
  attrs?: Record<string, AttrValue>;
}

/** A graph input or output: element type and shape (a string is a symbolic dimension). */
export interface ValueInfo {
  name: string;
  dtype: DTypeCode;
  shape: ReadonlyArray<number | string>;
}

export interface Graph {
  name: string;
  nodes: readonly Node[];
  initializers: readonly Tensor[];
  inputs: readonly ValueInfo[];
  outputs: readonly ValueInfo[];
}

function tensorProto(t: Tensor): Writer {
  const w = new Writer();
  for (const d of t.dims) w.int(1, d);
  w.int(2, t.dtype).str(8, t.name);
  const raw = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength); // little-endian, as ONNX stores raw_data
  return w.bytes(9, raw);
}

// AttributeProto.AttributeType: FLOAT 1, INT 2, STRING 3, TENSOR 4, INTS 7.
function attributeProto(name: string, v: AttrValue): Writer {
  const w = new Writer().str(1, name);
  if (typeof v === 'number') return w.float(2, v).int(20, 1);
  if (!Array.isArray(v) && 'str' in v) return w.str(4, v.str).int(20, 3);
  if (Array.isArray(v) || 'ints' in v) {
    for (const x of Array.isArray(v) ? v : v.ints) w.int(8, x);
    return w.int(20, 7);
  }
  if ('int' in v) return w.int(3, v.int).int(20, 2);
  return w.msg(5, tensorProto(v)).int(20, 4);
}

function nodeProto(n: Node, index: number): Writer {
  const w = new Writer();
  for (const i of n.inputs) w.str(1, i);
  for (const o of n.outputs) w.str(2, o);
  w.str(3, `${n.op}_${index}`).str(4, n.op);
  for (const [k, v] of Object.entries(n.attrs ?? {})) w.msg(5, attributeProto(k, v));
  return w;
}

function valueInfoProto(v: ValueInfo): Writer {
  const shape = new Writer();
  for (const d of v.shape) shape.msg(1, typeof d === 'number' ? new Writer().int(1, d) : new Writer().str(2, d));
  const tensorType = new Writer().int(1, v.dtype).msg(2, shape);
  return new Writer().str(1, v.name).msg(2, new Writer().msg(1, tensorType));
}

/** Serialises `graph` as an ONNX model (IR 8, default domain at `opset`). */
export function encodeModel(graph: Graph, opset = 17, producer = 'mempo tools/real-vocab'): Buffer {
  const g = new Writer();
  graph.nodes.forEach((n, i) => g.msg(1, nodeProto(n, i)));
  g.str(2, graph.name);
  for (const t of graph.initializers) g.msg(5, tensorProto(t));
  for (const v of graph.inputs) g.msg(11, valueInfoProto(v));
  for (const v of graph.outputs) g.msg(12, valueInfoProto(v));
  const m = new Writer().int(1, 8).str(2, producer).msg(7, g);
  m.msg(8, new Writer().str(1, '').int(2, opset));
  return m.finish();
}
