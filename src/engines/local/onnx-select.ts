/**
 * Logits only where they are read (docs/algorithm.md §4): a load-time rewrite of the decoder
 * graph, on its bytes in memory (the file is never changed), adding an int64 input
 * `logits_index` [N] of flat positions into the `batch × seqLen` grid. The hidden states that
 * enter the LM head are flattened to `[B·S, H]`, the N selected rows gathered and unsqueezed to
 * `[1, N, H]`, so the head yields `logits` `[1, N, V]` instead of `[B, S, V]`.
 *
 * Recognised: `logits` produced by a MatMul of the hidden states with a constant weight
 * (optimum's `/lm_head/MatMul`, torch's tied `onnx::MatMul_*`, the real-vocab tool's
 * Transpose of the embedding), optionally followed by position-wise ops on the way to `logits`:
 * elementwise ops whose other inputs are constants (e.g. logit soft-capping) and
 * ScatterElements on the last axis whose index/update tensors are `[B, S, k]` (the real-vocab
 * script bonus; they get the same gather). Anything else is left alone and reported as a
 * reason: the model then keeps the full-logits path.
 */
import { FieldBudgetError, fields as parseFields, firstString, lastInt, Msg, strings, WireError, type Field, type FieldBudget } from './onnx-wire';

/**
 * Most protobuf fields one rewrite reads (models/mempo-tiny: about 4,000; a decoder with 100
 * times its nodes stays far below). Past it the model keeps full logits, and ONNX Runtime's own
 * parser judges the file: a pathological file then costs at most ~0.1 s here, not seconds.
 */
export const MAX_REWRITE_FIELDS = 1 << 20;

/** The budget of the rewrite in progress (the rewrite is synchronous: one at a time). */
let budget: FieldBudget | undefined;
const fields = (buf: Uint8Array): Field[] => parseFields(buf, budget);

/** The input the rewrite adds. */
export const LOGITS_INDEX = 'logits_index';
const PREFIX = 'mempo_select/';

/**
 * `external`: the external data files (locations relative to the model's directory) the graph
 * reads. `malformed`: the bytes are not a protobuf message at all (what and at which byte of the
 * file), so ONNX Runtime would refuse them too.
 */
export type SelectRewrite = { bytes: Uint8Array; external: string[]; reason?: undefined; malformed?: undefined } | { bytes?: undefined; reason: string; malformed?: string };

interface NodeInfo {
  field: Field;
  f: Field[];
  op: string;
  name: string;
  ins: string[];
  outs: string[];
  domain: string;
}

/** The graph's tensors: who produces and consumes each, and which are constants. */
interface GraphInfo {
  nodes: NodeInfo[];
  producer: Map<string, number>;
  consumers: Map<string, number[]>;
  inits: Map<string, number[]>;
  inputs: Set<string>;
  outputs: Field[];
  external: Set<string>;
  constMemo: Map<string, boolean>;
}

const ELEMENTWISE = new Set(['Add', 'Sub', 'Mul', 'Div', 'Max', 'Min', 'Pow']);
const UNARY = new Set(['Tanh', 'Cast', 'Identity', 'Relu', 'Sigmoid', 'Neg', 'Softplus']);
const CONSTANT_SOURCES = new Set(['Constant']);

