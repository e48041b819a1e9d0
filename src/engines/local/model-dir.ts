/**
 * A model directory in optimum's `text-generation-with-past` layout: `config.json`, an ONNX
 * decoder (`model.onnx`, or `onnx/model.onnx` as transformers.js lays it out) taking
 * `input_ids`, `attention_mask`, optionally `position_ids`, and `past_key_values.{i}.key|value`,
 * and returning `logits` and `present.{i}.key|value`.
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { MempoError } from '../../errors';
import { readJson, requireDirectory, requireFile } from './files';
import { checkExportFresh, hasSafetensors, missingExport, unexportable } from './hf-export';

export interface ModelConfig {
  /** Transformer layers (`num_hidden_layers`). */
  numLayers: number;
  /** Key/value heads per layer (`num_key_value_heads`, else `num_attention_heads`). */
  numKvHeads: number;
  /** Size of one head (`head_dim`, else `hidden_size / num_attention_heads`). */
  headDim: number;
  /** Rows of the output projection (`vocab_size`). */
  vocabSize: number;
  /** Longest sequence the model accepts (`max_position_embeddings`, `n_positions`, ...). */
  maxPositions: number;
  /** Ids that end generation (config.json and generation_config.json `eos_token_id`). */
  eosTokenIds: number[];
  padTokenId: number | undefined;
  /** The raw config.json. */
  raw: Record<string, unknown>;
}

export interface ModelFiles {
  dir: string;
  configPath: string;
  modelPath: string;
}

/** Locates config.json and the ONNX file in `dir`; a missing file is an error naming the path. */
export function locateModelFiles(dir: string, modelFile?: string): ModelFiles {
  const root = resolve(dir);
  requireDirectory(root, 'model directory');
  const configPath = join(root, 'config.json');
  requireFile(configPath, 'model config');
  let modelPath: string;
  if (modelFile !== undefined) {
    modelPath = resolve(root, modelFile);
    requireFile(modelPath, 'ONNX model');
  } else {
    const candidates = [join(root, 'model.onnx'), join(root, 'onnx', 'model.onnx')];
    const found = candidates.find((p) => existsSync(p));
    if (found === undefined) {
      const why = unexportable(root);
      if (why !== null) throw why;
      if (hasSafetensors(root)) throw missingExport(root);
      throw new MempoError(
        'ERR_MODEL_FILE_MISSING',
        `Missing ONNX model: neither ${candidates.join(' nor ')} exists (pass modelFile to choose another file)`,
      );
    }
    modelPath = found;
    requireFile(modelPath, 'ONNX model');
    if (found === candidates[1]) checkExportFresh(root);
  }
  return { dir: root, configPath, modelPath };
}

function positiveInt(cfg: Record<string, unknown>, keys: string[], path: string): number {
  for (const k of keys) {
    const v = cfg[k];
    if (typeof v === 'number' && Number.isInteger(v) && v > 0) return v;
  }
  throw new MempoError(
    'ERR_MODEL_CONFIG',
    `Expected a positive integer ${keys.map((k) => `"${k}"`).join(' or ')} in ${path}`,
  );
}

function idList(v: unknown): number[] {
  if (typeof v === 'number' && Number.isInteger(v)) return [v];
  if (Array.isArray(v)) return v.filter((x): x is number => typeof x === 'number' && Number.isInteger(x));
  return [];
}

