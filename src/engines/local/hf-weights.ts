/**
 * After a training step only the weights change (issue 44, item 3): the learner saves a Hugging
 * Face directory (config.json, *.safetensors, tokenizer), and `CausalLM.reload` of it writes that
 * directory's ONNX export from the loaded one: the same graph bytes, each initializer's raw data
 * overwritten in place by its safetensors tensor (export.json `weights`: tensor name ->
 * initializer name, recorded by the exporter and checked byte for byte there). No Python runs.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MempoError } from '../../errors';
import { readJson, readRegularFile } from './files';
import { EXPORT_DIR, EXPORT_MANIFEST } from './hf-export';
import { fields, firstString, lastInt, WireError, type Field } from './onnx-wire';
import { MAX_ONNX_BYTES } from './reload';

/** Where an initializer's raw data lies in the model file. */
interface InitializerSlot {
  offset: number;
  length: number;
  dims: number[];
  dataType: number;
}

const FLOAT = 1;

/** The float32 initializers of a ModelProto with raw_data, by name. */
function initializerSlots(file: Uint8Array, path: string): Map<string, InitializerSlot> {
  const out = new Map<string, InitializerSlot>();
  try {
    const graph = fields(file).find((f) => f.no === 7 && f.wire === 2);
    if (graph === undefined) throw new MempoError('ERR_MODEL_IO', `${path} has no graph`);
    for (const init of fields(graph.body).filter((f) => f.no === 5 && f.wire === 2)) {
      const t = fields(init.body);
      const name = firstString(t, 8);
      const raw = t.find((f) => f.no === 9 && f.wire === 2);
      if (raw === undefined) continue; // held in float_data or external data: not one the exporter maps
      out.set(name, { offset: raw.body.byteOffset - file.byteOffset, length: raw.body.length, dims: tensorDims(t), dataType: Number(lastInt(t, 2) ?? 0n) });
    }
  } catch (err) {
    if (err instanceof WireError) throw new MempoError('ERR_MODEL_IO', `${path} is not an ONNX model: ${err.byteIn(file)} (protobuf)`);
    throw err;
  }
  return out;
}

/** TensorProto.dims (field 1): repeated int64, packed or not. */
function tensorDims(t: readonly Field[]): number[] {
  const dims: number[] = [];
  for (const f of t) {
    if (f.no !== 1) continue;
    if (f.wire === 0) dims.push(Number(f.int));
    else if (f.wire === 2) {
      let v = 0;
      let scale = 1;
      for (const b of f.body) {
        v += (b & 0x7f) * scale;
        scale *= 128;
        if (b < 0x80) {
          dims.push(v);
          v = 0;
          scale = 1;
        }
      }
    }
  }
  return dims;
}

interface SafeTensor {
  dtype: string;
  shape: number[];
  data: Uint8Array;
}

/** The tensors of one safetensors file (8-byte header length, JSON header, data), checked against the file's size. */
function readSafetensors(buf: Buffer, path: string): Map<string, SafeTensor> {
  const bad = (why: string) => new MempoError('ERR_MODEL_IO', `${path} is not a safetensors file: ${why}`);
  if (buf.length < 8) throw bad('shorter than its 8-byte header length');
  const n = Number(buf.readBigUInt64LE(0));
  if (n > buf.length - 8) throw bad(`header length ${n} runs past the end (${buf.length} bytes)`);
  let header: Record<string, unknown>;
  try {
    header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8')) as Record<string, unknown>;
  } catch (err) {
    throw bad(`its header is not JSON (${(err as Error).message})`);
  }
  const data = buf.subarray(8 + n);
  const out = new Map<string, SafeTensor>();
  for (const [name, v] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const e = v as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    const off = e?.data_offsets;
    if (typeof e?.dtype !== 'string' || !Array.isArray(e.shape) || !Array.isArray(off) || off.length !== 2) throw bad(`tensor ${name} lacks dtype, shape or data_offsets`);
    const [b, end] = off as number[];
    if (!Number.isInteger(b) || !Number.isInteger(end) || b! < 0 || end! < b! || end! > data.length) throw bad(`tensor ${name}: data_offsets [${String(b)}, ${String(end)}] outside the ${data.length} data bytes`);
    out.set(name, { dtype: e.dtype, shape: e.shape as number[], data: data.subarray(b, end) });
  }
  return out;
}

/** A safetensors tensor as float32 little-endian bytes (F32 as is; F16 and BF16 widened exactly). */
function asFloat32(t: SafeTensor, name: string, path: string): Uint8Array {
  const count = t.shape.reduce((a, b) => a * b, 1);
  const width = t.dtype === 'F32' ? 4 : t.dtype === 'F16' || t.dtype === 'BF16' ? 2 : 0;
  if (width === 0) throw new MempoError('ERR_MODEL_IO', `${path}: tensor ${name} has dtype ${t.dtype}; a reload takes F32, F16 or BF16 weights`);
  if (t.data.length !== count * width) throw new MempoError('ERR_MODEL_IO', `${path}: tensor ${name} has ${t.data.length} bytes, its shape [${t.shape.join(', ')}] of ${t.dtype} needs ${count * width}`);
  if (width === 4) return t.data;
  const out = new Float32Array(count);
  const dv = new DataView(t.data.buffer, t.data.byteOffset, t.data.length);
  const u32 = new Uint32Array(out.buffer);
  for (let i = 0; i < count; i++) {
    const h = dv.getUint16(2 * i, true);
    if (t.dtype === 'BF16') u32[i] = h << 16;
    else out[i] = halfToFloat(h);
  }
  return new Uint8Array(out.buffer);
}

