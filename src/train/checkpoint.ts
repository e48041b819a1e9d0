/**
 * The run directory of `mempo train` (docs/algorithm.md §9, docs/train.md): metrics.jsonl (one
 * whole line per step), checkpoints/step-N/ (a model directory + the learner's optimiser and RNG
 * state, written by the learner, and trainer.json, written last: a checkpoint without it is
 * incomplete and never resumed from), weights/ (the newest weights when the step is not a
 * checkpoint). trainer.json records what identifies the run (`trainSettings`) and the size of
 * every file of the checkpoint; `resumePoint` checks both, and the manifest's sha256 sums, before
 * a run continues.
 */
import { closeSync, constants, existsSync, fstatSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, renameSync, rmSync, statSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { removeStaleTemps, writeFileAtomic } from '../io/write';
import { diffText, settingsDiff } from '../io/run-dir';
import { MempoError } from '../errors';
import type { Question } from '../contracts';
import type { PipelineOptions } from '../options';
import type { StepMetrics } from './metrics';
import type { TrainOptions } from './options';

export const TRAINER_STATE = 'trainer.json';
export const TRAIN_REPORT = 'train-report.html';
const MANIFEST = 'manifest.json';

export interface TrainerState {
  step: number;
  seed: number;
  /** What identifies the run (`trainSettings`); resume refuses other settings. */
  settings: Record<string, unknown>;
  /** Bytes of each file of the checkpoint when it was marked complete. */
  files: Record<string, number>;
}

/** A complete checkpoint `resumePoint` chose: its files verify and its settings are this run's. */
export interface ResumePoint {
  step: number;
  dir: string;
  state: TrainerState;
}

export function checkpointDir(out: string, step: number): string {
  return join(out, 'checkpoints', `step-${step}`);
}

/** sha256 over each question's id, text and golds, in order: the data itself, whatever file or slice it came from. */
function questionsDigest(qs: readonly Question[]): string {
  const h = createHash('sha256');
  for (const q of qs) h.update(`${JSON.stringify([q.id, q.question, q.golds])}\n`);
  return h.digest('hex');
}

/**
 * What a resumed run must share with the run it continues (every setting but `steps`): the
 * pipeline and training options, digests of the training questions in run order and of the dev
 * slice, and what the caller adds to name where they came from (`identity`: the CLI records the
 * questions file, --offset/--limit, model, corpus or retriever and eval file).
 */
export function trainSettings(pipeline: PipelineOptions, train: TrainOptions, order: readonly Question[], dev: readonly Question[], identity: Record<string, unknown> = {}): Record<string, unknown> {
  const { steps: _steps, ...rest } = train;
  // Through JSON: what is compared on resume is what trainer.json can hold.
  return JSON.parse(JSON.stringify({ ...identity, pipeline, train: rest, data: { questions: questionsDigest(order), dev: questionsDigest(dev) } })) as Record<string, unknown>;
}

/** Marks a checkpoint complete (after the learner wrote it), recording the size of each of its files. */
export function finishCheckpoint(dir: string, state: Omit<TrainerState, 'files'>): void {
  const files: Record<string, number> = {};
  for (const name of readdirSync(dir).sort()) {
    if (name === TRAINER_STATE || name.startsWith(`.${TRAINER_STATE}.`)) continue;
    const st = statSync(join(dir, name));
    if (st.isFile()) files[name] = st.size;
  }
  writeFileAtomic(join(dir, TRAINER_STATE), `${JSON.stringify({ ...state, files }, null, 2)}\n`);
}

/** checkpoints/step-N directories holding a trainer.json, oldest first (not yet read). */
export function completeCheckpointDirs(out: string): Array<{ step: number; dir: string }> {
  const root = join(out, 'checkpoints');
  if (!existsSync(root)) return [];
  const found: Array<{ step: number; dir: string }> = [];
  for (const name of readdirSync(root)) {
    const m = /^step-(\d+)$/.exec(name);
    const dir = join(root, name);
    if (m === null || !statSync(dir).isDirectory() || !existsSync(join(dir, TRAINER_STATE))) continue;
    found.push({ step: Number(m[1]), dir });
  }
  return found.sort((a, b) => a.step - b.step);
}

function readTrainerState(dir: string, step: number): TrainerState {
  const file = join(dir, TRAINER_STATE);
  let state: TrainerState;
  try {
    state = JSON.parse(readFileSync(file, 'utf8')) as TrainerState;
  } catch (e) {
    throw new MempoError('ERR_RESUME', `${file}: not valid JSON (${(e as Error).message})`);
  }
  if (state === null || typeof state !== 'object' || state.step !== step) throw new MempoError('ERR_RESUME', `${file}: step ${state?.step} in a directory named step-${step}`);
  // Earlier versions stored the settings as a string, no file sizes, and the learner's state as a pickle (learner.pt), which is never loaded.
  const isRecord = (v: unknown) => v !== null && typeof v === 'object' && !Array.isArray(v);
  if (!isRecord(state.settings) || !isRecord(state.files)) {
    throw new MempoError('ERR_RESUME', `${file}: written by an earlier mempo, whose learner state is a pickle (learner.pt), never loaded (docs/learner.md)`);
  }
  return state;
}

/** Complete checkpoints, oldest first. */
export function checkpoints(out: string): Array<{ step: number; dir: string; state: TrainerState }> {
  return completeCheckpointDirs(out).map((c) => ({ ...c, state: readTrainerState(c.dir, c.step) }));
}

/** Deletes all but the newest `keep` complete checkpoints, and incomplete ones older than the newest. */
export function pruneCheckpoints(out: string, keep: number): void {
  const all = checkpoints(out);
  for (const c of all.slice(0, Math.max(0, all.length - keep))) rmSync(c.dir, { recursive: true, force: true });
  const newest = all.at(-1)?.step ?? 0;
  const root = join(out, 'checkpoints');
  for (const name of existsSync(root) ? readdirSync(root) : []) {
    const m = /^step-(\d+)$/.exec(name);
    if (m !== null && Number(m[1]) < newest && !existsSync(join(root, name, TRAINER_STATE))) rmSync(join(root, name), { recursive: true, force: true });
  }
}

/** sha256 and size of a regular file, read in blocks; opened non-blocking so that a FIFO cannot hang the check. */
function fileSum(path: string): { sha256: string; bytes: number } | string {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ENOENT' ? `${path} is missing` : `${path}: ${(e as Error).message}`;
  }
  try {
    if (!fstatSync(fd).isFile()) return `${path} is not a regular file`;
    const h = createHash('sha256');
    const buf = Buffer.allocUnsafe(1 << 20);
    let bytes = 0;
    for (let n; (n = readSync(fd, buf, 0, buf.length, bytes)) > 0; bytes += n) h.update(buf.subarray(0, n));
    return { sha256: h.digest('hex'), bytes };
  } finally {
    closeSync(fd);
  }
}