export function readModelConfig(files: ModelFiles): ModelConfig {
  const raw = readJson(files.configPath, 'model config');
  const path = files.configPath;
  const numLayers = positiveInt(raw, ['num_hidden_layers', 'n_layer', 'num_layers'], path);
  const numHeads = positiveInt(raw, ['num_attention_heads', 'n_head'], path);
  const numKvHeads = typeof raw['num_key_value_heads'] === 'number'
    ? positiveInt(raw, ['num_key_value_heads'], path)
    : numHeads;
  let headDim: number;
  if (typeof raw['head_dim'] === 'number') {
    headDim = positiveInt(raw, ['head_dim'], path);
  } else {
    const hidden = positiveInt(raw, ['hidden_size', 'n_embd'], path);
    if (hidden % numHeads !== 0) {
      throw new MempoError('ERR_MODEL_CONFIG', `hidden_size ${hidden} is not a multiple of num_attention_heads ${numHeads} in ${path}`);
    }
    headDim = hidden / numHeads;
  }
  const vocabSize = positiveInt(raw, ['vocab_size'], path);
  const maxPositions = positiveInt(raw, ['max_position_embeddings', 'n_positions', 'max_sequence_length', 'seq_length'], path);
  const genPath = join(files.dir, 'generation_config.json');
  const gen = existsSync(genPath) ? readJson(genPath, 'generation config') : {};
  // An eos or pad id outside the vocabulary: generation would never stop on it, or padding would index past the embeddings.
  for (const [file, r] of [[path, raw], [genPath, gen]] as const) {
    for (const key of ['eos_token_id', 'pad_token_id']) {
      const bad = idList(r[key]).find((id) => id < 0 || id >= vocabSize);
      if (bad !== undefined) throw new MempoError('ERR_MODEL_CONFIG', `${file}: ${key} ${bad} is outside the vocabulary (vocab_size ${vocabSize} in ${path})`);
    }
  }
  const eos = new Set([...idList(raw['eos_token_id']), ...idList(gen['eos_token_id'])]);
  const pad = raw['pad_token_id'];
  return {
    numLayers,
    numKvHeads,
    headDim,
    vocabSize,
    maxPositions,
    eosTokenIds: [...eos],
    padTokenId: typeof pad === 'number' && Number.isInteger(pad) ? pad : undefined,
    raw,
  };
}

/**
 * What `--server` needs from a model directory besides the tokenizer: eos / pad ids and, when
 * config.json names it, the context length. Both config.json and generation_config.json are
 * optional (a tokenizer-only directory: tokenizer.json + tokenizer_config.json); no architecture
 * field is read, since the weights live on the server.
 */
export interface ServerModelConfig {
  /** `eos_token_id` of config.json then generation_config.json; empty when neither names one. */
  eosTokenIds: number[];
  padTokenId: number | undefined;
  /** config.json's context length, or undefined (the server's max_model_len then decides). */
  maxPositions: number | undefined;
  /** config.json's `vocab_size` (the model's ids; the tokenizer may name fewer), or undefined. */
  vocabSize: number | undefined;
  /** The config files that were read. */
  files: string[];
}

export function readServerModelConfig(dir: string): ServerModelConfig {
  const root = resolve(dir);
  requireDirectory(root, 'model directory');
  const eos: number[] = [];
  let pad: number | undefined;
  let maxPositions: number | undefined;
  let vocabSize: number | undefined;
  const files: string[] = [];
  for (const name of ['config.json', 'generation_config.json']) {
    const path = join(root, name);
    if (!existsSync(path)) continue;
    const raw = readJson(path, name === 'config.json' ? 'model config' : 'generation config');
    files.push(path);
    for (const id of idList(raw['eos_token_id'])) if (!eos.includes(id)) eos.push(id);
    const p = raw['pad_token_id'];
    if (pad === undefined && typeof p === 'number' && Number.isInteger(p) && p >= 0) pad = p;
    if (name === 'config.json') {
      const m = ['max_position_embeddings', 'n_positions', 'max_sequence_length', 'seq_length'].map((k) => raw[k]).find((v) => typeof v === 'number' && Number.isInteger(v) && v > 0);
      maxPositions = m as number | undefined;
      const v = raw['vocab_size'];
      if (typeof v === 'number' && Number.isInteger(v) && v > 0) vocabSize = v;
    }
  }
  return { eosTokenIds: eos, padTokenId: pad, maxPositions, vocabSize, files };
}

/** What the runtime found in the session's inputs and outputs. */
export interface ModelIO {
  hasPositionIds: boolean;
  /** Merged decoders (`decoder_model_merged.onnx`) take a boolean `use_cache_branch`. */
  hasUseCacheBranch: boolean;
  pastKeyNames: string[];
  pastValueNames: string[];
  presentKeyNames: string[];
  presentValueNames: string[];
  /**
   * The session runs the graph rewritten by onnx-select.ts: it takes `logits_index` and computes
   * the LM head only at those positions (docs/algorithm.md §4). False: full logits, as exported.
   */
  selectLogits: boolean;
  /** Why the rewrite was not used (an unrecognised graph, `selectLogits: false`, ...). */
  selectReason?: string;
}

interface IOMeta {
  name: string;
  isTensor: boolean;
  type?: string;
  shape?: ReadonlyArray<number | string>;
}

