/**
 * The run directory of `mempo train` (docs/algorithm.md §9): metrics.jsonl (one whole line per
 * step), checkpoints/step-N/ (a model directory + the learner's optimiser and RNG state, written
 * by the learner, and trainer.json, written last: a checkpoint without it is incomplete and never
 * resumed from), weights/ (the newest weights when the step is not a checkpoint).
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from '../io/write';
import { MempoError } from '../errors';
import type { StepMetrics } from './metrics';

export const TRAINER_STATE = 'trainer.json';

export interface TrainerState {
  step: number;
  seed: number;
  /** What the run was started with (resume refuses different settings). */
  settings: string;
}

export function checkpointDir(out: string, step: number): string {
  return join(out, 'checkpoints', `step-${step}`);
}

/** Marks a checkpoint complete (after the learner wrote it). */
export function finishCheckpoint(dir: string, state: TrainerState): void {
  writeFileAtomic(join(dir, TRAINER_STATE), `${JSON.stringify(state, null, 2)}\n`);
}

/** Complete checkpoints, oldest first. */
export function checkpoints(out: string): Array<{ step: number; dir: string; state: TrainerState }> {
  const root = join(out, 'checkpoints');
  if (!existsSync(root)) return [];
  const found: Array<{ step: number; dir: string; state: TrainerState }> = [];
  for (const name of readdirSync(root)) {
    const m = /^step-(\d+)$/.exec(name);
    const dir = join(root, name);
    if (m === null || !statSync(dir).isDirectory() || !existsSync(join(dir, TRAINER_STATE))) continue;
    let state: TrainerState;
    try {
      state = JSON.parse(readFileSync(join(dir, TRAINER_STATE), 'utf8')) as TrainerState;
    } catch (e) {
      throw new MempoError('ERR_RESUME', `${join(dir, TRAINER_STATE)}: not valid JSON (${(e as Error).message})`);
    }
    if (state.step !== Number(m[1])) throw new MempoError('ERR_RESUME', `${join(dir, TRAINER_STATE)}: step ${state.step} in a directory named ${name}`);
    found.push({ step: state.step, dir, state });
  }
  return found.sort((a, b) => a.step - b.step);
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

export function ensureRunDir(out: string): void {
  mkdirSync(join(out, 'checkpoints'), { recursive: true });
}
