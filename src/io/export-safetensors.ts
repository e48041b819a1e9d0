/**
 * The safetensors format, written without a dependency (docs/export.md): an 8-byte little-endian
 * header length N, N bytes of JSON (`{ name: { dtype, shape, data_offsets: [begin, end] },
 * "__metadata__": { string: string } }`, padded with spaces to a multiple of 8), then the raw
 * little-endian data, offsets relative to its start, contiguous, no gaps.
 */
import { MempoError } from '../errors';
import { ELEMENT_BYTES, checked, tensorBytes, type NamedTensors } from './export-tensor';

export const SAFETENSORS_METADATA_KEY = '__metadata__';

/**
 * Encodes `tensors` and string `metadata` as one safetensors file. The data are laid out by
 * element size, largest first (then in the given order), so that every tensor starts at a
 * multiple of its element size: the data section starts 8-aligned, as the header is padded.
 */
export function encodeSafetensors(tensors: NamedTensors, metadata: Readonly<Record<string, string>> = {}): Uint8Array {
  const names = new Set<string>();
  for (const [name, t] of tensors) {
    if (name.length === 0 || name === SAFETENSORS_METADATA_KEY) throw new MempoError('ERR_INVALID_ARGUMENT', `A safetensors tensor cannot be named ${JSON.stringify(name)}`);
    if (names.has(name)) throw new MempoError('ERR_INVALID_ARGUMENT', `Tensor ${JSON.stringify(name)} is given twice`);
    names.add(name);
    checked(t);
  }
  for (const [k, v] of Object.entries(metadata)) {
    if (typeof v !== 'string') throw new MempoError('ERR_INVALID_ARGUMENT', `safetensors metadata values are strings; ${JSON.stringify(k)} is ${typeof v}`);
  }
  const order = tensors.map((e, i) => ({ e, i })).sort((a, b) => ELEMENT_BYTES[b.e[1].dtype] - ELEMENT_BYTES[a.e[1].dtype] || a.i - b.i);
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length > 0) header[SAFETENSORS_METADATA_KEY] = { ...metadata };
  let offset = 0;
  const parts: Uint8Array[] = [];
  for (const { e: [name, t] } of order) {
    const bytes = tensorBytes(t);
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + bytes.length] };
    parts.push(bytes);
    offset += bytes.length;
  }
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const headerLength = Math.ceil(json.length / 8) * 8;
  const out = new Uint8Array(8 + headerLength + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(headerLength), true);
  out.set(json, 8);
  out.fill(0x20, 8 + json.length, 8 + headerLength);
  let at = 8 + headerLength;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
