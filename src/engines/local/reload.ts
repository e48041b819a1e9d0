/**
 * Weight sync for `CausalLM.reload` (docs/learner.md: the learner writes the same graph with new
 * initializer bytes after each optimiser step): the checks that a new model directory fits the
 * loaded one, and the reference-counted ORT session that lets calls in flight finish on the old
 * weights while new calls take the new ones.
 *
 * A whole new session is built from the new model.onnx: measured on models/mempo-tiny, building a
 * session from the graph plus ORT's in-memory external data (`externalData`) was no faster than
 * from the file (session creation, not reading, dominates), so no weight surgery is done; the
 * selected-logits rewrite (onnx-select.ts) runs on every file opened, the new one included.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { MempoError } from '../../errors';
import { readRegularFile, requireFile } from './files';
import { runForward } from './forward-run';
import { KVCache } from './kv-cache';
import { checkModelIO, type ModelConfig, type ModelIO } from './model-dir';
import { LOGITS_INDEX, rewriteSelectLogits } from './onnx-select';
import { getOrt, type ExecutionProvider, type OrtSession, type SessionOptions } from './ort';

/** A session and the calls using it; once retired it is released when the last call ends. */
export class SessionSlot {
  private users = 0;
  private retired = false;
  /** `io`: what this session's graph takes and returns (the rewrite may differ between files). */
  constructor(readonly session: OrtSession, readonly modelPath: string, readonly io: ModelIO) {}

  /** Runs `fn` with this session held: a retire meanwhile waits for it before releasing. */
  async use<T>(fn: (session: OrtSession) => Promise<T>): Promise<T> {
    this.users++;
    try {
      return await fn(this.session);
    } finally {
      this.users--;
      if (this.retired && this.users === 0) await this.session.release();
    }
  }

  /** No new call takes this session; it is released now if unused, else after the last call. */
  async retire(): Promise<void> {
    if (this.retired) return;
    this.retired = true;
    if (this.users === 0) await this.session.release();
  }
}

/** The files whose bytes must not change across a reload: the token ids mean the same text. */
const TOKENIZER_FILES = ['tokenizer.json', 'tokenizer_config.json'];

/** sha256 of each tokenizer file present in `dir` (absent files are left out). */
export function tokenizerHashes(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const name of TOKENIZER_FILES) {
    const p = join(dir, name);
    if (!existsSync(p)) continue;
    requireFile(p, 'tokenizer file'); // a FIFO would block the read below
    out.set(name, createHash('sha256').update(readFileSync(p)).digest('hex'));
  }
  return out;
}

/** config.json's architecture fields (and the ids that end or pad a sequence), by their config.json names. */
const ARCHITECTURE: [string, (c: ModelConfig) => unknown][] = [
  ['vocab_size', (c) => c.vocabSize],
  ['num_hidden_layers', (c) => c.numLayers],
  ['num_attention_heads', (c) => c.raw['num_attention_heads'] ?? c.raw['n_head']],
  ['num_key_value_heads', (c) => c.numKvHeads],
  ['hidden_size', (c) => c.raw['hidden_size'] ?? c.raw['n_embd']],
  ['head_dim', (c) => c.headDim],
  ['max_position_embeddings', (c) => c.maxPositions],
  ['eos_token_id', (c) => JSON.stringify([...c.eosTokenIds].sort((a, b) => a - b))],
  ['pad_token_id', (c) => c.padTokenId],
];

/**
 * Throws ERR_MODEL_CONFIG naming the first field or file where `dir` differs from the loaded
 * model: an architecture field of config.json, the ONNX inputs, or a tokenizer file's bytes.
 * `tokenizer` undefined: the model was loaded without one, so no tokenizer file is compared.
 */
