/**
 * One forward pass of a decoder session: the feeds built from a `ForwardInput`, the outputs
 * checked against the config. With `logitsAt` on a graph with selected logits (onnx-select.ts)
 * the positions go in as `logits_index` and the session returns only those rows; on a graph
 * without, the rows are copied out of the full logits, so callers see one contract.
 */
import { MempoError } from '../../errors';
import { KVCache } from './kv-cache';
import type { ModelConfig, ModelIO } from './model-dir';
import { LOGITS_INDEX } from './onnx-select';
import { getOrt, type OrtSession, type OrtTensor } from './ort';
import type { ForwardInput, ForwardOutput } from './types';

/** `logitsAt` as int64 positions, each checked against the pass's `batch × seqLen` grid. */
function positions(at: ArrayLike<number>, batch: number, seqLen: number): BigInt64Array {
  const n = batch * seqLen;
  const out = new BigInt64Array(at.length);
  for (let i = 0; i < at.length; i++) {
    const v = at[i]!;
    if (!Number.isInteger(v) || v < 0 || v >= n) {
      throw new MempoError('ERR_INVALID_ARGUMENT', `logitsAt[${i}] is ${String(v)}, not a position of the pass's ${batch} × ${seqLen} = ${n} positions`);
    }
    out[i] = BigInt(v);
  }
  return out;
}

function allPositions(n: number): BigInt64Array {
  const out = new BigInt64Array(n);
  for (let i = 0; i < n; i++) out[i] = BigInt(i);
  return out;
}

/** Rows `at` of `[*, V]` logits, copied into one block. */
function copyRows(logits: Float32Array, at: BigInt64Array, V: number): Float32Array {
  const out = new Float32Array(at.length * V);
  for (let i = 0; i < at.length; i++) {
    const r = Number(at[i]!);
    out.set(logits.subarray(r * V, (r + 1) * V), i * V);
  }
  return out;
}

function checkPresent(modelPath: string, config: ModelConfig, io: ModelIO, out: Record<string, OrtTensor>, batch: number, total: number): KVCache {
  const keys = io.presentKeyNames.map((n) => out[n] as OrtTensor);
  const values = io.presentValueNames.map((n) => out[n] as OrtTensor);
  const d = keys[0]!.dims;
  if (d[0] !== batch || d[1] !== config.numKvHeads || d[2] !== total || d[3] !== config.headDim) {
    throw new MempoError(
      'ERR_MODEL_IO',
      `${modelPath} returned ${io.presentKeyNames[0]} of shape [${d.join(', ')}], expected ` +
        `[${batch}, ${config.numKvHeads}, ${total}, ${config.headDim}]`,
    );
  }
  return new KVCache(keys, values, batch, total, config.numKvHeads, config.headDim);
}

/** Runs `input` on `session` (whose graph `io` describes). Low level: shapes are the caller's responsibility. */
export async function runForward(session: OrtSession, modelPath: string, config: ModelConfig, io: ModelIO, input: ForwardInput): Promise<ForwardOutput> {
  const ort = getOrt();
  const { batch, seqLen, past } = input;
  const total = past.length + seqLen;
  const at = input.logitsAt === undefined ? undefined : positions(input.logitsAt, batch, seqLen);
  const feeds: Record<string, OrtTensor> = {
    input_ids: new ort.Tensor('int64', input.inputIds, [batch, seqLen]),
    attention_mask: new ort.Tensor('int64', input.attentionMask, [batch, total]),
  };
  if (io.hasPositionIds) feeds['position_ids'] = new ort.Tensor('int64', input.positionIds, [batch, seqLen]);
  if (io.hasUseCacheBranch) feeds['use_cache_branch'] = new ort.Tensor('bool', [past.length > 0], [1]);
  if (io.selectLogits) {
    const index = at ?? allPositions(batch * seqLen);
    feeds[LOGITS_INDEX] = new ort.Tensor('int64', index, [index.length]);
  }
  for (let i = 0; i < config.numLayers; i++) {
    feeds[io.pastKeyNames[i]!] = past.keys[i]!;
    feeds[io.pastValueNames[i]!] = past.values[i]!;
  }
  const fetchPresent = input.fetchPresent ?? true;
  const fetches = fetchPresent ? ['logits', ...io.presentKeyNames, ...io.presentValueNames] : ['logits'];
  const out = await session.run(feeds, fetches);
  const logitsT = out['logits'] as OrtTensor | undefined;
  if (logitsT === undefined) throw new MempoError('ERR_MODEL_IO', `${modelPath} returned no logits`);
  const V = config.vocabSize;
  const dims = logitsT.dims;
  const expect = io.selectLogits ? [1, at?.length ?? batch * seqLen, V] : [batch, seqLen, V];
  if (dims.length !== 3 || dims.some((d, i) => d !== expect[i])) {
    throw new MempoError('ERR_MODEL_IO', `${modelPath} returned logits of shape [${dims.join(', ')}], expected [${expect.join(', ')}]`);
  }
  const present = fetchPresent ? checkPresent(modelPath, config, io, out, batch, total) : undefined;
  const data = logitsT.data as Float32Array;
  return { logits: at !== undefined && !io.selectLogits ? copyRows(data, at, V) : data, present };
}