function halfToFloat(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m === 0 ? s * Infinity : NaN;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

/** True when a reload of `dir` must first write its export: Hugging Face weights and no ONNX file. */
export function needsExport(dir: string): boolean {
  if (existsSync(join(dir, 'model.onnx')) || existsSync(join(dir, EXPORT_DIR, 'model.onnx'))) return false;
  try {
    return existsSync(join(dir, 'config.json')) && readdirSync(dir).some((n) => n.endsWith('.safetensors'));
  } catch {
    return false;
  }
}

/** True when `dir` was exported by mempo_learner.export_onnx (its export.json maps weights to initializers). */
export function hasWeightMap(dir: string): boolean {
  return existsSync(join(dir, EXPORT_DIR, EXPORT_MANIFEST));
}

/**
 * Writes `dir/onnx/model.onnx` and `dir/onnx/export.json` from the export of `from` (the loaded
 * model's directory) with `dir`'s safetensors weights. Every tensor of `dir` must map to an
 * initializer of the same shape, and every mapped initializer must get a tensor: otherwise
 * ERR_MODEL_CONFIG names the tensor, and nothing is written (temporary directory + rename).
 */
export async function writeExportFrom(from: string, dir: string): Promise<string> {
  const manifestPath = join(from, EXPORT_DIR, EXPORT_MANIFEST);
  const manifest = readJson(manifestPath, 'ONNX export manifest');
  const weights = manifest['weights'];
  if (weights === null || typeof weights !== 'object' || Array.isArray(weights)) {
    throw new MempoError('ERR_MODEL_CONFIG', `${manifestPath}: "weights" must map safetensors tensor names to initializer names (re-export with a current mempo_learner.export_onnx)`);
  }
  if (manifest['external_data'] !== null && manifest['external_data'] !== undefined) {
    throw new MempoError('ERR_MODEL_CONFIG', `${manifestPath}: the export keeps its weights in external data, which a reload cannot rewrite yet; export ${dir} itself with mempo_learner.export_onnx`);
  }
  const map = weights as Record<string, string>;
  const modelPath = join(from, EXPORT_DIR, typeof manifest['model'] === 'string' ? manifest['model'] : 'model.onnx');
  const file = Buffer.from(await readRegularFile(modelPath, 'ONNX model', MAX_ONNX_BYTES));
  const slots = initializerSlots(file, modelPath);
  const fail = (why: string) => new MempoError('ERR_MODEL_CONFIG', `Cannot reload from ${dir}: ${why}; a reload keeps the architecture (load a new model instead)`);
  const written = new Set<string>();
  const source: Record<string, { bytes: number; sha256: string }> = {};
  for (const name of readdirSync(dir).filter((n) => n.endsWith('.safetensors')).sort()) {
    const path = join(dir, name);
    const buf = await readRegularFile(path, 'safetensors weights', Number.MAX_SAFE_INTEGER);
    source[name] = { bytes: buf.length, sha256: createHash('sha256').update(buf).digest('hex') };
    for (const [tensor, t] of readSafetensors(buf, path)) {
      const initName = map[tensor];
      if (initName === undefined) throw fail(`${path} holds the tensor ${tensor}, which the loaded export (${manifestPath}) has no initializer for`);
      const slot = slots.get(initName);
      if (slot === undefined || slot.dataType !== FLOAT) throw fail(`${modelPath} has no float32 initializer ${initName} (for ${tensor})`);
      if (slot.dims.join(',') !== t.shape.join(',')) throw fail(`${path}: tensor ${tensor} has shape [${t.shape.join(', ')}], the loaded model's is [${slot.dims.join(', ')}]`);
      const bytes = asFloat32(t, tensor, path);
      if (bytes.length !== slot.length) throw fail(`${path}: tensor ${tensor} has ${bytes.length} float32 bytes, ${initName} ${slot.length}`);
      file.set(bytes, slot.offset);
      written.add(initName);
    }
  }
  const unwritten = [...new Set(Object.values(map))].filter((n) => !written.has(n));
  if (unwritten.length > 0) {
    const names = Object.entries(map).filter(([, v]) => unwritten.includes(v)).map(([k]) => k);
    throw fail(`no safetensors file holds ${names.slice(0, 5).join(', ')}${names.length > 5 ? ', ...' : ''}`);
  }
  const target = join(dir, EXPORT_DIR);
  const tmp = mkdtempSync(join(dir, '.onnx-reload-'));
  try {
    writeFileSync(join(tmp, 'model.onnx'), file);
    writeFileSync(join(tmp, EXPORT_MANIFEST), JSON.stringify({ ...manifest, source, rewrittenFrom: modelPath }, null, 1));
    renameSync(tmp, target);
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    // Another process reloading the same save (a second `mempo serve` replica) wrote it first:
    // the same bytes from the same weights, which the caller's freshness check confirms.
    const code = (err as NodeJS.ErrnoException).code;
    if ((code === 'ENOTEMPTY' || code === 'EEXIST') && existsSync(join(target, 'model.onnx')) && existsSync(join(target, EXPORT_MANIFEST))) return join(target, 'model.onnx');
    throw new MempoError('ERR_MODEL_IO', `Could not write the ONNX export of ${dir} (${(err as Error).message})`);
  }
  return join(target, 'model.onnx');
}