export function checkReloadable(
  dir: string,
  loaded: { config: ModelConfig; io: ModelIO; tokenizer: Map<string, string> | undefined },
  next: { config: ModelConfig; io: ModelIO },
): void {
  const fail = (what: string) => new MempoError('ERR_MODEL_CONFIG', `Cannot reload from ${dir}: ${what}; a reload keeps the architecture and the tokenizer (load a new model instead)`);
  for (const [field, get] of ARCHITECTURE) {
    const a = get(loaded.config);
    const b = get(next.config);
    if (a !== b) throw fail(`config.json ${field} is ${String(b)}, the loaded model's is ${String(a)}`);
  }
  for (const key of ['hasPositionIds', 'hasUseCacheBranch'] as const) {
    if (loaded.io[key] !== next.io[key]) {
      const name = key === 'hasPositionIds' ? 'position_ids' : 'use_cache_branch';
      throw fail(`the ONNX model ${next.io[key] ? 'takes' : 'does not take'} the input ${name}, unlike the loaded one`);
    }
  }
  if (loaded.tokenizer === undefined) return;
  const now = tokenizerHashes(dir);
  for (const name of TOKENIZER_FILES) {
    const a = loaded.tokenizer.get(name);
    const b = now.get(name);
    if (a === b) continue;
    throw fail(b === undefined ? `${name} is missing` : a === undefined ? `${name} is new (the loaded model has none)` : `${name} differs from the loaded model's (sha256 ${b.slice(0, 12)}… vs ${a.slice(0, 12)}…)`);
  }
}

/** What `openSession` needs of the load options. */
export interface SessionSettings {
  executionProviders?: ExecutionProvider[];
  sessionOptions?: SessionOptions;
  /** Rewrite the graph to compute logits only where they are read (onnx-select.ts). Default true. */
  selectLogits?: boolean;
}

/** External data read into memory for a rewritten graph, at most this much (the load's peak holds it twice). */
const MAX_EXTERNAL_BYTES = 2 ** 31;

/** Protobuf's limit on one message: an ONNX file past it cannot be parsed (weights that large live in external data). */
export const MAX_ONNX_BYTES = 2 ** 31 - 1;

/**
 * The external data files of a graph built from memory (ORT needs their bytes), or why not. A
 * location must stay inside the model's directory (as ONNX and ORT require: the graph must not
 * make mempo read /etc/passwd into a tensor) and be a regular file.
 */
async function externalData(modelPath: string, locations: readonly string[]): Promise<{ path: string; data: Uint8Array }[] | string> {
  const dir = dirname(modelPath);
  let total = 0;
  for (const loc of locations) {
    const p = resolve(dir, loc);
    const rel = relative(dir, p);
    if (isAbsolute(loc) || rel === '' || rel.startsWith('..') || isAbsolute(rel)) {
      throw new MempoError('ERR_MODEL_IO', `${modelPath} names the external data file ${JSON.stringify(loc)}, which is not inside its directory ${dir}`);
    }
    if (!existsSync(p)) return `its external data file ${p} is missing`;
    requireFile(p, 'external data file');
    total += statSync(p).size;
  }
  if (total > MAX_EXTERNAL_BYTES) {
    return `its ${(total / 2 ** 30).toFixed(1)} GiB of external data would have to be read into memory for the rewritten session (at most ${MAX_EXTERNAL_BYTES / 2 ** 30} GiB)`;
  }
  const out: { path: string; data: Uint8Array }[] = [];
  for (const loc of locations) out.push({ path: loc, data: await readRegularFile(resolve(dir, loc), 'external data file', MAX_EXTERNAL_BYTES) });
  return out;
}

/**
 * The graph rewritten by onnx-select.ts (with its external data), or why the file is used as it
 * is. The file is read off the event loop (readRegularFile: a regular file of at most 2 GiB, so
 * a FIFO or /dev/zero never blocks or fills the process); bytes that are not a protobuf message
 * at all are an error naming the byte, not handed to ORT.
 */
async function selectedGraph(modelPath: string, o: SessionSettings): Promise<{ bytes?: Uint8Array; external?: { path: string; data: Uint8Array }[]; reason?: string }> {
  if (o.selectLogits === false) return { reason: 'turned off by the load option selectLogits: false' };
  const file = await readRegularFile(modelPath, 'ONNX model', MAX_ONNX_BYTES);
  const r = rewriteSelectLogits(file);
  if (r.malformed !== undefined) throw new MempoError('ERR_MODEL_IO', `${modelPath} is not an ONNX model: ${r.malformed} (protobuf)`);
  if (r.bytes === undefined) return r;
  try {
    const external = await externalData(modelPath, r.external);
    return typeof external === 'string' ? { reason: external } : { bytes: r.bytes, external };
  } catch (err) {
    if (err instanceof MempoError) throw err;
    return { reason: `could not read the external data of ${modelPath} (${(err as Error).message})` };
  }
}

