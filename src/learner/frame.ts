/**
 * Learner request and answer bodies with arrays (docs/learner.md, "Wire protocol"): a safetensors
 * file whose `__metadata__.params` is the operation's JSON parameters.
 */
import { encodeSafetensors, SAFETENSORS_METADATA_KEY } from '../io/export-safetensors';
import type { NamedTensors } from '../io/export-tensor';
import { MempoError } from '../errors';

export const FRAME_CONTENT_TYPE = 'application/x-mempo-frame';

export interface Frame {
  params: Record<string, unknown>;
  tensors: Map<string, Int32Array | Float32Array>;
}

export function encodeFrame(params: Record<string, unknown>, tensors: NamedTensors): Uint8Array {
  return encodeSafetensors(tensors, { params: JSON.stringify(params) });
}

function bad(what: string, message: string): MempoError {
  return new MempoError('ERR_LEARNER', `${what}: not a valid frame (${message})`);
}

type HeaderEntry = { dtype?: unknown; shape?: unknown; data_offsets?: unknown };

/** Decodes a frame; `what` names the answer (learner and operation) in errors. Copies the data out (aligned). */
export function decodeFrame(body: Uint8Array, what: string): Frame {
  if (body.length < 8) throw bad(what, `${body.length} bytes`);
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const n = Number(view.getBigUint64(0, true));
  if (n > body.length - 8) throw bad(what, `header length ${n} past the end of ${body.length} bytes`);
  let header: Record<string, HeaderEntry>;
  try {
    header = JSON.parse(Buffer.from(body.buffer, body.byteOffset + 8, n).toString('utf8')) as Record<string, HeaderEntry>;
  } catch (e) {
    throw bad(what, `header is not JSON: ${(e as Error).message}`);
  }
  if (header === null || typeof header !== 'object' || Array.isArray(header)) throw bad(what, 'header is not an object');
  const dataStart = 8 + n;
  const meta = header[SAFETENSORS_METADATA_KEY] as Record<string, unknown> | undefined;
  let params: Record<string, unknown> = {};
  if (meta !== undefined && typeof meta['params'] === 'string') {
    try {
      params = JSON.parse(meta['params']) as Record<string, unknown>;
    } catch (e) {
      throw bad(what, `__metadata__.params is not JSON: ${(e as Error).message}`);
    }
  }
  const tensors = new Map<string, Int32Array | Float32Array>();
  for (const [name, e] of Object.entries(header)) {
    if (name === SAFETENSORS_METADATA_KEY) continue;
    if (e.dtype !== 'I32' && e.dtype !== 'F32') throw bad(what, `tensor ${name}: dtype ${String(e.dtype)}, expected I32 or F32`);
    const shape = e.shape;
    const off = e.data_offsets;
    if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && (d as number) >= 0)) throw bad(what, `tensor ${name}: shape is not a list of sizes`);
    if (!Array.isArray(off) || off.length !== 2 || !off.every((d) => Number.isSafeInteger(d))) throw bad(what, `tensor ${name}: data_offsets is not [begin, end]`);
    const [b, end] = off as [number, number];
    const count = (shape as number[]).reduce((a, d) => a * d, 1);
    if (b < 0 || end < b || dataStart + end > body.length || end - b !== count * 4) throw bad(what, `tensor ${name}: data_offsets [${b}, ${end}] do not hold ${count} values inside the body`);
    const bytes = Uint8Array.prototype.slice.call(body, dataStart + b, dataStart + end); // a copy: a Buffer's slice is a view into its pool
    tensors.set(name, e.dtype === 'I32' ? new Int32Array(bytes.buffer, 0, count) : new Float32Array(bytes.buffer, 0, count));
  }
  return { params, tensors };
}
