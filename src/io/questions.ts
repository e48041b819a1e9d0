/** Question input (JSONL: `{ id, question, golds }`, optional `hops`, `objectives`). */
import { z } from 'zod';
import { MempoError } from '../errors';
import { readJsonlLines } from './jsonl';
import type { Question } from '../contracts';

export type { Question };

export const questionSchema = z.object({
  id: z.preprocess((v) => (typeof v === 'number' && Number.isInteger(v) ? String(v) : v), z.string().min(1)),
  question: z.string().min(1),
  golds: z.preprocess((v) => (typeof v === 'string' ? [v] : v), z.array(z.string().min(1)).min(1)),
  hops: z.number().int().positive().optional(),
  objectives: z.number().int().positive().optional(),
  kind: z.string().optional(),
});

export type QuestionInput = z.input<typeof questionSchema>;

/** Validates in-memory questions (the `where` names them in errors). */
export function checkQuestions(items: readonly unknown[], where = 'questions'): Question[] {
  const out: Question[] = [];
  const seen = new Map<string, number>();
  items.forEach((item, i) => {
    const r = questionSchema.safeParse(item);
    if (!r.success) {
      const issue = r.error.issues[0]!;
      throw new MempoError('ERR_INVALID_INPUT', `${where}[${i}]: field "${issue.path.map(String).join('.')}": ${issue.message}`);
    }
    const prev = seen.get(r.data.id);
    if (prev !== undefined) throw new MempoError('ERR_INVALID_INPUT', `${where}[${i}]: field "id": ${JSON.stringify(r.data.id)} repeats ${where}[${prev}]`);
    seen.set(r.data.id, i);
    out.push(r.data);
  });
  return out;
}

/** Reads a questions JSONL file; a malformed line (or bytes that are not UTF-8) is an error naming the file, line and field. */
export function readQuestions(file: string): Question[] {
  const lines = readJsonlLines(file, questionSchema, { strictUtf8: true });
  const seen = new Map<string, number>();
  for (const { line, value } of lines) {
    const prev = seen.get(value.id);
    if (prev !== undefined) {
      throw new MempoError('ERR_INVALID_INPUT', `${file}:${line}: field "id": ${JSON.stringify(value.id)} repeats line ${prev}`);
    }
    seen.set(value.id, line);
  }
  return lines.map((l) => l.value);
}
