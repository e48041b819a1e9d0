/**
 * JSONL input with per-line validation: a malformed line is rejected with the file, the line
 * number and the field named ("questions.jsonl:12: field "golds": ..."). Every input file
 * (--questions, --corpus, --pages) is read by `readInputFile`: regular files only, size-capped,
 * strict UTF-8.
 */
import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from 'node:fs';
import type { z } from 'zod';
import { MempoError } from '../errors';

/** "field "a.b[0]"" from a zod issue path (or "line" for the whole line). */
export function issueWhere(path: readonly PropertyKey[]): string {
  if (path.length === 0) return 'the line';
  let s = '';
  for (const p of path) s += typeof p === 'number' ? `[${p}]` : s.length === 0 ? String(p) : `.${String(p)}`;
  return `field "${s}"`;
}

/** One message for a zod error: the first issue, with its path. */
export function zodMessage(error: z.ZodError): string {
  const issue = error.issues[0];
  if (issue === undefined) return 'invalid value';
  return `${issueWhere(issue.path)}: ${issue.message}`;
}

/** Parses every non-empty line of `text` with `schema`; `file` names the source in errors. */
export function parseJsonl<S extends z.ZodType>(text: string, schema: S, file: string): Array<z.output<S>> {
  return parseJsonlLines(text, schema, file).map((l) => l.value);
}

/** Like parseJsonl, with the 1-based line number of each value. */
export function parseJsonlLines<S extends z.ZodType>(text: string, schema: S, file: string): Array<{ line: number; value: z.output<S> }> {
  const out: Array<{ line: number; value: z.output<S> }> = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line.length === 0) continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (err) {
      throw new MempoError('ERR_INVALID_INPUT', `${file}:${i + 1}: not valid JSON (${(err as Error).message})`);
    }
    const r = schema.safeParse(value);
    if (!r.success) throw new MempoError('ERR_INVALID_INPUT', `${file}:${i + 1}: ${zodMessage(r.error)}`);
    out.push({ line: i + 1, value: r.data as z.output<S> });
  }
  return out;
}

/** Largest input file read (--questions, --corpus, --pages): 500 MiB, under V8's longest string (2^29 - 24 characters). */
export const MAX_INPUT_FILE_BYTES = 500 * (1 << 20);

/** Reads and validates a JSONL file (readInputFile's rules); a missing or unreadable file is an error naming it. */
export function readJsonl<S extends z.ZodType>(file: string, schema: S, what = 'input file'): Array<z.output<S>> {
  return readJsonlLines(file, schema, what).map((l) => l.value);
}

function kindOf(st: Stats): string {
  if (st.isDirectory()) return 'a directory';
  if (st.isFIFO()) return 'a FIFO (named pipe)';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  if (st.isSocket()) return 'a socket';
  return 'not a regular file';
}

/**
 * The text of the input file `path` (`what` names it in errors: "pages file", "corpus", ...), as
 * `mempo serve` reads model.onnx: opened with O_NONBLOCK and checked with fstat on the descriptor
 * before a byte is read, so a FIFO neither blocks the open (a rollout would then ignore Ctrl-C)
 * nor is read, a device (a symlink to /dev/zero) or a directory is refused at once, and a file
 * over `maxBytes` is refused by its size. Bytes that are not UTF-8 are an error naming the line
 * and byte (never replaced). Every error is ERR_INPUT_FILE naming the file.
 */
export function readInputFile(path: string, what: string, maxBytes = MAX_INPUT_FILE_BYTES): string {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
  } catch (err) {
    throw new MempoError('ERR_INPUT_FILE', `Cannot read ${path}: ${(err as Error).message}`);
  }
  let bytes: Buffer;
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new MempoError('ERR_INPUT_FILE', `Cannot read ${path}: the ${what} is ${kindOf(st)}, not a regular file`);
    if (st.size > maxBytes) throw new MempoError('ERR_INPUT_FILE', `Cannot read ${path}: the ${what} has ${st.size} bytes, more than the ${maxBytes} an input file may have`);
    bytes = Buffer.allocUnsafe(st.size);
    let got = 0;
    for (let n; got < st.size && (n = readSync(fd, bytes, got, st.size - got, got)) > 0; ) got += n;
    // Grown or shrunk while read: refused rather than cut or padded with stale bytes.
    if (got !== st.size || readSync(fd, Buffer.alloc(1), 0, 1, got) !== 0) {
      throw new MempoError('ERR_INPUT_FILE', `Cannot read ${path}: the ${what} changed size while it was read (${st.size} bytes at open)`);
    }
  } catch (err) {
    if (err instanceof MempoError) throw err;
    throw new MempoError('ERR_INPUT_FILE', `Cannot read ${path}: ${(err as Error).message}`);
  } finally {
    closeSync(fd);
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    const at = Math.max(0, firstInvalidUtf8(bytes));
    const lineStart = at === 0 ? 0 : bytes.lastIndexOf(0x0a, at - 1) + 1;
    let line = 1;
    for (let i = bytes.indexOf(0x0a); i >= 0 && i < at; i = bytes.indexOf(0x0a, i + 1)) line++;
    throw new MempoError('ERR_INPUT_FILE', `${path}:${line}: not valid UTF-8 (byte ${at - lineStart + 1} of the line is 0x${bytes[at]!.toString(16).padStart(2, '0')})`);
  }
}

/** Offset of the first byte of `b` that starts no well-formed UTF-8 sequence (RFC 3629), or -1. */
export function firstInvalidUtf8(b: Uint8Array): number {
  let i = 0;
  while (i < b.length) {
    const c = b[i]!;
    const n = c < 0x80 ? 0 : c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : -1;
    if (n < 0 || i + n >= b.length) return i;
    const c1 = b[i + 1] ?? 0;
    // No overlong forms, surrogates or code points above U+10FFFF.
    if ((c === 0xe0 && c1 < 0xa0) || (c === 0xed && c1 > 0x9f) || (c === 0xf0 && c1 < 0x90) || (c === 0xf4 && c1 > 0x8f)) return i;
    for (let k = 1; k <= n; k++) if ((b[i + k]! & 0xc0) !== 0x80) return i;
    i += n + 1;
  }
  return -1;
}

/** Like readJsonl, with the 1-based line number of each value. */
export function readJsonlLines<S extends z.ZodType>(file: string, schema: S, what = 'input file'): Array<{ line: number; value: z.output<S> }> {
  return parseJsonlLines(readInputFile(file, what), schema, file);
}
