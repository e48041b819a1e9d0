/**
 * Output files of a run: batch.jsonl written line by line and flushed (an interrupted run leaves
 * only whole lines), JSON/HTML written atomically (temp file + rename), and resume: reading
 * back which groups are complete.
 */
import { closeSync, existsSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { dirname, basename, join } from 'node:path';
import { MempoError } from '../errors';
import type { BatchRecord } from '../contracts';

/** Writes `data` to `file` through a temp file in the same directory and a rename. */
export function writeFileAtomic(file: string, data: string): void {
  const tmp = join(dirname(file), `.${basename(file)}.${process.pid}.tmp`);
  const fd = openSync(tmp, 'w');
  try {
    writeSync(fd, data);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
}

/** Appends whole JSON lines; each batch is written with one write call per line and fsync'd. */
export class JsonlWriter {
  private fd: number | null;
  lines = 0;
  constructor(readonly file: string, append = true) {
    this.fd = openSync(file, append ? 'a' : 'w');
  }

  write(records: readonly unknown[]): void {
    if (this.fd === null) throw new Error(`${this.file} is closed`);
    for (const r of records) {
      writeSync(this.fd, `${JSON.stringify(r)}\n`);
      this.lines++;
    }
    fsyncSync(this.fd);
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}

export interface ExistingRun {
  /** Records of complete groups, in file order. */
  records: BatchRecord[];
  completeUids: Set<string>;
  /** Lines dropped: a partial last line, or records of incomplete groups. */
  droppedLines: number;
}

/**
 * Reads batch.jsonl of an earlier run: keeps the groups with all `groupSize` samples, drops a
 * partial last line and incomplete groups, and rewrites the file (atomically) with only the
 * kept lines so that appending continues it.
 */
export function loadForResume(file: string, groupSize: number): ExistingRun {
  if (!existsSync(file)) return { records: [], completeUids: new Set(), droppedLines: 0 };
  const text = readFileSync(file, 'utf8');
  const lines = text.split('\n');
  // The last element is '' after a final newline; anything else is a partial line.
  const tail = lines.pop() ?? '';
  let dropped = tail.length > 0 ? 1 : 0;
  const byUid = new Map<string, Array<{ line: string; rec: BatchRecord }>>();
  lines.forEach((line, i) => {
    if (line.trim().length === 0) return;
    let rec: BatchRecord;
    try {
      rec = JSON.parse(line) as BatchRecord;
    } catch {
      throw new MempoError('ERR_RESUME', `${file}:${i + 1}: not valid JSON; cannot resume from this file`);
    }
    if (typeof rec.uid !== 'string' || typeof rec.sample !== 'number') {
      throw new MempoError('ERR_RESUME', `${file}:${i + 1}: field "uid"/"sample" missing; not a mempo batch file`);
    }
    let g = byUid.get(rec.uid);
    if (!g) byUid.set(rec.uid, (g = []));
    g.push({ line, rec });
  });
  const records: BatchRecord[] = [];
  const kept: string[] = [];
  const completeUids = new Set<string>();
  for (const [uid, g] of byUid) {
    const samples = new Set(g.map((x) => x.rec.sample));
    let complete = samples.size === groupSize && g.length === groupSize;
    for (let s = 0; s < groupSize && complete; s++) if (!samples.has(s)) complete = false;
    if (!complete) {
      dropped += g.length;
      continue;
    }
    completeUids.add(uid);
    for (const x of g) {
      records.push(x.rec);
      kept.push(x.line);
    }
  }
  if (dropped > 0) writeFileAtomic(file, kept.map((l) => `${l}\n`).join(''));
  return { records, completeUids, droppedLines: dropped };
}