/**
 * Checks the session's input and output names (and, where ORT reports them, element types and
 * fixed dimensions) against what the runtime needs. Throws ERR_MODEL_IO naming the model file and
 * every missing or mismatched tensor.
 */
export function checkModelIO(
  modelPath: string,
  config: ModelConfig,
  inputNames: readonly string[],
  outputNames: readonly string[],
  inputMetadata?: readonly IOMeta[],
  outputMetadata?: readonly IOMeta[],
): ModelIO {
  const L = config.numLayers;
  const pastKeyNames = Array.from({ length: L }, (_, i) => `past_key_values.${i}.key`);
  const pastValueNames = Array.from({ length: L }, (_, i) => `past_key_values.${i}.value`);
  const presentKeyNames = Array.from({ length: L }, (_, i) => `present.${i}.key`);
  const presentValueNames = Array.from({ length: L }, (_, i) => `present.${i}.value`);
  const ins = new Set(inputNames);
  const outs = new Set(outputNames);
  const needIn = ['input_ids', 'attention_mask', ...pastKeyNames, ...pastValueNames];
  const needOut = ['logits', ...presentKeyNames, ...presentValueNames];
  const missingIn = needIn.filter((n) => !ins.has(n));
  const missingOut = needOut.filter((n) => !outs.has(n));
  const problems: string[] = [];
  if (missingIn.length > 0) problems.push(`missing input${missingIn.length > 1 ? 's' : ''} ${missingIn.join(', ')}`);
  if (missingOut.length > 0) problems.push(`missing output${missingOut.length > 1 ? 's' : ''} ${missingOut.join(', ')}`);
  const known = new Set([...needIn, 'position_ids', 'use_cache_branch']);
  const unknown = inputNames.filter((n) => !known.has(n));
  if (unknown.length > 0) problems.push(`unsupported input${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}`);

  const checkMeta = (meta: readonly IOMeta[] | undefined, expect: Record<string, { type: string; dims?: (number | null)[] }>) => {
    if (meta === undefined) return;
    for (const m of meta) {
      const e = expect[m.name];
      if (e === undefined || !m.isTensor) continue;
      if (m.type !== undefined && m.type !== e.type) problems.push(`${m.name} has element type ${m.type}, expected ${e.type}`);
      if (e.dims !== undefined && m.shape !== undefined && m.shape.length > 0) {
        if (m.shape.length !== e.dims.length) {
          problems.push(`${m.name} has rank ${m.shape.length}, expected ${e.dims.length}`);
          continue;
        }
        e.dims.forEach((d, i) => {
          const got = m.shape?.[i];
          if (d !== null && typeof got === 'number' && got > 0 && got !== d) {
            problems.push(`${m.name} dimension ${i} is ${got}, config.json implies ${d}`);
          }
        });
      }
    }
  };
  const kvDims = [null, config.numKvHeads, null, config.headDim];
  const inExpect: Record<string, { type: string; dims?: (number | null)[] }> = {
    input_ids: { type: 'int64', dims: [null, null] },
    attention_mask: { type: 'int64', dims: [null, null] },
    position_ids: { type: 'int64', dims: [null, null] },
  };
  for (const n of [...pastKeyNames, ...pastValueNames]) inExpect[n] = { type: 'float32', dims: kvDims };
  const outExpect: Record<string, { type: string; dims?: (number | null)[] }> = {
    logits: { type: 'float32', dims: [null, null, config.vocabSize] },
  };
  for (const n of [...presentKeyNames, ...presentValueNames]) outExpect[n] = { type: 'float32', dims: kvDims };
  checkMeta(inputMetadata, inExpect);
  checkMeta(outputMetadata, outExpect);

  if (problems.length > 0) {
    throw new MempoError(
      'ERR_MODEL_IO',
      `The ONNX model ${modelPath} does not fit the text-generation-with-past contract ` +
        `(config.json: ${L} layers, ${config.numKvHeads} kv heads, head_dim ${config.headDim}, vocab ${config.vocabSize}): ` +
        problems.join('; '),
    );
  }
  return {
    hasPositionIds: ins.has('position_ids'),
    hasUseCacheBranch: ins.has('use_cache_branch'),
    pastKeyNames,
    pastValueNames,
    presentKeyNames,
    presentValueNames,
    selectLogits: false,
  };
}