function graphInfo(g: Field[]): GraphInfo {
  const nodes: NodeInfo[] = g.filter((x) => x.no === 1 && x.wire === 2).map((field) => {
    const f = fields(field.body);
    return { field, f, op: firstString(f, 4), name: firstString(f, 3), ins: strings(f, 1), outs: strings(f, 2), domain: firstString(f, 7) };
  });
  const producer = new Map<string, number>();
  const consumers = new Map<string, number[]>();
  nodes.forEach((n, i) => {
    for (const o of n.outs) producer.set(o, i);
    for (const t of n.ins) consumers.set(t, [...(consumers.get(t) ?? []), i]);
  });
  const inits = new Map<string, number[]>();
  const external = new Set<string>();
  for (const x of g) {
    if (x.wire !== 2 || (x.no !== 5 && x.no !== 15)) continue;
    const t = fields(x.body);
    // A sparse initializer's name is in its `values` tensor (field 1).
    const tensor = x.no === 15 ? fields(t.find((y) => y.no === 1)?.body ?? new Uint8Array(0)) : t;
    inits.set(firstString(tensor, 8), tensor.filter((y) => y.no === 1 && y.wire === 0).map((y) => Number(y.int)));
    if (lastInt(tensor, 14) !== 1n) continue;
    // external_data: StringStringEntryProto { key, value }; `location` names the file.
    for (const e of tensor.filter((y) => y.no === 13 && y.wire === 2).map((y) => fields(y.body))) {
      if (firstString(e, 1) === 'location') external.add(firstString(e, 2));
    }
  }
  const inputs = new Set(g.filter((x) => x.no === 11 && x.wire === 2).map((x) => firstString(fields(x.body), 1)));
  const outputs = g.filter((x) => x.no === 12 && x.wire === 2);
  return { nodes, producer, consumers, inits, inputs, outputs, external, constMemo: new Map() };
}

/** A tensor that depends on no graph input: an initializer, or computed from constants only. */
function isConst(gi: GraphInfo, t: string): boolean {
  if (t === '' || gi.inits.has(t)) return true;
  const memo = gi.constMemo.get(t);
  if (memo !== undefined) return memo;
  const p = gi.producer.get(t);
  gi.constMemo.set(t, false); // a cycle is not a constant
  const n = p === undefined ? undefined : gi.nodes[p]!;
  const c = n !== undefined && (CONSTANT_SOURCES.has(n.op) || (n.ins.length > 0 && !n.f.some((x) => x.no === 5 && hasGraphAttr(x)) && n.ins.every((i) => isConst(gi, i))));
  gi.constMemo.set(t, c);
  return c;
}

/** An attribute holding a subgraph (If/Loop/Scan bodies may read outer tensors). */
function hasGraphAttr(attr: Field): boolean {
  return fields(attr.body).some((x) => x.no === 6 || x.no === 11);
}

/** Rank of a constant weight when it is an initializer or a Transpose of one, else undefined. */
function constRank(gi: GraphInfo, t: string): number | undefined {
  const dims = gi.inits.get(t);
  if (dims !== undefined) return dims.length;
  const p = gi.producer.get(t);
  const n = p === undefined ? undefined : gi.nodes[p]!;
  return n?.op === 'Transpose' ? constRank(gi, n.ins[0]!) : undefined;
}

/** What the rewrite changes: the LM head's hidden input and the per-position side inputs, each at its consumer. */
interface Plan {
  /** [node index, input slot] of every tensor to gather. */
  gathers: [number, number][];
  /** Chain tensors whose shape changes (their value_info is dropped). */
  changed: Set<string>;
}

