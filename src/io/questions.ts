/** Question input (JSONL: `{ id, question, golds }`, optional `hops`, `objectives`, `kind`, and a page question's `pageHop`, `pageChunk`, `chains`). */
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
  /** A page question (the embedded world's `*-pages.jsonl`): the 0-based hop of `chains[0]` whose fact is on a page only ... */
  pageHop: z.number().int().nonnegative().optional(),
  /** ... and the 1-based chunk of that page which states it (the eval's gold-in-mem figure, docs/rollout.md). */
  pageChunk: z.number().int().positive().optional(),
  chains: z.array(z.array(z.object({ subject: z.string().min(1), relation: z.string(), object: z.string().min(1) }))).optional(),
}).superRefine((q, ctx) => {
  if (q.pageHop === undefined && q.pageChunk === undefined) return;
  if (q.pageHop === undefined || q.pageChunk === undefined) {
    ctx.addIssue({ code: 'custom', path: [q.pageHop === undefined ? 'pageHop' : 'pageChunk'], message: 'a page question gives both pageHop and pageChunk' });
  } else if (q.chains?.[0]?.[q.pageHop] === undefined) {
    ctx.addIssue({ code: 'custom', path: ['pageHop'], message: `chains[0] has no hop ${q.pageHop} (it has ${q.chains?.[0]?.length ?? 0})` });
  }
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
  const lines = readJsonlLines(file, questionSchema, 'questions file');
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

/**
 * Reads several questions files as one list: the files interleaved in proportion to their sizes,
 * each in its own order (question k of a file of n sits at (k + ½) / n of the way through the
 * list, ties to the earlier file), so any prefix or `--limit` slice mixes them as the whole does.
 * An id that two files share is an error naming both.
 */
export function readQuestionFiles(files: readonly string[]): Question[] {
  if (files.length === 1) return readQuestions(files[0]!);
  const lists = files.map((f) => readQuestions(f));
  const from = new Map<string, string>();
  lists.forEach((list, j) => {
    for (const q of list) {
      const other = from.get(q.id);
      if (other !== undefined) throw new MempoError('ERR_INVALID_INPUT', `${files[j]!}: field "id": ${JSON.stringify(q.id)} is also a question of ${other}`);
      from.set(q.id, files[j]!);
    }
  });
  // (2k + 1) / 2n compared as integers: no rounding decides a tie.
  const keyed = lists.flatMap((list, j) => list.map((q, k) => ({ q, j, num: 2 * k + 1, den: 2 * list.length })));
  keyed.sort((a, b) => a.num * b.den - b.num * a.den || a.j - b.j);
  return keyed.map((x) => x.q);
}