function fileSize(path: string): number | string {
  try {
    const st = statSync(path);
    return st.isFile() ? st.size : `${path} is not a regular file`;
  } catch {
    return `${path} is missing`;
  }
}

/** The checkpoint's manifest.json `files` (name → sha256, bytes), or a problem naming it; null without a manifest. */
function readManifest(dir: string): Map<string, { sha256?: unknown; bytes?: unknown }> | string | null {
  const path = join(dir, MANIFEST);
  if (!existsSync(path)) return null;
  let files: unknown;
  try {
    files = (JSON.parse(readFileSync(path, 'utf8')) as { files?: unknown } | null)?.files;
  } catch (e) {
    return `${path}: not valid JSON (${(e as Error).message})`;
  }
  if (files === null || typeof files !== 'object' || Array.isArray(files)) return `${path} has no "files" object`;
  return new Map(Object.entries(files as Record<string, { sha256?: unknown; bytes?: unknown }>));
}

/**
 * What rules the checkpoint in `dir` out, each problem naming its file (none: it verifies): a
 * file trainer.json recorded that is missing or of another size, a file manifest.json lists whose
 * size or sha256 differs.
 */
export function verifyCheckpoint(dir: string, state: TrainerState): string[] {
  const problems: string[] = [];
  const named = new Set<string>();
  for (const [name, bytes] of Object.entries(state.files)) {
    const size = fileSize(join(dir, name));
    if (size === bytes) continue;
    problems.push(typeof size === 'string' ? size : `${join(dir, name)} is ${size} bytes, ${TRAINER_STATE} recorded ${bytes}`);
    named.add(name);
  }
  const manifest = readManifest(dir);
  if (typeof manifest === 'string') problems.push(manifest);
  for (const [name, entry] of manifest instanceof Map ? manifest : []) {
    const path = join(dir, name);
    if (name.length === 0 || /[\\/]/.test(name) || name === '..' || name === '.') {
      problems.push(`${join(dir, MANIFEST)} lists ${JSON.stringify(name)}, which is not a file name`);
      continue;
    }
    if (named.has(name)) continue; // already named: missing or of another size
    const sum = fileSum(path);
    if (typeof sum === 'string') problems.push(sum);
    else if (typeof entry?.bytes === 'number' && sum.bytes !== entry.bytes) problems.push(`${path} is ${sum.bytes} bytes, ${MANIFEST} says ${entry.bytes}`);
    else if (typeof entry?.sha256 === 'string' && sum.sha256 !== entry.sha256) problems.push(`${path}: sha256 ${sum.sha256.slice(0, 12)}… differs from ${MANIFEST}'s ${entry.sha256.slice(0, 12)}…`);
  }
  return problems;
}

