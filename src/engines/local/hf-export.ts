/**
 * Hugging Face directories (config.json + *.safetensors) on the embedded runtime: the ONNX
 * decoder is made offline by `python3 -m mempo_learner.export_onnx DIR` (Python only then, never
 * at rollout time), which writes `DIR/onnx/model.onnx` and `DIR/onnx/export.json` (the weights it
 * was made from, and which initializer holds each safetensors tensor).
 */
import { createHash } from 'node:crypto';
import { closeSync, existsSync, openSync, readdirSync, readSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { MempoError } from '../../errors';
import { EMBEDDED } from '../../paths';
import { readJson } from './files';

export const EXPORT_DIR = 'onnx';
export const EXPORT_MANIFEST = 'export.json';

/** The shell command that writes `dir`'s export. */
export function exportCommand(dir: string): string {
  return `PYTHONPATH=${EMBEDDED.learner()} python3 -m mempo_learner.export_onnx ${dir}`;
}

export const SINGLE_WEIGHTS = 'model.safetensors';
export const SHARD_INDEX = 'model.safetensors.index.json';

/**
 * The weights files of a Hugging Face directory, as transformers picks them: the shards that
 * `model.safetensors.index.json` names (its `weight_map` values), else `model.safetensors`, else
 * none. Any other `*.safetensors` beside them (a checkpoint's `learner.safetensors`: optimiser
 * state) is not a weights file. A shard name that is not a plain file name in `dir` is an error
 * naming the index and the field.
 */
export function weightFiles(dir: string): string[] {
  const index = join(dir, SHARD_INDEX);
  if (existsSync(index)) {
    const map = readJson(index, 'safetensors shard index')['weight_map'];
    if (map === null || typeof map !== 'object' || Array.isArray(map)) throw new MempoError('ERR_MODEL_CONFIG', `${index}: "weight_map" must map tensor names to shard file names`);
    const shards = new Set<string>();
    for (const [tensor, file] of Object.entries(map as Record<string, unknown>)) {
      if (typeof file !== 'string' || !file.endsWith('.safetensors') || file.includes('/') || file.includes('\\') || file.startsWith('.')) {
        throw new MempoError('ERR_MODEL_CONFIG', `${index}: weight_map["${tensor}"] must be a .safetensors file name inside ${dir}, got ${JSON.stringify(file)}`);
      }
      shards.add(file);
    }
    if (shards.size === 0) throw new MempoError('ERR_MODEL_CONFIG', `${index}: "weight_map" names no shard`);
    return [...shards].sort();
  }
  return existsSync(join(dir, SINGLE_WEIGHTS)) ? [SINGLE_WEIGHTS] : [];
}

/** True when `dir` holds Hugging Face safetensors weights (weightFiles) beside config.json. */
export function hasSafetensors(dir: string): boolean {
  try {
    return existsSync(join(dir, 'config.json')) && (existsSync(join(dir, SINGLE_WEIGHTS)) || existsSync(join(dir, SHARD_INDEX)));
  } catch {
    return false;
  }
}

/** The `model_type`s the exporter (learner/mempo_learner/export_onnx.py) has a path for. */
export const EXPORT_MODEL_TYPES = ['qwen3', 'llama', 'qwen2'];
const PICKLE_SUFFIXES = ['.bin', '.pt', '.pth', '.ckpt'];

/**
 * Why a directory with config.json but neither an ONNX model nor its export cannot run, when the
 * reason is one no export can fix: its weights are only a pickle (never loaded: unpickling runs
 * code), or its config's model_type has no export path. Null otherwise.
 */
export function unexportable(dir: string): MempoError | null {
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch {
    return null;
  }
  const configPath = join(dir, 'config.json');
  if (weightFiles(dir).length === 0) {
    const pickle = names.find((n) => PICKLE_SUFFIXES.some((x) => n.endsWith(x)));
    if (pickle !== undefined) {
      return new MempoError('ERR_MODEL_FILE_MISSING', `${join(dir, pickle)} is a pickle, which mempo never loads (unpickling can run any code), and ${dir} has no model.safetensors: convert the weights with save_pretrained(..., safe_serialization=True)`);
    }
    return null;
  }
  const mt = readJson(configPath, 'model config')['model_type'];
  if (typeof mt !== 'string' || !EXPORT_MODEL_TYPES.includes(mt)) {
    return new MempoError('ERR_MODEL_CONFIG', `${configPath}: model_type ${JSON.stringify(mt ?? null)} has no ONNX export path in mempo (supported: ${EXPORT_MODEL_TYPES.join(', ')})`);
  }
  return null;
}

/** ERR_MODEL_FILE_MISSING for a Hugging Face directory without its ONNX export, with the command that makes it. */
export function missingExport(dir: string): MempoError {
  return new MempoError(
    'ERR_MODEL_FILE_MISSING',
    `${dir} is a Hugging Face model directory (config.json, *.safetensors) without its ONNX export ${join(dir, EXPORT_DIR, 'model.onnx')}: ` +
      `make it once with \`${exportCommand(dir)}\` (torch and transformers; supported: qwen3, llama, qwen2)`,
  );
}

export function sha256File(path: string): string {
  const h = createHash('sha256');
  const fd = openSync(path, 'r');
  try {
    const buf = Buffer.allocUnsafe(1 << 22);
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      h.update(buf.subarray(0, n));
    }
  } finally {
    closeSync(fd);
  }
  return h.digest('hex');
}

/**
 * Refuses an export older than its weights (the safetensors were replaced after it was made: the
 * runtime would sample from the old weights while the learner trains the new ones). Sizes are
 * compared always; a weights file newer than the manifest is hashed, so a copy or a touch that
 * kept the bytes passes. Nothing to check when `dir` has no export manifest.
 */
export function checkExportFresh(dir: string): void {
  const manifestPath = join(dir, EXPORT_DIR, EXPORT_MANIFEST);
  if (!existsSync(manifestPath)) return;
  const manifest = readJson(manifestPath, 'ONNX export manifest');
  const source = manifest['source'];
  if (source === null || typeof source !== 'object' || Array.isArray(source)) {
    throw new MempoError('ERR_MODEL_CONFIG', `${manifestPath}: "source" must be an object of { bytes, sha256 } per weights file`);
  }
  const made = statSync(manifestPath).mtimeMs;
  const stale = (why: string) => new MempoError('ERR_MODEL_FILE_MISSING', `The ONNX export in ${join(dir, EXPORT_DIR)} is stale: ${why}; re-export with \`${exportCommand(dir)}\``);
  for (const [name, entry] of Object.entries(source as Record<string, { bytes?: unknown; sha256?: unknown }>)) {
    const p = join(dir, name);
    if (!existsSync(p)) throw stale(`${name}, which it was made from, is missing`);
    const st = statSync(p);
    if (st.size !== entry?.bytes) throw stale(`${name} is ${st.size} bytes, ${manifestPath} says ${String(entry?.bytes)}`);
    if (st.mtimeMs > made && sha256File(p) !== entry.sha256) throw stale(`${name} changed after the export (sha256 differs from ${manifestPath})`);
  }
  for (const n of weightFiles(dir)) {
    if (!(n in source)) throw stale(`${n} is not among the files it was made from`);
  }
}
