import { constants, existsSync, lstatSync, readFileSync, realpathSync, statSync, type Stats } from 'node:fs';
import { open } from 'node:fs/promises';
import { MempoError } from '../../errors';

/** Refuses `path` (whose target `st` describes) when it is not a regular file, saying what it is and where a symlink leads. */
function notRegular(path: string, what: string, st: Stats): MempoError {
  const k = st.isDirectory() ? 'a directory' : st.isFIFO() ? 'a FIFO' : st.isCharacterDevice() ? 'a character device' : st.isBlockDevice() ? 'a block device' : st.isSocket() ? 'a socket' : 'a special file';
  let link = '';
  try {
    if (lstatSync(path).isSymbolicLink()) link = ` (a symlink to ${realpathSync(path)})`;
  } catch {
    // gone meanwhile: the kind is enough
  }
  return new MempoError('ERR_MODEL_FILE_MISSING', `${path} is ${k}${link}, not a regular file (the ${what} must be one)`);
}

/**
 * Throws ERR_MODEL_FILE_MISSING naming `path` when it does not exist or is not a regular file
 * (a symlink counts as its target: a FIFO would block whoever opens it, /dev/zero never ends).
 * `what` says what it is for.
 */
export function requireFile(path: string, what: string): void {
  if (!existsSync(path)) throw new MempoError('ERR_MODEL_FILE_MISSING', `Missing ${what}: ${path} does not exist`);
  const st = statSync(path);
  if (!st.isFile()) throw notRegular(path, what, st);
}

export function requireDirectory(path: string, what: string): void {
  if (!existsSync(path) || !statSync(path).isDirectory()) {
    throw new MempoError('ERR_MODEL_FILE_MISSING', `Missing ${what}: directory ${path} does not exist`);
  }
}

/** Read at most this much per call (one read(2) is capped near 2 GiB on Linux anyway). */
const READ_CHUNK = 64 << 20;

/**
 * The bytes of the regular file `path`, read on libuv's thread pool (the event loop keeps
 * answering). Opened with O_NONBLOCK and checked with fstat on the descriptor before a byte is
 * read, so a FIFO neither blocks the open nor is read, a device (a symlink to /dev/zero) is refused
 * instead of read without end, and a file over `maxBytes` is refused by its size. A file that
 * changes size while it is read is an error too. Errors are MempoError naming `what` and `path`.
 */
export async function readRegularFile(path: string, what: string, maxBytes: number): Promise<Buffer> {
  let fh;
  try {
    fh = await open(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'ENOENT') throw new MempoError('ERR_MODEL_FILE_MISSING', `Missing ${what}: ${path} does not exist`);
    throw new MempoError('ERR_MODEL_IO', `Could not open ${what} ${path}: ${e.message}`);
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw notRegular(path, what, st);
    if (st.size > maxBytes) throw new MempoError('ERR_MODEL_IO', `The ${what} ${path} has ${st.size} bytes, more than the ${maxBytes} a ${what} may have`);
    const buf = Buffer.allocUnsafe(st.size);
    let got = 0;
    while (got < st.size) {
      const { bytesRead } = await fh.read(buf, got, Math.min(READ_CHUNK, st.size - got), got);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    const { bytesRead: more } = await fh.read(Buffer.alloc(1), 0, 1, got);
    if (got !== st.size || more !== 0) throw new MempoError('ERR_MODEL_IO', `The ${what} ${path} changed size while it was read (${st.size} bytes at open)`);
    return buf;
  } finally {
    await fh.close();
  }
}

/** Reads and parses a JSON file; a missing or malformed file is an error naming the path. */
export function readJson(path: string, what: string): Record<string, unknown> {
  requireFile(path, what);
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new MempoError('ERR_MODEL_CONFIG', `Could not parse ${what} ${path}: ${(err as Error).message}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new MempoError('ERR_MODEL_CONFIG', `Expected a JSON object in ${what} ${path}`);
  }
  return parsed as Record<string, unknown>;
}