/** Throws when `settings` differ from those the checkpoint recorded, naming each with both values. */
function checkSettings(dir: string, state: TrainerState, settings: Record<string, unknown>, notice: (m: string) => void): void {
  const file = join(dir, TRAINER_STATE);
  const diffs = settingsDiff(state.settings, settings);
  const differ = diffs.filter((d) => d.recorded !== undefined);
  if (differ.length > 0) {
    throw new MempoError('ERR_RESUME', `--resume: ${differ.length === 1 ? 'a setting differs' : `${differ.length} settings differ`} from the run in ${file} (only --steps may change on --resume): ${diffText(differ)}; pass the same settings, or --force without --resume to start over`);
  }
  const unrecorded = diffs.filter((d) => d.recorded === undefined);
  if (unrecorded.length > 0) notice(`${file} does not record ${unrecorded.map((d) => d.path).join(', ')} (a setting this run has that the checkpoint's mempo did not record): not checked on --resume`);
}

/** A free name beside `dir` for a checkpoint that failed to verify (never deleted: a resumed run would overwrite it). */
function asideName(dir: string): string {
  for (let i = 0; ; i++) {
    const name = `${dir}.corrupt${i === 0 ? '' : `-${i}`}`;
    if (!existsSync(name)) return name;
  }
}

/**
 * The checkpoint `--resume` continues from: the newest complete one whose files verify
 * (`verifyCheckpoint`), after which its settings must equal `settings` (trainSettings). A newer
 * one that does not verify is named in a notice and moved aside to `checkpoints/step-N.corrupt`
 * (its steps are redone; nothing is deleted). No complete checkpoint, none that verifies, or
 * other settings: ERR_RESUME naming the directory and files, before anything is changed.
 * The caller holds the run directory (src/io/run-lock.ts).
 */
export function resumePoint(out: string, settings: Record<string, unknown>, notice: (m: string) => void): ResumePoint {
  const found = completeCheckpointDirs(out);
  if (found.length === 0) {
    const held = runContents(out);
    throw new MempoError('ERR_RESUME', `--resume: no complete checkpoint exists in ${out} (a checkpoints/step-N/ with ${TRAINER_STATE})${held.length > 0 ? `; it holds ${held.join(', ')}` : ''}: nothing to continue from; pass --force to start over`);
  }
  const skipped: Array<{ dir: string; problems: string[] }> = [];
  for (const c of [...found].reverse()) {
    let state: TrainerState;
    try {
      state = readTrainerState(c.dir, c.step);
    } catch (e) {
      skipped.push({ dir: c.dir, problems: [(e as Error).message] });
      continue;
    }
    const problems = verifyCheckpoint(c.dir, state);
    if (problems.length > 0) {
      skipped.push({ dir: c.dir, problems });
      continue;
    }
    checkSettings(c.dir, state, settings, notice);
    for (const s of skipped) {
      const aside = asideName(s.dir);
      renameSync(s.dir, aside);
      notice(`${s.dir} does not verify (${s.problems.join('; ')}); moved to ${aside}`);
    }
    if (skipped.length > 0) notice(`resuming from step ${c.step} (${c.dir}), the newest complete checkpoint that verifies; the steps after it are redone`);
    return { step: c.step, dir: c.dir, state };
  }
  throw new MempoError('ERR_RESUME', `--resume: no complete checkpoint in ${out} verifies: ${skipped.map((s) => `${s.dir}: ${s.problems.join('; ')}`).join('; ')}`);
}

