/**
 * One writer per run directory: `DIR/.lock` holds the holder's pid, host, start time and command,
 * created exclusively (O_EXCL), so two runs on one directory cannot both append to its files.
 * A lock whose process is gone — on this host, its pid is not running or now belongs to a process
 * started later — is stale (a kill -9) and taken over; any other lock is refused naming its holder.
 * The lock is removed by `release()` and when the process exits (`process.exit`, e.g. from a
 * Ctrl-C handler); a process killed outright leaves a stale lock for the next run to take over.
 */
import { closeSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { MempoError } from '../errors';
import { alive } from './write';

export const LOCK_FILE = '.lock';

/** What `.lock` holds. */
export interface LockHolder {
  pid: number;
  host: string;
  startedAt: string;
  /** The command holding the directory, e.g. "mempo train". */
  command: string;
  /** Linux: the holder's start time in clock ticks since boot (/proc/PID/stat), which tells a reused pid from the holder. */
  procStart?: number;
}

export interface RunLock {
  readonly file: string;
  readonly holder: LockHolder;
  /** The stale lock this one replaced (its holder had died), if any. */
  readonly tookOver: LockHolder | null;
  /** Removes the lock (only if it is still this one); idempotent. */
  release(): void;
}

/** Field 22 of /proc/PID/stat (after the parenthesised command name, which may hold spaces). */
function procStart(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const v = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
    return Number.isInteger(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

/** Whether the process that wrote `h` is certainly gone (a lock of another host never is). */
function stale(h: LockHolder): boolean {
  if (h.host !== hostname()) return false;
  if (!alive(h.pid)) return true;
  const now = procStart(h.pid);
  return h.procStart !== undefined && now !== undefined && now !== h.procStart;
}

/** "pid N (command, started T)", with the host when it is another. */
export function describeHolder(h: LockHolder): string {
  return `pid ${h.pid}${h.host === hostname() ? '' : ` on ${h.host}`} (${h.command}, started ${h.startedAt})`;
}

/** Sleeps without yielding: the lock is taken synchronously, before the run starts. */
function pause(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/** The lock file's text and holder; null when it vanished; `holder` null when it is not a lock (or still being written). */
function readLock(file: string): { raw: string; holder: LockHolder | null } | null {
  let raw: string;
  try {
    raw = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  try {
    const h = JSON.parse(raw) as Partial<LockHolder> | null;
    if (h !== null && Number.isInteger(h.pid) && typeof h.host === 'string' && typeof h.startedAt === 'string' && typeof h.command === 'string') return { raw, holder: h as LockHolder };
  } catch {
    // not JSON: see below
  }
  return { raw, holder: null };
}

function tryCreate(file: string, text: string): boolean {
  let fd: number;
  try {
    fd = openSync(file, 'wx');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw new MempoError('ERR_RUN_LOCKED', `Cannot create the lock ${file}: ${(err as Error).message}`);
  }
  try {
    // One small write: a reader sees the whole lock or (for an instant) an empty file, which it rereads.
    writeSync(fd, text);
  } catch (err) {
    closeSync(fd);
    rmSync(file, { force: true });
    throw new MempoError('ERR_RUN_LOCKED', `Cannot write the lock ${file}: ${(err as Error).message}`);
  }
  closeSync(fd);
  return true;
}

/**
 * Takes the lock of `dir` (created if missing) for `command`, or throws ERR_RUN_LOCKED naming
 * the process that holds it. A lock this very process holds is refused too (one writer per
 * directory, whatever the process).
 */
export function lockRunDir(dir: string, command: string): RunLock {
  mkdirSync(dir, { recursive: true });
  const file = join(dir, LOCK_FILE);
  const pid = process.pid;
  const start = procStart(pid);
  const holder: LockHolder = { pid, host: hostname(), startedAt: new Date().toISOString(), command, ...(start === undefined ? {} : { procStart: start }) };
  const text = `${JSON.stringify(holder)}\n`;
  let tookOver: LockHolder | null = null;
  for (let attempt = 0; attempt < 20; attempt++) {
    if (tryCreate(file, text)) return held(file, holder, text, tookOver);
    const seen = readLock(file);
    if (seen === null) continue; // released meanwhile
    if (seen.holder === null) {
      if (seen.raw.length === 0 && attempt < 10) { pause(20); continue; } // being written
      throw new MempoError('ERR_RUN_LOCKED', `${file} exists but is not a mempo lock (${JSON.stringify(seen.raw.slice(0, 80))}); remove it if no mempo run is writing ${dir}`);
    }
    if (!stale(seen.holder)) {
      const other = seen.holder.host === hostname() ? '' : `; if that run is gone, remove ${file}`;
      throw new MempoError('ERR_RUN_LOCKED', `${dir} is in use by ${describeHolder(seen.holder)}: one run writes a directory at a time${other}`);
    }
    // Move the stale lock aside and check it is the one judged stale: another run taking it over
    // at the same moment may already have replaced it with its own, which is then put back.
    const aside = `${file}.stale-${pid}`;
    try {
      renameSync(file, aside);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      throw err;
    }
    if (readFileSync(aside, 'utf8') !== seen.raw) {
      try {
        renameSync(aside, file);
      } catch {
        // it was released meanwhile
      }
      continue;
    }
    rmSync(aside, { force: true });
    tookOver = seen.holder;
  }
  throw new MempoError('ERR_RUN_LOCKED', `${dir}: could not take ${file} (other runs keep taking it); one run writes a directory at a time`);
}

function held(file: string, holder: LockHolder, text: string, tookOver: LockHolder | null): RunLock {
  let done = false;
  const release = () => {
    if (done) return;
    done = true;
    process.removeListener('exit', release);
    try {
      // Only our own lock: never one a later run took over after a stale check.
      if (readLock(file)?.raw === text) rmSync(file, { force: true });
    } catch {
      // Unreadable now (the directory was removed): nothing of ours to remove.
    }
  };
  process.on('exit', release);
  return { file, holder, tookOver, release };
}
