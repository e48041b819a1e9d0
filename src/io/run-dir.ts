/**
 * Output files of a run: batch.jsonl written line by line and flushed (an interrupted run leaves
 * only whole lines), JSON/HTML written atomically (temp file + rename, src/io/write.ts), and
 * resume: reading back which groups are complete, refusing any line this run did not write.
 */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { MempoError } from '../errors';
import { zodMessage } from './jsonl';
import { batchRecordSchema } from './batch-record';
import { removeStaleTemps, writeFileAtomic } from './write';
import type { BatchRecord, Question } from '../contracts';

export { JsonlWriter, writeFileAtomic, writeAll, type WriteFn, type WriteOptions } from './write';

/** The files a run writes in its directory. */
export const RUN_FILES = ['batch.jsonl', 'run.json', 'summary.json', 'eval.json', 'report.html'] as const;

/** Outputs describing a finished batch.jsonl, stale as soon as a new one starts. */
const DERIVED_FILES = ['summary.json', 'eval.json', 'report.html'] as const;

/**
 * Before a run writes in `dir`: removes the temp files a killed run left and, unless it resumes,
 * the summary, eval table and report of an earlier run (they would sit beside a batch they do
 * not describe). Returns the names removed.
 */
export function clearRunDir(dir: string, resume: boolean): string[] {
  const removed = removeStaleTemps(dir, RUN_FILES);
  if (!resume) {
    for (const f of DERIVED_FILES) {
      if (!existsSync(join(dir, f))) continue;
      rmSync(join(dir, f), { force: true });
      removed.push(f);
    }
  }
  return removed;
}

/** One setting that differs between a recorded run and this one; `recorded` / `now` undefined: absent on that side. */
export interface SettingDiff {
  /** Dotted path of the setting (`limit`, `pipeline.rollout.groupSize`). */
  path: string;
  recorded: unknown;
  now: unknown;
  /** "path: recorded → now", the values as JSON ("(none)" when absent). */
  text: string;
}

function leaves(value: unknown, path: string, into: Map<string, unknown>): Map<string, unknown> {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) leaves(v, path === '' ? k : `${path}.${k}`, into);
  } else if (value !== undefined) {
    into.set(path, value);
  }
  return into;
}

/** "a: 1 → 2; b: …", at most `max` of them (then how many more). */
export function diffText(diffs: readonly SettingDiff[], max = 12): string {
  const shown = diffs.slice(0, max).map((d) => d.text).join('; ');
  return diffs.length > max ? `${shown}; … (${diffs.length - max} more)` : shown;
}

/** The settings (leaves of two JSON objects) that differ between a run's record and this run, in this run's order. */
export function settingsDiff(recorded: unknown, now: unknown): SettingDiff[] {
  const a = leaves(recorded, '', new Map());
  const b = leaves(now, '', new Map());
  const show = (v: unknown) => (v === undefined ? '(none)' : JSON.stringify(v));
  const diffs: SettingDiff[] = [];
  for (const path of new Set([...b.keys(), ...a.keys()])) {
    const [x, y] = [a.get(path), b.get(path)];
    if (JSON.stringify(x) !== JSON.stringify(y)) diffs.push({ path, recorded: x, now: y, text: `${path}: ${show(x)} → ${show(y)}` });
  }
  return diffs;
}

export interface ExistingRun {
  /** Records of complete groups, in file order. */
  records: BatchRecord[];
  completeUids: Set<string>;
  /** Lines dropped: a partial last line, blank lines, records of incomplete groups and of failed groups. */
  droppedLines: number;
  /** Complete groups dropped because every sample failed (a tool or the inference server): a resumed run redoes them. */
  failedGroups: number;
}

export interface ResumeCheck {
  /** This run's questions: a line of any other question (or with another question text) is refused. */
  questions?: readonly Question[];
}

interface Line {
  line: string;
  no: number;
  rec: BatchRecord;
}

