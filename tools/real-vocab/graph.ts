/**
 * The decoder graph of the real-vocabulary test model, in optimum's `text-generation-with-past`
 * layout (what src/engines/local/model-dir.ts checks): inputs `input_ids`, `attention_mask`,
 * `position_ids`, `past_key_values.{i}.key|value` [B, H, P, D]; outputs `logits` [B, T, V] and
 * `present.{i}.key|value` [B, H, P + T, D].
 *
 * Token embedding plus sinusoidal positions (from `position_ids`); per layer a pre-norm causal
 * self-attention block with a residual; the tied embedding out. Attention is causal in sequence
 * order (query t of a pass sees keys 0..P+t) and masked by `attention_mask`, so a padded row
 * equals the row alone and the KV-cache path equals the no-cache path.
 *
 * Optional script: a fixed bigram bonus (`ScatterElements` add on the logits, +`SCRIPT_BONUS` to
 * `next` after `prev`) that makes sampling write one scripted round nearly surely, so a rollout
 * reaches round 2 and its memory-reward snapshots (docs/algorithm.md §2) with random weights.
 */
import { mulberry32 } from '../../src/rng';
import { DType, type Graph, type Node, type Tensor } from './onnx';

export interface DecoderShape {
  vocabSize: number;
  hidden: number;
  heads: number;
  layers: number;
  seed: number;
  /** Pairs [prev, next]: after `prev` the logit of `next` gets +SCRIPT_BONUS. Distinct `prev` ids. */
  script?: ReadonlyArray<readonly [number, number]>;
}

/** Well above the random logits' log-sum-exp over 151,936 rows (about 14): p(next) ≈ 1 − 1e-7. */
export const SCRIPT_BONUS = 30;

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

/** Appends nodes; `op(type, inputs, output, attrs)` returns `output`. */
interface Builder {
  op(opType: string, inputs: string[], output: string, attrs?: Node['attrs']): string;
  inits: Tensor[];
  rand: () => number;
}

/** allowed[b, 0, t, j] = (j <= P + t) and attention_mask[b, j]: [B, 1, T, S] bool. */
function attentionMask({ op }: Builder): string {
  const S = op('Gather', [op('Shape', ['attention_mask'], 'mask_shape'), 'one'], 'S', { axis: { int: 0 } });
  const T = op('Gather', [op('Shape', ['input_ids'], 'ids_shape'), 'one'], 'T', { axis: { int: 0 } });
  const qpos = op('Unsqueeze', [op('Range', [op('Sub', [S, T], 'P'), S, 'one'], 'q_range'), 'axes_1'], 'q_pos');
  const causal = op('LessOrEqual', [op('Range', ['zero', S, 'one'], 'k_pos'), qpos], 'causal');
  const keyOk = op('Unsqueeze', [op('Cast', ['attention_mask'], 'mask_b', { to: { int: DType.BOOL } }), 'axes_12'], 'key_ok');
  return op('And', [causal, keyOk], 'allowed');
}

/** Layer `l`: x + Wo · attention(RMSNorm(x)); writes present.{l}.key|value. */
function attentionLayer(b: Builder, s: DecoderShape, l: number, x: string, allowed: string): string {
  const { op } = b;
  const d = s.hidden;
  const p = `l${l}`;
  const w = (name: string) => {
    b.inits.push(f32(`${p}.${name}`, [d, d], normal(b.rand, d * d, 1 / Math.sqrt(d))));
    return `${p}.${name}`;
  };
  const ms = op('ReduceMean', [op('Mul', [x, x], `${p}.sq`)], `${p}.ms`, { axes: [-1], keepdims: { int: 1 } });
  const xn = op('Div', [x, op('Sqrt', [op('Add', [ms, 'eps'], `${p}.ms_eps`)], `${p}.rms`)], `${p}.xn`);
  // [B, T, d] → [B, H, T, hd]
  const heads = (name: string) =>
    op('Transpose', [op('Reshape', [op('MatMul', [xn, w(name)], `${p}.${name}_x`), 'split_heads'], `${p}.${name}_r`)], `${p}.${name}_h`, { perm: [0, 2, 1, 3] });
  const q = heads('wq');
  const k = op('Concat', [`past_key_values.${l}.key`, heads('wk')], `present.${l}.key`, { axis: { int: 2 } });
  const v = op('Concat', [`past_key_values.${l}.value`, heads('wv')], `present.${l}.value`, { axis: { int: 2 } });
  const scores = op('Mul', [op('MatMul', [q, op('Transpose', [k], `${p}.kt`, { perm: [0, 1, 3, 2] })], `${p}.qk`), 'scale'], `${p}.scores`);
  const probs = op('Softmax', [op('Where', [allowed, scores, 'neg_inf'], `${p}.masked`)], `${p}.probs`, { axis: { int: -1 } });
  const ctx = op('Reshape', [op('Transpose', [op('MatMul', [probs, v], `${p}.ctx_h`)], `${p}.ctx_t`, { perm: [0, 2, 1, 3] }), 'merge_heads'], `${p}.ctx`);
  return op('Add', [x, op('MatMul', [ctx, w('wo')], `${p}.out`)], `${p}.h`);
}

