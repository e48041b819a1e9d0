/**
 * The run directory's lock (src/io/run-lock.ts): one holder at a time, this process included; a
 * lock whose process is gone (dead pid, or a pid now running another process) is taken over; a
 * live one, one of another host and a file that is not a lock are refused naming what holds the
 * directory; release removes only the lock it took.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { LOCK_FILE, lockRunDir, type LockHolder } from '../../src/io/run-lock';
import { MempoError } from '../../src/errors';

const fresh = () => mkdtempSync(join(tmpdir(), 'mempo-lock-'));
const holderIn = (dir: string) => JSON.parse(readFileSync(join(dir, LOCK_FILE), 'utf8')) as LockHolder;

/** The pid of a process that has exited. */
function deadPid(): number {
  const r = spawnSync(process.execPath, ['-e', 'console.log(process.pid)'], { encoding: 'utf8' });
  return Number(r.stdout.trim());
}

function thrown(f: () => unknown): MempoError {
  try {
    f();
  } catch (e) {
    return e as MempoError;
  }
  throw new Error('did not throw');
}

test('the lock holds pid, host, start time and command, and release removes it', () => {
  const dir = join(fresh(), 'not-yet');
  const lock = lockRunDir(dir, 'mempo train');
  const h = holderIn(dir);
  expect(h).toMatchObject({ pid: process.pid, host: hostname(), command: 'mempo train' });
  expect(Number.isNaN(Date.parse(h.startedAt))).toBe(false);
  expect(lock.tookOver).toBeNull();
  lock.release();
  expect(existsSync(join(dir, LOCK_FILE))).toBe(false);
  lock.release(); // idempotent
});

test('a second lock on the directory is refused naming the holder, even in the same process', () => {
  const dir = fresh();
  const lock = lockRunDir(dir, 'mempo rollout');
  try {
    const e = thrown(() => lockRunDir(dir, 'mempo train'));
    expect(e.code).toBe('ERR_RUN_LOCKED');
    expect(e.message).toBe(`${dir} is in use by pid ${process.pid} (mempo rollout, started ${holderIn(dir).startedAt}): one run writes a directory at a time`);
  } finally {
    lock.release();
  }
  lockRunDir(dir, 'mempo train').release(); // free again
});

test('a lock whose process is gone (kill -9) is taken over', () => {
  const dir = fresh();
  const pid = deadPid();
  const stale: LockHolder = { pid, host: hostname(), startedAt: '2026-12-01T00:00:00.000Z', command: 'mempo train' };
  writeFileSync(join(dir, LOCK_FILE), JSON.stringify(stale));
  const lock = lockRunDir(dir, 'mempo train');
  expect(lock.tookOver).toEqual(stale);
  expect(holderIn(dir).pid).toBe(process.pid);
  lock.release();
});

(process.platform === 'linux' ? test : test.skip)('a lock whose pid now runs another process (started later) is taken over', () => {
  const dir = fresh();
  // This very pid, but a process start time that is not this process's: the pid was reused.
  writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: process.pid, host: hostname(), startedAt: '2026-12-01T00:00:00.000Z', command: 'mempo train', procStart: 1 }));
  const lock = lockRunDir(dir, 'mempo eval');
  expect(lock.tookOver?.procStart).toBe(1);
  lock.release();
});

test("another host's lock is refused, saying how to clear it if that run is gone", () => {
  const dir = fresh();
  writeFileSync(join(dir, LOCK_FILE), JSON.stringify({ pid: deadPid(), host: 'elsewhere.example', startedAt: '2026-12-01T00:00:00.000Z', command: 'mempo train' }));
  const e = thrown(() => lockRunDir(dir, 'mempo train'));
  expect(e.message).toMatch(/^.* is in use by pid \d+ on elsewhere\.example \(mempo train, started 2026-12-01T00:00:00\.000Z\): one run writes a directory at a time; if that run is gone, remove .*\.lock$/);
});

test('a .lock that is not a lock is refused naming it, and left in place', () => {
  const dir = fresh();
  writeFileSync(join(dir, LOCK_FILE), 'my notes');
  expect(thrown(() => lockRunDir(dir, 'mempo train')).message).toBe(`${join(dir, LOCK_FILE)} exists but is not a mempo lock ("my notes"); remove it if no mempo run is writing ${dir}`);
  expect(readFileSync(join(dir, LOCK_FILE), 'utf8')).toBe('my notes');
});

test('release leaves a lock that is no longer its own', () => {
  const dir = fresh();
  const lock = lockRunDir(dir, 'mempo train');
  const other = JSON.stringify({ pid: 1, host: hostname(), startedAt: '2026-12-02T00:00:00.000Z', command: 'mempo train' });
  writeFileSync(join(dir, LOCK_FILE), other);
  lock.release();
  expect(readFileSync(join(dir, LOCK_FILE), 'utf8')).toBe(other);
});
