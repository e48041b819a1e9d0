/**
 * JSONL input with per-line validation: a malformed line is rejected with the file, the line
 * number and the field named ("questions.jsonl:12: field "golds": ...").
 */
import { readFileSync } from 'node:fs';
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

export interface ReadJsonlOptions {
  /** Bytes that are not UTF-8 are an error naming the line (else each becomes U+FFFD). */
  strictUtf8?: boolean;
}

/** Reads and validates a JSONL file; a missing or unreadable file is an error naming it. */
export function readJsonl<S extends z.ZodType>(file: string, schema: S, options: ReadJsonlOptions = {}): Array<z.output<S>> {
  return readJsonlLines(file, schema, options).map((l) => l.value);
}

/** The text of a UTF-8 file; with `strict`, invalid bytes are an error naming the line and byte. */
export function readUtf8(file: string, strict: boolean): string {
  let bytes: Buffer;
  try {
    bytes = readFileSync(file);
  } catch (err) {
    throw new MempoError('ERR_INPUT_FILE', `Cannot read ${file}: ${(err as Error).message}`);
  }
  if (!strict) return bytes.toString('utf8');
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    const at = Math.max(0, firstInvalidUtf8(bytes));
    const lineStart = at === 0 ? 0 : bytes.lastIndexOf(0x0a, at - 1) + 1;
    let line = 1;
    for (let i = bytes.indexOf(0x0a); i >= 0 && i < at; i = bytes.indexOf(0x0a, i + 1)) line++;
    throw new MempoError('ERR_INVALID_INPUT', `${file}:${line}: not valid UTF-8 (byte ${at - lineStart + 1} of the line is 0x${bytes[at]!.toString(16).padStart(2, '0')})`);
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
export function readJsonlLines<S extends z.ZodType>(file: string, schema: S, options: ReadJsonlOptions = {}): Array<{ line: number; value: z.output<S> }> {
  return parseJsonlLines(readUtf8(file, options.strictUtf8 === true), schema, file);
}
