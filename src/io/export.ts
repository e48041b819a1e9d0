/**
 * Writes a batch (docs/algorithm.md §8) for other trainers (docs/export.md): `verl` as
 * safetensors, `trl` as JSON, `tensors` (mempo's padded arrays) as .npz; each file atomically
 * (temp + rename), so that a reader never sees half a file. Also reads a finished batch.jsonl.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MempoError } from '../errors';
import type { BatchRecord } from '../contracts';
import { batchRecordSchema } from './batch-record';
import { zodMessage } from './jsonl';
import { removeStaleTemps, writeFileAtomic, type WriteOptions } from './write';
import { encodeSafetensors } from './export-safetensors';
import { encodeNpz } from './export-npz';
import { tensorsExport, trlExport, verlExport } from './export-layouts';

export { encodeSafetensors } from './export-safetensors';
export { encodeNpy, encodeNpz, encodeZip, crc32 } from './export-npz';
export { positionIds, tensorsExport, trlExport, verlExport } from './export-layouts';

export const EXPORT_FORMATS = ['verl', 'trl', 'tensors'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

/** The file each format is written to, in the run directory (or `mempo export --to DIR`). */
export const EXPORT_FILES: Record<ExportFormat, string> = {
  verl: 'batch.verl.safetensors',
  trl: 'batch.trl.json',
  tensors: 'batch.tensors.npz',
};

/** The bytes of one format. */
export function encodeExport(format: ExportFormat, records: readonly BatchRecord[], padTokenId: number): Uint8Array {
  if (format === 'verl') {
    const v = verlExport(records, padTokenId);
    return encodeSafetensors(v.tensors, v.metadata);
  }
  if (format === 'tensors') return encodeNpz(tensorsExport(records, padTokenId));
  // JSON writes a NaN advantage (--eps 0 over a uniform group) as null, as batch.jsonl does.
  return Buffer.from(`${JSON.stringify(trlExport(records))}\n`, 'utf8');
}

/** Writes each format's file in `dir` (after removing a killed export's temp files); returns the paths. */
export function writeExports(dir: string, records: readonly BatchRecord[], formats: readonly ExportFormat[], padTokenId: number, options: WriteOptions = {}): string[] {
  removeStaleTemps(dir, Object.values(EXPORT_FILES));
  return [...new Set(formats)].map((f) => {
    const file = join(dir, EXPORT_FILES[f]);
    writeFileAtomic(file, encodeExport(f, records, padTokenId), options);
    return file;
  });
}

export interface ReadBatch {
  records: BatchRecord[];
  /** The 1-based line of each record in the file. */
  lines: number[];
  /** A partial last line (a run killed mid-write) that was left out. */
  partialLastLine: boolean;
}

/**
 * Every line of a finished batch.jsonl, checked against the BatchRecord schema; a line that is
 * not JSON or not a record is an error naming the file and line. Blank lines are skipped, and a
 * last line without its newline (a killed run) is left out and reported.
 */
export function readBatchFile(file: string): ReadBatch {
  if (!existsSync(file)) throw new MempoError('ERR_INVALID_INPUT', `${file} does not exist (is it a mempo rollout directory?)`);
  const lines = readFileSync(file, 'utf8').split('\n');
  const tail = lines.pop() ?? '';
  const records: BatchRecord[] = [];
  const at: number[] = [];
  lines.forEach((line, i) => {
    if (line.trim().length === 0) return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      throw new MempoError('ERR_INVALID_INPUT', `${file}:${i + 1}: not valid JSON`);
    }
    const r = batchRecordSchema.safeParse(value);
    if (!r.success) throw new MempoError('ERR_INVALID_INPUT', `${file}:${i + 1}: ${zodMessage(r.error)}; not a mempo batch line`);
    records.push(r.data);
    at.push(i + 1);
  });
  if (records.length === 0) throw new MempoError('ERR_INVALID_INPUT', `${file} has no complete batch line to export`);
  return { records, lines: at, partialLastLine: tail.trim().length > 0 };
}

/** Refuses a batch whose token ids are not the model's (`vocabSize` ids), naming the line and field. */
export function checkTokenIds(file: string, batch: ReadBatch, vocabSize: number): void {
  batch.records.forEach((r, k) => {
    for (const field of ['promptIds', 'responseIds'] as const) {
      const i = r[field].findIndex((id) => id >= vocabSize);
      if (i >= 0) throw new MempoError('ERR_INVALID_INPUT', `${file}:${batch.lines[k]}: ${field}[${i}] = ${r[field][i]} is not a token id of the model (vocabulary ${vocabSize}); not a batch of this model`);
    }
  });
}