/** Walks from `logits` back to the LM head; a string is the reason the graph is not handled. */
function planChain(gi: GraphInfo): Plan | string {
  const gathers: [number, number][] = [];
  const changed = new Set<string>();
  let t = 'logits';
  for (let depth = 0; depth < 16; depth++) {
    const p = gi.producer.get(t);
    if (p === undefined) return `logits is not computed by a node`;
    const n = gi.nodes[p]!;
    const what = `logits come from a ${n.op} node (${n.name || n.outs[0]})`;
    if (n.domain !== '' && n.domain !== 'ai.onnx') return `${what} of domain ${n.domain}`;
    if (n.outs.length !== 1) return `${what} with ${n.outs.length} outputs`;
    changed.add(t);
    if (t !== 'logits' && (gi.consumers.get(t)?.length !== 1 || gi.outputs.some((o) => firstString(fields(o.body), 1) === t))) {
      return `${n.outs[0]} on the way to logits is also read elsewhere`;
    }
    const live = n.ins.map((i, k) => [i, k] as const).filter(([i]) => !isConst(gi, i));
    if (n.op === 'MatMul') {
      const [a, w] = n.ins;
      if (n.ins.length !== 2 || isConst(gi, a!) || !isConst(gi, w!)) return `${what} that is not hidden states × a constant weight`;
      if (constRank(gi, w!) !== 2) return `${what} whose weight is not a 2-D initializer (or its Transpose)`;
      gathers.push([p, 0]);
      return { gathers, changed };
    }
    if (n.op === 'ScatterElements') {
      const axis = n.f.filter((x) => x.no === 5 && firstString(fields(x.body), 1) === 'axis').map((x) => lastInt(fields(x.body), 3))[0] ?? 0n;
      if (axis !== 2n && axis !== -1n) return `${what} on axis ${axis}, not the vocabulary axis`;
      if (isConst(gi, n.ins[0]!)) return `${what} whose data is a constant`;
      for (const [, k] of live) if (k > 0) gathers.push([p, k]);
      t = n.ins[0]!;
    } else if (ELEMENTWISE.has(n.op) || UNARY.has(n.op)) {
      if (live.length !== 1) return `${what} with ${live.length} inputs that are not constants`;
      t = live[0]![0];
    } else return `${what}, which the rewrite does not handle`;
  }
  return 'more than 16 nodes between the LM head and logits';
}

function attrInt(name: string, v: number): Msg {
  return new Msg().str(1, name).int(3, v).int(20, 2);
}

function nodeMsg(op: string, ins: string[], out: string, attrs: Msg[] = []): Msg {
  const m = new Msg();
  for (const i of ins) m.str(1, i);
  m.str(2, out).str(3, `${out}_node`).str(4, op);
  for (const a of attrs) m.msg(5, a);
  return m;
}

/** A tensor ValueInfoProto; a Uint8Array dim is an existing Dimension message; no dims: no shape. */
function valueInfo(name: string, elemType: number, dims: (number | string | Uint8Array)[] | undefined): Msg {
  const tensorType = new Msg().int(1, elemType);
  if (dims !== undefined) {
    const shape = new Msg();
    for (const d of dims) shape.bytes(1, typeof d === 'number' ? new Msg().int(1, d).finish() : typeof d === 'string' ? new Msg().str(2, d).finish() : d);
    tensorType.msg(2, shape);
  }
  return new Msg().str(1, name).msg(2, new Msg().msg(1, tensorType));
}

/** The rank-3 `logits` output's element type and vocabulary dimension (raw), or a reason. */
function logitsOutput(gi: GraphInfo): { field: Field; vocab: Field | undefined } | string {
  const field = gi.outputs.find((o) => firstString(fields(o.body), 1) === 'logits');
  if (field === undefined) return 'the graph has no logits output';
  const tensorType = fields(fields(fields(field.body).find((x) => x.no === 2)?.body ?? new Uint8Array(0)).find((x) => x.no === 1)?.body ?? new Uint8Array(0));
  if (lastInt(tensorType, 1) !== 1n) return 'logits is not a float32 tensor';
  const shape = tensorType.find((x) => x.no === 2);
  const dims = shape === undefined ? [] : fields(shape.body).filter((x) => x.no === 1);
  if (shape !== undefined && dims.length !== 3) return `logits has rank ${dims.length}, not 3`;
  return { field, vocab: dims[2] };
}

/** The default-domain opset the model imports (Unsqueeze takes its axes as an input from 13 on). */
function opsetOf(model: Field[]): number {
  for (const x of model) {
    if (x.no !== 8 || x.wire !== 2) continue;
    const f = fields(x.body);
    const domain = firstString(f, 1);
    if (domain === '' || domain === 'ai.onnx') return Number(lastInt(f, 2) ?? 0n);
  }
  return 0;
}

