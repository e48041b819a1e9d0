/**
 * Model directories with changed weights for the weight-sync tests: a copy of models/mempo-tiny
 * whose model.onnx has one initializer's raw_data rewritten in place (found by a small protobuf
 * walk: ModelProto.graph = 7, GraphProto.initializer = 5, TensorProto.name = 8, raw_data = 9), the
 * other files copied byte for byte, as the learner's saveWeights writes them (docs/learner.md).
 */
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MODEL_DIR } from './helpers';

export const MODEL_FILES = ['config.json', 'generation_config.json', 'model.onnx', 'tokenizer.json', 'tokenizer_config.json'];

function varint(b: Buffer, o: number): [number, number] {
  let x = 0;
  let m = 1;
  for (;;) {
    const c = b[o++]!;
    x += (c & 0x7f) * m;
    m *= 128;
    if (c < 0x80) return [x, o];
  }
}

/** Each field of the message in b[start, end): number, wire type, value range. */
function fields(b: Buffer, start: number, end: number): { f: number; w: number; vs: number; ve: number }[] {
  const out: { f: number; w: number; vs: number; ve: number }[] = [];
  let o = start;
  while (o < end) {
    let t: number;
    [t, o] = varint(b, o);
    const f = Math.floor(t / 8);
    const w = t & 7;
    let vs = o;
    if (w === 0) [, o] = varint(b, o);
    else if (w === 2) {
      let len: number;
      [len, o] = varint(b, o);
      vs = o;
      o += len;
    } else if (w === 5) o += 4;
    else if (w === 1) o += 8;
    else throw new Error(`unexpected wire type ${w} at byte ${o}`);
    out.push({ f, w, vs, ve: o });
  }
  return out;
}

/** Byte range of the raw_data of the initializer `name` in an ONNX file. */
export function initializerRange(onnx: Buffer, name: string): [number, number] {
  for (const g of fields(onnx, 0, onnx.length)) {
    if (g.f !== 7 || g.w !== 2) continue;
    for (const t of fields(onnx, g.vs, g.ve)) {
      if (t.f !== 5 || t.w !== 2) continue;
      const tf = fields(onnx, t.vs, t.ve);
      const n = tf.find((x) => x.f === 8);
      const raw = tf.find((x) => x.f === 9);
      if (n && raw && onnx.toString('utf8', n.vs, n.ve) === name) return [raw.vs, raw.ve];
    }
  }
  throw new Error(`no initializer ${name} with raw_data`);
}

/**
 * A copy of the embedded model with lm.norm.weight multiplied by `scale(i)` per element (default:
 * 2 on even elements, 0.25 on odd ones, so that log-probs and the argmax both move), and `edit`
 * applied to the copied files.
 */
export function reweightedModel(options: { scale?: (i: number) => number; edit?: (dir: string) => void } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'mempo-wsync-'));
  for (const f of MODEL_FILES) copyFileSync(join(MODEL_DIR, f), join(dir, f));
  const onnx = readFileSync(join(dir, 'model.onnx'));
  const [a, b] = initializerRange(onnx, 'lm.norm.weight');
  const scale = options.scale ?? ((i: number) => (i % 2 === 0 ? 2 : 0.25));
  for (let k = 0; k < (b - a) / 4; k++) onnx.writeFloatLE(onnx.readFloatLE(a + 4 * k) * scale(k), a + 4 * k);
  writeFileSync(join(dir, 'model.onnx'), onnx);
  options.edit?.(dir);
  return dir;
}

/** A byte-for-byte copy of the embedded model, with `edit` applied. */
export function modelDirCopy(edit?: (dir: string) => void): string {
  const dir = mkdtempSync(join(tmpdir(), 'mempo-wsync-'));
  for (const f of MODEL_FILES) copyFileSync(join(MODEL_DIR, f), join(dir, f));
  edit?.(dir);
  return dir;
}

/** Rewrites one field of dir/config.json. */
export function editConfig(dir: string, key: string, value: unknown): void {
  const p = join(dir, 'config.json');
  const c = JSON.parse(readFileSync(p, 'utf8')) as Record<string, unknown>;
  c[key] = value;
  writeFileSync(p, JSON.stringify(c, null, 2));
}