/** logits[b, t, next] += SCRIPT_BONUS where input_ids[b, t] is a script `prev` (at most one matches). */
function scriptBias(b: Builder, script: ReadonlyArray<readonly [number, number]>, logits: string, out: string): string {
  const { op } = b;
  b.inits.push(
    i64('script_prev', script.map(([p]) => p)),
    f32('script_next', [script.length, 1], Float32Array.from(script.map(([, n]) => n))), // ids < 2^24: exact in float32
    f32('script_bonus', [], Float32Array.of(SCRIPT_BONUS)),
  );
  const match = op('Cast', [op('Equal', [op('Unsqueeze', ['input_ids', 'axes_last'], 'ids_u'), 'script_prev'], 'script_eq')], 'script_match', { to: { int: DType.FLOAT } });
  const index = op('Cast', [op('MatMul', [match, 'script_next'], 'script_next_f')], 'script_index', { to: { int: DType.INT64 } });
  const bonus = op('Mul', [op('ReduceSum', [match, 'axes_last'], 'script_any', { keepdims: { int: 1 } }), 'script_bonus'], 'script_add');
  return op('ScatterElements', [logits, index, bonus], out, { axis: { int: 2 }, reduction: { str: 'add' } });
}

/** Builds the graph with seeded N(0, σ²) weights (σ = 1/√hidden for the projections). */
export function decoderGraph(s: DecoderShape): Graph {
  const { vocabSize: V, hidden: d, heads: H, layers: L } = s;
  if (d % H !== 0 || (d / H) % 2 !== 0) throw new Error(`hidden ${d} must split into ${H} heads of an even size`);
  const hd = d / H;
  const nodes: Node[] = [];
  const b: Builder = {
    op: (opType, inputs, output, attrs) => {
      nodes.push({ op: opType, inputs, outputs: [output], attrs });
      return output;
    },
    inits: [],
    rand: mulberry32(s.seed >>> 0 || 1),
  };
  const { op } = b;
  b.inits.push(
    // Embedding std 0.5: the logits spread a few nats over 151,936 rows, far from one-hot.
    f32('embed', [V, d], normal(b.rand, V * d, 0.5)),
    f32('inv_freq', [d / 2], Float32Array.from({ length: d / 2 }, (_, i) => Math.pow(10000, (-2 * i) / d))),
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
  );
  const ang = op('Mul', [op('Unsqueeze', [op('Cast', ['position_ids'], 'pos_f', { to: { int: DType.FLOAT } }), 'axes_last'], 'pos_u'), 'inv_freq'], 'pos_ang');
  const pe = op('Concat', [op('Sin', [ang], 'pos_sin'), op('Cos', [ang], 'pos_cos')], 'pos_emb', { axis: { int: -1 } });
  let x = op('Add', [op('Gather', ['embed', 'input_ids'], 'tok_emb'), pe], 'h_in');
  const allowed = attentionMask(b);
  for (let l = 0; l < L; l++) x = attentionLayer(b, s, l, x, allowed);
  const head = op('Transpose', ['embed'], 'embed_t', { perm: [1, 0] });
  if (s.script !== undefined && s.script.length > 0) scriptBias(b, s.script, op('MatMul', [x, head], 'logits_lm'), 'logits');
  else op('MatMul', [x, head], 'logits');

  const kv = (name: string, len: string) => ({ name, dtype: DType.FLOAT, shape: ['batch_size', H, len, hd] });
  const layers = Array.from({ length: L }, (_, l) => l);
  return {
    name: 'real_vocab_decoder',
    nodes,
    initializers: b.inits,
    inputs: [
      { name: 'input_ids', dtype: DType.INT64, shape: ['batch_size', 'sequence_length'] },
      { name: 'attention_mask', dtype: DType.INT64, shape: ['batch_size', 'total_sequence_length'] },
      { name: 'position_ids', dtype: DType.INT64, shape: ['batch_size', 'sequence_length'] },
      ...layers.flatMap((l) => [kv(`past_key_values.${l}.key`, 'past_sequence_length'), kv(`past_key_values.${l}.value`, 'past_sequence_length')]),
    ],
    outputs: [
      { name: 'logits', dtype: DType.FLOAT, shape: ['batch_size', 'sequence_length', V] },
      ...layers.flatMap((l) => [kv(`present.${l}.key`, 'total_sequence_length'), kv(`present.${l}.value`, 'total_sequence_length')]),
    ],
  };
}