/** Parses and checks every whole line of batch.jsonl; an error names the file and line. */
function readLines(file: string, lines: readonly string[], groupSize: number, check: ResumeCheck): { kept: Line[]; blank: number } {
  const known = check.questions === undefined ? null : new Map(check.questions.map((q) => [q.id, q.question]));
  const seen = new Map<string, number>();
  const kept: Line[] = [];
  let blank = 0;
  lines.forEach((line, i) => {
    const where = `${file}:${i + 1}`;
    if (line.trim().length === 0) {
      blank++;
      return;
    }
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      throw new MempoError('ERR_RESUME', `${where}: not valid JSON; cannot resume from this file`);
    }
    const r = batchRecordSchema.safeParse(value);
    if (!r.success) throw new MempoError('ERR_RESUME', `${where}: ${zodMessage(r.error)}; not a mempo batch line, cannot resume from this file`);
    const rec = r.data;
    if (known !== null) {
      const text = known.get(rec.uid);
      if (text === undefined) throw new MempoError('ERR_RESUME', `${where}: question ${JSON.stringify(rec.uid)} is not one of this run's questions; the line is from another run`);
      if (text !== rec.question) throw new MempoError('ERR_RESUME', `${where}: question ${JSON.stringify(rec.uid)} has another text in this run's questions file; the line is from another run`);
    }
    if (rec.sample >= groupSize) throw new MempoError('ERR_RESUME', `${where}: sample ${rec.sample} of ${JSON.stringify(rec.uid)} is outside this run's group size ${groupSize}`);
    const key = `${rec.uid}\u0000${rec.sample}`;
    const prev = seen.get(key);
    if (prev !== undefined) throw new MempoError('ERR_RESUME', `${where}: sample ${rec.sample} of ${JSON.stringify(rec.uid)} repeats line ${prev}`);
    seen.set(key, i + 1);
    kept.push({ line, no: i + 1, rec });
  });
  return { kept, blank };
}

/**
 * Reads batch.jsonl of an earlier run before any work: every whole line must be a valid record
 * of this run (see `ResumeCheck`), else an error names the line. Keeps the groups with all
 * `groupSize` samples, in file order; drops a partial last line, blank lines, incomplete groups,
 * and groups whose every sample failed (nothing to learn from; the tool or server may be back),
 * and then rewrites the file (atomically) with only the kept lines so that appending continues it.
 */
export function loadForResume(file: string, groupSize: number, check: ResumeCheck = {}): ExistingRun {
  if (!existsSync(file)) return { records: [], completeUids: new Set(), droppedLines: 0, failedGroups: 0 };
  const text = readFileSync(file, 'utf8');
  const lines = text.split('\n');
  // The last element is '' after a final newline; anything else is a partial line.
  const tail = lines.pop() ?? '';
  const { kept: all, blank } = readLines(file, lines, groupSize, check);
  let dropped = blank + (tail.length > 0 ? 1 : 0);
  const byUid = new Map<string, Line[]>();
  for (const l of all) {
    let g = byUid.get(l.rec.uid);
    if (!g) byUid.set(l.rec.uid, (g = []));
    g.push(l);
  }
  const keep = new Set<string>();
  let failedGroups = 0;
  for (const [uid, g] of byUid) {
    if (g.length !== groupSize) continue;
    if (g.every((l) => l.rec.error !== null)) {
      failedGroups++;
      continue;
    }
    keep.add(uid);
  }
  const kept = all.filter((l) => keep.has(l.rec.uid));
  dropped += all.length - kept.length;
  if (dropped > 0) writeFileAtomic(file, kept.map((l) => `${l.line}\n`).join(''));
  return { records: kept.map((l) => l.rec), completeUids: keep, droppedLines: dropped, failedGroups };
}

/**
 * Puts batch.jsonl in question order, samples in order (the order an uninterrupted run writes),
 * after a resumed run appended the groups it redid; the lines are moved, never re-serialised.
 */
export function sortBatchFile(file: string, questionOrder: readonly string[]): boolean {
  if (!existsSync(file)) return false;
  const order = new Map(questionOrder.map((id, i) => [id, i]));
  const lines = readFileSync(file, 'utf8').split('\n').filter((l) => l.length > 0);
  const keyed = lines.map((line, i) => {
    const r = JSON.parse(line) as { uid: string; sample: number };
    return { line, i, q: order.get(r.uid) ?? Number.MAX_SAFE_INTEGER, s: r.sample };
  });
  keyed.sort((a, b) => a.q - b.q || a.s - b.s || a.i - b.i);
  if (keyed.every((k, i) => k.i === i)) return false;
  writeFileAtomic(file, keyed.map((k) => `${k.line}\n`).join(''));
  return true;
}
