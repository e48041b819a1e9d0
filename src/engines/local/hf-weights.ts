/**
 * After a training step only the weights change (issue 44, item 3): the learner saves a Hugging
 * Face directory (config.json, *.safetensors, tokenizer), and `CausalLM.reload` of it writes that
 * directory's ONNX export from the loaded one: the same graph bytes, each initializer's data (in
 * the model file, or in its external data file) overwritten in place by its safetensors tensor (export.json `weights`: tensor name ->
 * initializer name, recorded by the exporter and checked byte for byte there). No Python runs.
 */
import { closeSync, copyFileSync, existsSync, fstatSync, mkdtempSync, openSync, readSync, renameSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { MempoError } from '../../errors';
import { readJson, readRegularFile, requireFile } from './files';
import { EXPORT_DIR, EXPORT_MANIFEST, hasSafetensors, sha256File, weightFiles } from './hf-export';
import { fields, firstString, lastInt, WireError, type Field } from './onnx-wire';
import { MAX_ONNX_BYTES } from './reload';

/** Where an initializer's data lies: in the model file (raw_data), or in an external data file. */
interface InitializerSlot {
  /** Byte offset in the model file, or in `location` for external data. */
  offset: number;
  length: number;
  /** The external data file (relative to the model's folder); undefined: raw_data in the model file. */
  location?: string;
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
      const dims = tensorDims(t);
      const dataType = Number(lastInt(t, 2) ?? 0n);
      const raw = t.find((f) => f.no === 9 && f.wire === 2);
      if (raw !== undefined) {
        out.set(name, { offset: raw.body.byteOffset - file.byteOffset, length: raw.body.length, dims, dataType });
      } else if (lastInt(t, 14) === 1n) {
        // TensorProto.external_data (13): { key (1), value (2) } entries location, offset, length.
        const kv = new Map(t.filter((f) => f.no === 13 && f.wire === 2).map((f) => {
          const e = fields(f.body);
          return [firstString(e, 1), firstString(e, 2)] as const;
        }));
        const location = kv.get('location');
        const length = Number(kv.get('length'));
        if (location === undefined || !Number.isSafeInteger(length)) throw new MempoError('ERR_MODEL_IO', `${path}: initializer ${name} has external data without a location or length`);
        out.set(name, { offset: Number(kv.get('offset') ?? 0), length, location, dims, dataType });
      } // float_data: not a layout the exporter writes, so no tensor maps to it

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
  /** Byte range in the file. */
  start: number;
  end: number;
}

/** Largest safetensors header read (the format caps it at 100 MB). */
const MAX_HEADER = 100_000_000;

/** The tensors of one safetensors file (8-byte header length, JSON header, data), ranges checked against the file's size. */
function readSafetensorsHeader(fd: number, size: number, path: string): Map<string, SafeTensor> {
  const bad = (why: string) => new MempoError('ERR_MODEL_IO', `${path} is not a safetensors file: ${why}`);
  if (size < 8) throw bad('shorter than its 8-byte header length');
  const head = Buffer.alloc(8);
  readSync(fd, head, 0, 8, 0);
  const n = Number(head.readBigUInt64LE(0));
  if (n > size - 8 || n > MAX_HEADER) throw bad(`header length ${n} runs past the end (${size} bytes) or the ${MAX_HEADER}-byte limit`);
  const json = Buffer.alloc(n);
  readSync(fd, json, 0, n, 8);
  let header: Record<string, unknown>;
  try {
    header = JSON.parse(json.toString('utf8')) as Record<string, unknown>;
  } catch (err) {
    throw bad(`its header is not JSON (${(err as Error).message})`);
  }
  const dataStart = 8 + n;
  const out = new Map<string, SafeTensor>();
  for (const [name, v] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const e = v as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    const off = e?.data_offsets;
    if (typeof e?.dtype !== 'string' || !Array.isArray(e.shape) || !Array.isArray(off) || off.length !== 2) throw bad(`tensor ${name} lacks dtype, shape or data_offsets`);
    const [b, end] = off as number[];
    if (!Number.isSafeInteger(b) || !Number.isSafeInteger(end) || b! < 0 || end! < b! || end! > size - dataStart) throw bad(`tensor ${name}: data_offsets [${String(b)}, ${String(end)}] outside the ${size - dataStart} data bytes`);
    out.set(name, { dtype: e.dtype, shape: e.shape as number[], start: dataStart + b!, end: dataStart + end! });
  }
  return out;
}

function readRange(fd: number, start: number, end: number): Buffer {
  const buf = Buffer.allocUnsafe(end - start);
  let got = 0;
  while (got < buf.length) {
    const n = readSync(fd, buf, got, buf.length - got, start + got);
    if (n === 0) throw new MempoError('ERR_MODEL_IO', `unexpected end of file at byte ${start + got}`);
    got += n;
  }
  return buf;
}

/** A safetensors tensor as float32 little-endian bytes (F32 as is; F16 and BF16 widened exactly). */
function asFloat32(t: SafeTensor, fd: number, name: string, path: string): Uint8Array {
  const count = t.shape.reduce((a, b) => a * b, 1);
  const width = t.dtype === 'F32' ? 4 : t.dtype === 'F16' || t.dtype === 'BF16' ? 2 : 0;
  if (width === 0) throw new MempoError('ERR_MODEL_IO', `${path}: tensor ${name} has dtype ${t.dtype}; a reload takes F32, F16 or BF16 weights`);
  if (t.end - t.start !== count * width) throw new MempoError('ERR_MODEL_IO', `${path}: tensor ${name} has ${t.end - t.start} bytes, its shape [${t.shape.join(', ')}] of ${t.dtype} needs ${count * width}`);
  const data = readRange(fd, t.start, t.end);
  if (width === 4) return data;
  const out = new Float32Array(count);
  const dv = new DataView(data.buffer, data.byteOffset, data.length);
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
  return hasSafetensors(dir);
}

/** True when `dir` was exported by mempo_learner.export_onnx (its export.json maps weights to initializers). */
export function hasWeightMap(dir: string): boolean {
  return existsSync(join(dir, EXPORT_DIR, EXPORT_MANIFEST));
}

/**
 * Writes `dir/onnx/model.onnx` (and its data file, for an export with external data) and
 * `dir/onnx/export.json` from the export of `from` (the loaded model's directory) with `dir`'s
 * safetensors weights, read one tensor at a time. Every tensor of `dir` must map to an
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
  const external = manifest['external_data'];
  if (external !== null && external !== undefined && (typeof external !== 'string' || external.includes('/') || external.includes('\\') || external.startsWith('.'))) {
    throw new MempoError('ERR_MODEL_CONFIG', `${manifestPath}: "external_data" must be a file name inside ${join(from, EXPORT_DIR)}, got ${JSON.stringify(external)}`);
  }
  const map = weights as Record<string, string>;
  const modelPath = join(from, EXPORT_DIR, typeof manifest['model'] === 'string' ? manifest['model'] : 'model.onnx');
  const file = Buffer.from(await readRegularFile(modelPath, 'ONNX model', MAX_ONNX_BYTES));
  const slots = initializerSlots(file, modelPath);
  const fail = (why: string) => new MempoError('ERR_MODEL_CONFIG', `Cannot reload from ${dir}: ${why}; a reload keeps the architecture (load a new model instead)`);
  for (const [tensor, initName] of Object.entries(map)) {
    const loc = slots.get(initName)?.location;
    if (loc !== undefined && loc !== external) throw new MempoError('ERR_MODEL_IO', `${modelPath}: initializer ${initName} (for ${tensor}) lies in ${JSON.stringify(loc)}, not in the export's data file ${JSON.stringify(external)}`);
  }
  // Written into a temporary folder beside the target, renamed into place when whole: a failure
  // (a tensor of another shape, a full disk) leaves nothing behind.
  const target = join(dir, EXPORT_DIR);
  const tmp = mkdtempSync(join(dir, '.onnx-reload-'));
  let dataFd: number | undefined;
  try {
    let dataSize = 0;
    if (typeof external === 'string') {
      // The data file: the loaded one, each mapped tensor overwritten at its offset.
      copyFileSync(join(from, EXPORT_DIR, external), join(tmp, external));
      dataFd = openSync(join(tmp, external), 'r+');
      dataSize = fstatSync(dataFd).size;
    }
    const written = new Set<string>();
    const source: Record<string, { bytes: number; sha256: string }> = {};
    for (const name of weightFiles(dir)) {
      const path = join(dir, name);
      requireFile(path, 'safetensors weights');
      const fd = openSync(path, 'r');
      try {
        const size = fstatSync(fd).size;
        for (const [tensor, t] of readSafetensorsHeader(fd, size, path)) {
          const initName = map[tensor];
          if (initName === undefined) throw fail(`${path} holds the tensor ${tensor}, which the loaded export (${manifestPath}) has no initializer for`);
          const slot = slots.get(initName);
          if (slot === undefined || slot.dataType !== FLOAT) throw fail(`${modelPath} has no float32 initializer ${initName} (for ${tensor})`);
          if (slot.dims.join(',') !== t.shape.join(',')) throw fail(`${path}: tensor ${tensor} has shape [${t.shape.join(', ')}], the loaded model's is [${slot.dims.join(', ')}]`);
          const bytes = asFloat32(t, fd, tensor, path);
          if (bytes.length !== slot.length) throw fail(`${path}: tensor ${tensor} has ${bytes.length} float32 bytes, ${initName} ${slot.length}`);
          if (slot.location === undefined) file.set(bytes, slot.offset);
          else {
            if (dataFd === undefined || slot.offset + slot.length > dataSize) throw new MempoError('ERR_MODEL_IO', `${modelPath}: initializer ${initName} lies past the end of its data file ${String(external)}`);
            writeSync(dataFd, bytes, 0, bytes.length, slot.offset);
          }
          written.add(initName);
        }
      } finally {
        closeSync(fd);
      }
      source[name] = { bytes: statSync(path).size, sha256: sha256File(path) };
    }
    const unwritten = [...new Set(Object.values(map))].filter((n) => !written.has(n));
    if (unwritten.length > 0) {
      const names = Object.entries(map).filter(([, v]) => unwritten.includes(v)).map(([k]) => k);
      throw fail(`no safetensors file holds ${names.slice(0, 5).join(', ')}${names.length > 5 ? ', ...' : ''}`);
    }
    if (dataFd !== undefined) closeSync(dataFd);
    dataFd = undefined;
    writeFileSync(join(tmp, 'model.onnx'), file);
    writeFileSync(join(tmp, EXPORT_MANIFEST), JSON.stringify({ ...manifest, source, rewrittenFrom: modelPath }, null, 1));
    renameSync(tmp, target);
  } catch (err) {
    if (dataFd !== undefined) closeSync(dataFd);
    rmSync(tmp, { recursive: true, force: true });
    if (err instanceof MempoError) throw err;
    // Another process reloading the same save (a second `mempo serve` replica) wrote it first:
    // the same bytes from the same weights, which the caller's freshness check confirms.
    const code = (err as NodeJS.ErrnoException).code;
    if ((code === 'ENOTEMPTY' || code === 'EEXIST') && existsSync(join(target, 'model.onnx')) && existsSync(join(target, EXPORT_MANIFEST))) return join(target, 'model.onnx');
    throw new MempoError('ERR_MODEL_IO', `Could not write the ONNX export of ${dir} (${(err as Error).message})`);
  }
  return join(target, 'model.onnx');
}
