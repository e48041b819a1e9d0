/**
 * Writes that never leave a short file: `write(2)` may write fewer bytes than asked (a full
 * disk, a signal), so every write loops until all bytes are written or fails naming the file.
 * JSON/HTML outputs go through a temp file and a rename (all or nothing); batch.jsonl is
 * appended line by line and cut back to its last whole line when a write fails.
 */
import { closeSync, fstatSync, fsyncSync, ftruncateSync, openSync, readdirSync, renameSync, rmSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

/** The write system call (`fs.writeSync`'s buffer form); injectable to test short and failing writes. */
export type WriteFn = (fd: number, buffer: Uint8Array, offset: number, length: number) => number;

export interface WriteOptions {
  write?: WriteFn;
}

const sysWrite: WriteFn = (fd, buffer, offset, length) => writeSync(fd, buffer, offset, length);

/** An Error naming the file, with the system error's code (ENOSPC, EIO, ...) when there is one. */
function writeError(file: string, done: number, total: number, cause: unknown): Error {
  const c = cause as (Error & { code?: string }) | undefined;
  const why = c === undefined ? 'the system wrote nothing (disk full?)' : c.message;
  const err = new Error(`Cannot write ${file}: ${why} (${done} of ${total} bytes written)`) as Error & { code?: string };
  err.code = c?.code ?? 'ENOSPC';
  return err;
}

/** Writes every byte of `data` at the file position, looping on short writes; throws naming `file`. */
export function writeAll(fd: number, data: Uint8Array, file: string, write: WriteFn = sysWrite): void {
  let off = 0;
  while (off < data.length) {
    let n: number;
    try {
      n = write(fd, data, off, data.length - off);
    } catch (err) {
      throw writeError(file, off, data.length, err);
    }
    if (!(n > 0)) throw writeError(file, off, data.length, undefined);
    off += n;
  }
}

function syncOrThrow(fd: number, file: string, bytes: number): void {
  try {
    fsyncSync(fd);
  } catch (err) {
    throw writeError(file, bytes, bytes, err);
  }
}

/** The temp file `writeFileAtomic` writes `file` through (removed by `removeStaleTemps` after a kill). */
export function tempPathOf(file: string, pid = process.pid): string {
  return join(dirname(file), `.${basename(file)}.${pid}.tmp`);
}

/**
 * Writes `data` to `file` through a temp file in the same directory and a rename: readers see
 * the old file or the whole new one. On a failed write the temp file is removed and `file` is
 * left as it was.
 */
export function writeFileAtomic(file: string, data: string | Uint8Array, options: WriteOptions = {}): void {
  const tmp = tempPathOf(file);
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  const fd = openSync(tmp, 'w');
  try {
    writeAll(fd, bytes, file, options.write);
    syncOrThrow(fd, file, bytes.length);
  } catch (err) {
    closeSync(fd);
    rmSync(tmp, { force: true });
    throw err;
  }
  closeSync(fd);
  renameSync(tmp, file);
}

/**
 * Appends whole JSON lines, each batch fsync'd. When a write fails (disk full) the file is cut
 * back to its last whole line, so that `--resume` finds only whole lines, and the error names it.
 */
export class JsonlWriter {
  private fd: number | null;
  private readonly writeFn: WriteFn | undefined;
  /** Bytes of whole lines in the file. */
  private size: number;
  lines = 0;
  constructor(readonly file: string, append = true, options: WriteOptions = {}) {
    this.fd = openSync(file, append ? 'a' : 'w');
    this.size = fstatSync(this.fd).size;
    this.writeFn = options.write;
  }

  write(records: readonly unknown[]): void {
    const fd = this.fd;
    if (fd === null) throw new Error(`${this.file} is closed`);
    try {
      for (const r of records) {
        const line = Buffer.from(`${JSON.stringify(r)}\n`, 'utf8');
        writeAll(fd, line, this.file, this.writeFn);
        this.size += line.length;
        this.lines++;
      }
      syncOrThrow(fd, this.file, this.size);
    } catch (err) {
      try {
        ftruncateSync(fd, this.size);
      } catch {
        // Best effort: --resume drops a partial last line anyway.
      }
      throw err;
    }
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}

/** Whether process `pid` exists (EPERM: it does, as another user's). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes the temp files (`.NAME.<pid>.tmp`) of `names` in `dir` that a killed run left behind;
 * those of a process still running are kept. Returns the names removed.
 */
export function removeStaleTemps(dir: string, names: readonly string[]): string[] {
  const removed: string[] = [];
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return removed;
  }
  for (const e of entries) {
    const m = /^\.(.+)\.(\d+)\.tmp$/.exec(e);
    if (m === null || !names.includes(m[1]!)) continue;
    const pid = Number(m[2]);
    if (pid !== process.pid && alive(pid)) continue;
    rmSync(join(dir, e), { force: true });
    removed.push(e);
  }
  return removed;
}
