/**
 * The decoder graph of the real-vocabulary test model, in optimum's `text-generation-with-past`
 * layout (what src/engines/local/model-dir.ts checks): inputs `input_ids`, `attention_mask`,
 * `position_ids`, `past_key_values.{i}.key|value` [B, H, P, D]; outputs `logits` [B, T, V] and
 * `present.{i}.key|value` [B, H, P + T, D].
 *
 * Per layer a pre-norm causal self-attention block with a residual; token embedding plus
 * sinusoidal positions (from `position_ids`) in, the tied embedding out. Attention is causal in
 * sequence order (query t of a pass sees keys 0..P+t) and masked by `attention_mask`, so a
 * padded row equals the row alone and the KV-cache path equals the no-cache path.
 */
import { mulberry32 } from '../../src/rng';
import { DType, type Graph, type Node, type Tensor } from './onnx';

export interface DecoderShape {
  vocabSize: number;
  hidden: number;
  heads: number;
  layers: number;
  seed: number;
}

function normal(rand: () => number, n: number, std: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i += 2) {
    const u = Math.max(rand(), 1e-12);
    const r = Math.sqrt(-2 * Math.log(u)) * std;
    const a = 2 * Math.PI * rand();
    out[i] = r * Math.cos(a);
    if (i + 1 < n) out[i + 1] = r * Math.sin(a);
  }
  return out;
}

const f32 = (name: string, dims: number[], data: Float32Array): Tensor => ({ name, dtype: DType.FLOAT, dims, data });
const i64 = (name: string, values: number[], dims: number[] = [values.length]): Tensor =>
  ({ name, dtype: DType.INT64, dims, data: BigInt64Array.from(values.map(BigInt)) });