/** Token ids of the probe pass: this many positions, ids spread over the vocabulary. */
const PROBE_TOKENS = 8;

/**
 * A forward pass over a few tokens on a session about to replace the loaded one: weights whose
 * logits are NaN or infinite (a diverged step, a corrupt file) are refused here, naming the
 * first such logit, instead of failing every request after the swap. A probe, not a proof: it
 * reads PROBE_TOKENS positions, with ids spread over the vocabulary.
 */
export async function probeLogits(session: OrtSession, modelPath: string, config: ModelConfig, io: ModelIO): Promise<void> {
  const n = Math.min(PROBE_TOKENS, config.maxPositions);
  const ids = Array.from({ length: n }, (_, i) => Math.floor((i * config.vocabSize) / n));
  const { logits } = await runForward(session, modelPath, config, io, {
    inputIds: BigInt64Array.from(ids, BigInt),
    batch: 1,
    seqLen: n,
    attentionMask: new BigInt64Array(n).fill(1n),
    positionIds: BigInt64Array.from({ length: n }, (_, i) => BigInt(i)),
    past: KVCache.empty(config.numLayers, 1, config.numKvHeads, config.headDim),
    fetchPresent: false,
  });
  const V = config.vocabSize;
  for (let i = 0; i < logits.length; i++) {
    const v = logits[i]!;
    if (Number.isFinite(v)) continue;
    const pos = Math.floor(i / V);
    throw new MempoError(
      'ERR_MODEL_IO',
      `${modelPath} gives a logit of ${v} (vocabulary id ${i % V}) at position ${pos} of a probe pass over token ids [${ids.join(', ')}]: ` +
        'its weights are not finite (a diverged training step, or a corrupt file)',
    );
  }
}

/**
 * An ORT session of `modelPath` with its inputs and outputs checked against `config`; released
 * on error. The graph is rewritten in memory for selected logits when it can be (the file is
 * not changed, so a reload rewrites the learner's new file the same way); if ORT refuses the
 * rewritten graph the file is opened as it is, and `io.selectReason` says why.
 */
export async function openSession(modelPath: string, config: ModelConfig, o: SessionSettings): Promise<{ session: OrtSession; io: ModelIO }> {
  const options = { ...o.sessionOptions, executionProviders: o.executionProviders ?? o.sessionOptions?.executionProviders ?? ['cpu'] };
  const selected = await selectedGraph(modelPath, o);
  let reason = selected.reason;
  let session: OrtSession | undefined;
  if (selected.bytes !== undefined) {
    try {
      const withData = selected.external?.length ? { ...options, externalData: selected.external } : options;
      session = await getOrt().InferenceSession.create(selected.bytes, withData);
    } catch (err) {
      reason = `ONNX Runtime refused the rewritten graph (${(err as Error).message})`;
    }
  }
  const select = session !== undefined;
  if (session === undefined) {
    try {
      session = await getOrt().InferenceSession.create(modelPath, options);
    } catch (err) {
      throw new MempoError('ERR_MODEL_IO', `ONNX Runtime could not open ${modelPath}: ${(err as Error).message}`);
    }
  }
  try {
    const s = session as OrtSession & { inputMetadata?: unknown; outputMetadata?: unknown };
    // The input the rewrite added is the runtime's own, not part of the export's contract.
    const added = (n: string) => select && n === LOGITS_INDEX;
    const io = checkModelIO(
      modelPath,
      config,
      session.inputNames.filter((n) => !added(n)),
      session.outputNames,
      Array.isArray(s.inputMetadata) ? s.inputMetadata.filter((m: { name: string }) => !added(m.name)) : undefined,
      Array.isArray(s.outputMetadata) ? s.outputMetadata : undefined,
    );
    io.selectLogits = select;
    if (!select) io.selectReason = reason;
    return { session, io };
  } catch (err) {
    await session.release();
    throw err;
  }
}