/** The rewritten model bytes, or the reason the graph keeps its full logits. */
export function rewriteSelectLogits(model: Uint8Array): SelectRewrite {
  budget = { left: MAX_REWRITE_FIELDS };
  try {
    return rewrite(model);
  } catch (err) {
    if (err instanceof FieldBudgetError) return { reason: `the model has more than ${MAX_REWRITE_FIELDS} protobuf fields, more than the rewrite reads` };
    if (err instanceof WireError) return { reason: `the file is not a readable ONNX model (${err.byteIn(model)})`, malformed: err.byteIn(model) };
    throw err;
  } finally {
    budget = undefined;
  }
}

function rewrite(model: Uint8Array): SelectRewrite {
  const m = fields(model);
  const graphField = m.filter((x) => x.no === 7 && x.wire === 2).pop();
  if (graphField === undefined) return { reason: 'the model has no graph' };
  const opset = opsetOf(m);
  if (opset < 1) return { reason: 'the model imports no default-domain opset' };
  const g = fields(graphField.body);
  const gi = graphInfo(g);
  const out = logitsOutput(gi);
  if (typeof out === 'string') return { reason: out };
  const plan = planChain(gi);
  if (typeof plan === 'string') return { reason: plan };
  const names = new Set([...gi.inputs, ...gi.inits.keys(), ...gi.producer.keys()]);
  if (names.has(LOGITS_INDEX) || [...names].some((n) => n.startsWith(PREFIX))) return { reason: `the graph already has a tensor named ${LOGITS_INDEX} or ${PREFIX}*` };
  const axes = `${PREFIX}axes0`;
  const insert = new Map<number, Msg[]>();
  const newIns = new Map<number, string[]>();
  plan.gathers.forEach(([p, k], j) => {
    const n = gi.nodes[p]!;
    const src = n.ins[k]!;
    const base = `${PREFIX}${j}`;
    const unsq = opset >= 13
      ? nodeMsg('Unsqueeze', [`${base}/rows`, axes], `${base}/sel`)
      : nodeMsg('Unsqueeze', [`${base}/rows`], `${base}/sel`, [new Msg().str(1, 'axes').int(8, 0).int(20, 7)]);
    const list = insert.get(p) ?? [];
    list.push(nodeMsg('Flatten', [src], `${base}/flat`, [attrInt('axis', 2)]), nodeMsg('Gather', [`${base}/flat`, LOGITS_INDEX], `${base}/rows`, [attrInt('axis', 0)]), unsq);
    insert.set(p, list);
    const ins = newIns.get(p) ?? n.ins.slice();
    ins[k] = `${base}/sel`;
    newIns.set(p, ins);
  });
  const graph = new Msg();
  let nodeIndex = 0;
  for (const x of g) {
    if (x.no === 1 && x.wire === 2) {
      const i = nodeIndex++;
      for (const msg of insert.get(i) ?? []) graph.msg(1, msg);
      const ins = newIns.get(i);
      if (ins === undefined) graph.raw(graphField.body, x);
      else {
        const node = new Msg();
        for (const s of ins) node.str(1, s);
        for (const y of gi.nodes[i]!.f) if (y.no !== 1) node.raw(x.body, y);
        graph.msg(1, node);
      }
    } else if (x === out.field) {
      graph.msg(12, valueInfo('logits', 1, out.vocab === undefined ? undefined : [1, 'logits_rows', out.vocab.body]));
    } else if (x.no === 13 && x.wire === 2 && plan.changed.has(firstString(fields(x.body), 1))) continue;
    else graph.raw(graphField.body, x);
  }
  graph.msg(11, valueInfo(LOGITS_INDEX, 7, ['logits_rows']));
  if (opset >= 13) graph.msg(5, new Msg().int(1, 1).int(2, 7).str(8, axes).bytes(9, new Uint8Array(8)));
  const bytes = new Msg();
  for (const x of m) {
    if (x === graphField) bytes.msg(7, graph);
    else bytes.raw(model, x);
  }
  return { bytes: bytes.finish(), external: [...gi.external] };
}