/** Builds the graph with seeded N(0, σ²) weights (σ = 1/√hidden for the projections). */
export function decoderGraph(s: DecoderShape): Graph {
  const { vocabSize: V, hidden: d, heads: H, layers: L } = s;
  if (d % H !== 0 || (d / H) % 2 !== 0) throw new Error(`hidden ${d} must split into ${H} heads of an even size`);
  const hd = d / H;
  const rand = mulberry32(s.seed >>> 0 || 1);
  const nodes: Node[] = [];
  const op = (opType: string, inputs: string[], output: string, attrs?: Node['attrs']): string => {
    nodes.push({ op: opType, inputs, outputs: [output], attrs });
    return output;
  };
  const freq = Float32Array.from({ length: d / 2 }, (_, i) => Math.pow(10000, (-2 * i) / d));
  const inits: Tensor[] = [
    // Embedding std 0.5: the logits' spread over 151,936 rows stays a few nats, so sampling is not one token forever.
    f32('embed', [V, d], normal(rand, V * d, 0.5)),
    f32('inv_freq', [d / 2], freq),
    f32('scale', [], Float32Array.of(1 / Math.sqrt(hd))),
    f32('neg_inf', [], Float32Array.of(-1e9)),
    f32('eps', [], Float32Array.of(1e-6)),
    i64('axes_last', [-1]),
    i64('axes_1', [1]),
    i64('axes_12', [1, 2]),
    i64('zero', [0], []),
    i64('one', [1], []),
    i64('split_heads', [0, 0, H, hd]),
    i64('merge_heads', [0, 0, d]),
  ];

  // x = embed[input_ids] + [sin, cos](position_ids · inv_freq)   [B, T, d]
  const tok = op('Gather', ['embed', 'input_ids'], 'tok_emb');
  const ang = op('Mul', [op('Unsqueeze', [op('Cast', ['position_ids'], 'pos_f', { to: { int: DType.FLOAT } }), 'axes_last'], 'pos_u'), 'inv_freq'], 'pos_ang');
  const pe = op('Concat', [op('Sin', [ang], 'pos_sin'), op('Cos', [ang], 'pos_cos')], 'pos_emb', { axis: { int: -1 } });
  let x = op('Add', [tok, pe], 'h_in');

  // allowed[b, 0, t, j] = (j <= P + t) and attention_mask[b, j]   [B, 1, T, S]
  const S = op('Gather', [op('Shape', ['attention_mask'], 'mask_shape'), 'one'], 'S', { axis: { int: 0 } });
  const T = op('Gather', [op('Shape', ['input_ids'], 'ids_shape'), 'one'], 'T', { axis: { int: 0 } });
  const qpos = op('Unsqueeze', [op('Range', [op('Sub', [S, T], 'P'), S, 'one'], 'q_range'), 'axes_1'], 'q_pos');
  const causal = op('LessOrEqual', [op('Range', ['zero', S, 'one'], 'k_pos'), qpos], 'causal');
  const keyOk = op('Unsqueeze', [op('Cast', ['attention_mask'], 'mask_b', { to: { int: DType.BOOL } }), 'axes_12'], 'key_ok');
  const allowed = op('And', [causal, keyOk], 'allowed');

  for (let l = 0; l < L; l++) {
    const p = `l${l}`;
    const w = (name: string, rows: number, cols: number) => {
      inits.push(f32(`${p}.${name}`, [rows, cols], normal(rand, rows * cols, 1 / Math.sqrt(rows))));
      return `${p}.${name}`;
    };
    // RMS norm (no gain), then heads [B, H, T, hd].
    const ms = op('ReduceMean', [op('Mul', [x, x], `${p}.sq`)], `${p}.ms`, { axes: [-1], keepdims: { int: 1 } });
    const xn = op('Div', [x, op('Sqrt', [op('Add', [ms, 'eps'], `${p}.ms_eps`)], `${p}.rms`)], `${p}.xn`);
    const heads = (name: string) => op('Transpose', [op('Reshape', [op('MatMul', [xn, w(name, d, d)], `${p}.${name}_x`), 'split_heads'], `${p}.${name}_r`)], `${p}.${name}_h`, { perm: [0, 2, 1, 3] });
    const q = heads('wq');
    const k = op('Concat', [`past_key_values.${l}.key`, heads('wk')], `present.${l}.key`, { axis: { int: 2 } });
    const v = op('Concat', [`past_key_values.${l}.value`, heads('wv')], `present.${l}.value`, { axis: { int: 2 } });
    const scores = op('Mul', [op('MatMul', [q, op('Transpose', [k], `${p}.kt`, { perm: [0, 1, 3, 2] })], `${p}.qk`), 'scale'], `${p}.scores`);
    const probs = op('Softmax', [op('Where', [allowed, scores, 'neg_inf'], `${p}.masked`)], `${p}.probs`, { axis: { int: -1 } });
    const ctx = op('Reshape', [op('Transpose', [op('MatMul', [probs, v], `${p}.ctx_h`)], `${p}.ctx_t`, { perm: [0, 2, 1, 3] }), 'merge_heads'], `${p}.ctx`);
    x = op('Add', [x, op('MatMul', [ctx, w('wo', d, d)], `${p}.out`)], `${p}.h`);
  }
  op('MatMul', [x, op('Transpose', ['embed'], 'embed_t', { perm: [1, 0] })], 'logits');

  const kv = (name: string, len: string) => ({ name, dtype: DType.FLOAT, shape: ['batch_size', H, len, hd] });
  const layerNames = Array.from({ length: L }, (_, l) => l);
  return {
    name: 'real_vocab_decoder',
    nodes,
    initializers: inits,
    inputs: [
      { name: 'input_ids', dtype: DType.INT64, shape: ['batch_size', 'sequence_length'] },
      { name: 'attention_mask', dtype: DType.INT64, shape: ['batch_size', 'total_sequence_length'] },
      { name: 'position_ids', dtype: DType.INT64, shape: ['batch_size', 'sequence_length'] },
      ...layerNames.flatMap((l) => [kv(`past_key_values.${l}.key`, 'past_sequence_length'), kv(`past_key_values.${l}.value`, 'past_sequence_length')]),
    ],
    outputs: [
      { name: 'logits', dtype: DType.FLOAT, shape: ['batch_size', 'sequence_length', V] },
      ...layerNames.flatMap((l) => [kv(`present.${l}.key`, 'total_sequence_length'), kv(`present.${l}.value`, 'total_sequence_length')]),
    ],
  };
}
