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

/** Reads and validates a JSONL file; a missing or unreadable file is an error naming it. */
export function readJsonl<S extends z.ZodType>(file: string, schema: S): Array<z.output<S>> {
  return readJsonlLines(file, schema).map((l) => l.value);
}

/** Like readJsonl, with the 1-based line number of each value. */
export function readJsonlLines<S extends z.ZodType>(file: string, schema: S): Array<{ line: number; value: z.output<S> }> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new MempoError('ERR_INPUT_FILE', `Cannot read ${file}: ${(err as Error).message}`);
  }
  return parseJsonlLines(text, schema, file);
}