export function metricsPath(out: string): string {
  return join(out, 'metrics.jsonl');
}

/** The whole lines of metrics.jsonl up to `step` (a resumed run rewrites the file to them; a cut last line is dropped). */
export function readMetrics(out: string, upTo = Infinity): StepMetrics[] {
  const file = metricsPath(out);
  if (!existsSync(file)) return [];
  const lines = readFileSync(file, 'utf8').split('\n');
  const out_: StepMetrics[] = [];
  lines.forEach((l, i) => {
    if (l.trim() === '') return;
    let m: StepMetrics;
    try {
      m = JSON.parse(l) as StepMetrics;
    } catch (e) {
      if (i === lines.length - 1) return; // a line cut by a kill: the step is redone
      throw new MempoError('ERR_RESUME', `${file} line ${i + 1}: not valid JSON (${(e as Error).message})`);
    }
    if (m.step <= upTo) out_.push(m);
  });
  return out_;
}

/** The files of `out` a training run wrote, in words ("metrics.jsonl (steps 0–3)", "checkpoints/step-2", …); none: no run. */
export function runContents(out: string): string[] {
  const held: string[] = [];
  if (existsSync(metricsPath(out))) {
    let steps = '';
    try {
      const ms = readMetrics(out);
      steps = ms.length === 0 ? ' (no whole line)' : ` (steps ${ms[0]!.step}–${ms.at(-1)!.step})`;
    } catch {
      // named as it is
    }
    held.push(`metrics.jsonl${steps}`);
  }
  const root = join(out, 'checkpoints');
  const steps = existsSync(root) ? readdirSync(root).map((n) => /^step-(\d+)$/.exec(n)).filter((m) => m !== null).map((m) => Number(m[1])).sort((a, b) => a - b) : [];
  for (const s of steps) held.push(`checkpoints/step-${s}${existsSync(join(checkpointDir(out, s), TRAINER_STATE)) ? '' : ' (incomplete)'}`);
  if (existsSync(join(out, 'weights'))) held.push('weights/');
  if (existsSync(join(out, TRAIN_REPORT))) held.push(TRAIN_REPORT);
  return held;
}

/**
 * Removes the outputs of an earlier training run in `out` (--force): metrics.jsonl, every
 * checkpoints/step-N, weights/ and the report; anything else there is left alone. Returns what
 * was removed, in words.
 */
export function removeTrainingRun(out: string): string[] {
  const held = runContents(out);
  rmSync(metricsPath(out), { force: true });
  const root = join(out, 'checkpoints');
  for (const n of existsSync(root) ? readdirSync(root) : []) if (/^step-\d+$/.test(n)) rmSync(join(root, n), { recursive: true, force: true });
  rmSync(join(out, 'weights'), { recursive: true, force: true });
  rmSync(join(out, TRAIN_REPORT), { force: true });
  return held;
}

/**
 * Removes what a save killed midway left in `out`: the learner's temp directories
 * (`checkpoints/step-N.tmp-PID`, `weights.tmp-PID`, and `.old-PID`, the directory a save was
 * replacing) and the temp files of atomic writes (`.metrics.jsonl.PID.tmp`, …). Only these exact
 * names; the caller holds the directory's lock, so no run of ours is writing them. Returns the
 * paths removed, relative to `out`.
 */
export function removeSaveTemps(out: string): string[] {
  const removed: string[] = removeStaleTemps(out, ['metrics.jsonl', TRAIN_REPORT]);
  const rm = (rel: string) => {
    rmSync(join(out, rel), { recursive: true, force: true });
    removed.push(rel);
  };
  for (const n of existsSync(out) ? readdirSync(out).sort() : []) if (/^weights\.(tmp|old)-\d+$/.test(n)) rm(n);
  const root = join(out, 'checkpoints');
  for (const n of existsSync(root) ? readdirSync(root).sort() : []) {
    if (/^step-\d+\.(tmp|old)-\d+$/.test(n)) rm(`checkpoints/${n}`);
    else if (/^step-\d+$/.test(n)) for (const t of removeStaleTemps(join(root, n), [TRAINER_STATE])) removed.push(`checkpoints/${n}/${t}`);
  }
  return removed;
}

export function ensureRunDir(out: string): void {
  mkdirSync(join(out, 'checkpoints'), { recursive: true });
}
