/**
 * The run directory of `mempo rollout` / `mempo eval --out DIR` before any work: refuses to
 * overwrite without --resume / --force, clears what an earlier or killed run left, checks that a
 * resumed run is this run (same options in run.json, every batch.jsonl line one of its
 * questions), keeps the complete groups, and records this run's settings (run.json).
 * `holdRunDir` (rollout, eval and train) keeps a second run out of the directory meanwhile.
 */
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { MempoError } from '../errors';
import { clearRunDir, diffText, loadForResume, settingsDiff, writeFileAtomic } from '../io/run-dir';
import { describeHolder, lockRunDir } from '../io/run-lock';
import { EXPORT_FILES } from '../io/export';
import { agentSystemPrompt } from '../pipeline/trajectory';
import type { BatchRecord, Question } from '../contracts';
import type { RunIO, RunSettings } from './run-settings';

/** The settings of a run that must match for --resume to continue it. */
export function fingerprint(s: RunSettings): Record<string, unknown> {
  return {
    kind: s.kind,
    // One file as before (a run.json of older mempo resumes); several as the list.
    questions: s.questions.length === 1 ? resolve(s.questions[0]!) : s.questions.map((f) => resolve(f)),
    offset: s.offset,
    limit: s.limit,
    shuffle: s.shuffle,
    model: resolve(s.model),
    retriever: s.retriever ?? (s.corpus === null ? null : resolve(s.corpus)),
    ...(s.pages ? { pages: resolve(s.pages) } : {}),
    ...(s.server ? { server: { api: s.server.api, model: s.server.model } } : {}),
    // The system message the agent gets, given or mempo's own: a run.json without it (older mempo) is not checked.
    systemPrompt: agentSystemPrompt(s.options),
    options: s.options,
  };
}

/** run.json's settings; a file that does not parse is an error naming it. */
function readRunJson(runPath: string): unknown {
  try {
    return (JSON.parse(readFileSync(runPath, 'utf8')) as { settings?: unknown } | null)?.settings;
  } catch (err) {
    throw new MempoError('ERR_RESUME', `${runPath}: not valid JSON (${(err as Error).message}); cannot tell which run ${join(runPath, '..', 'batch.jsonl')} belongs to; pass --force to start over`);
  }
}

function log(io: RunIO, quiet: boolean, msg: string): void {
  if (!quiet) io.stderr.write(`${msg}\n`);
}

/** A run directory this process holds; `release()` is idempotent. */
export interface HeldRunDir {
  release(): void;
}

/**
 * Takes `out`'s lock (src/io/run-lock.ts) for `command` ("mempo train"), or throws
 * ERR_RUN_LOCKED naming the run that holds it; a stale lock of a killed run is taken over (said
 * on stderr). Held until `release()` or process exit. On SIGINT / SIGTERM the lock goes first;
 * a run's own handler (its message, exit 130) runs next, and without one the process exits as
 * the signal would have ended it.
 */
export function holdRunDir(out: string, command: string, io: RunIO, quiet: boolean): HeldRunDir {
  const lock = lockRunDir(out, command);
  if (lock.tookOver !== null) log(io, quiet, `${command}: took over ${lock.file} from ${describeHolder(lock.tookOver)}, which is no longer running`);
  const onSignal = (sig: NodeJS.Signals) => {
    lock.release();
    if (process.listenerCount(sig) === 1) process.exit(sig === 'SIGINT' ? 130 : 143);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    release() {
      process.removeListener('SIGINT', onSignal);
      process.removeListener('SIGTERM', onSignal);
      lock.release();
    },
  };
}

export function prepareRunDir(s: RunSettings, out: string, io: RunIO, questions: readonly Question[]): { previous: BatchRecord[]; skip: Set<string> } {
  const batchPath = join(out, 'batch.jsonl');
  const runPath = join(out, 'run.json');
  const fp = fingerprint(s);
  let previous: BatchRecord[] = [];
  let skip = new Set<string>();
  mkdirSync(out, { recursive: true });
  if (existsSync(batchPath) && !s.resume && !s.force) {
    throw new MempoError('ERR_RESUME', `${batchPath} already exists: pass --resume to finish that run, or --force to start over`);
  }
  if (s.resume && existsSync(batchPath) && !existsSync(runPath)) {
    throw new MempoError('ERR_RESUME', `--resume: ${batchPath} has no ${runPath} beside it, so nothing says which run wrote it; pass --force to start over`);
  }
  if (s.resume && existsSync(runPath)) {
    const diffs = settingsDiff(readRunJson(runPath), JSON.parse(JSON.stringify(fp)));
    const differ = diffs.filter((d) => d.recorded !== undefined);
    if (differ.length > 0) {
      throw new MempoError('ERR_RESUME', `--resume: the options differ from the run in ${out} (see ${runPath}): ${diffText(differ)}; pass the same options, or --force to start over`);
    }
    // A run.json of an older mempo lacks the options added since (rollout.schedule, tool.access, ...): said, not refused.
    const unrecorded = diffs.filter((d) => d.recorded === undefined);
    if (unrecorded.length > 0) log(io, s.quiet, `mempo ${s.kind}: ${runPath} does not record ${unrecorded.map((d) => d.path).join(', ')} (options its mempo did not have): not checked on --resume`);
  }
  const removed = clearRunDir(out, s.resume);
  // Exports (docs/export.md) describe a finished batch.jsonl: stale once this run starts writing it.
  for (const f of Object.values(EXPORT_FILES)) {
    if (!existsSync(join(out, f))) continue;
    rmSync(join(out, f), { force: true });
    removed.push(f);
  }
  if (removed.length > 0) log(io, s.quiet, `mempo ${s.kind}: removed ${removed.join(', ')} of an earlier run from ${out}`);
  if (s.resume) {
    const ex = loadForResume(batchPath, s.options.rollout.groupSize, { questions });
    previous = ex.records;
    skip = ex.completeUids;
    const notes = [
      ex.droppedLines > 0 ? `${ex.droppedLines} lines dropped (a partial or blank line, incomplete or failed groups)` : '',
      ex.failedGroups > 0 ? `${ex.failedGroups} groups whose every sample failed (tool or server) redone` : '',
    ].filter(Boolean);
    log(io, s.quiet, `resume: ${skip.size} complete groups kept${notes.length ? `, ${notes.join(', ')}` : ''}`);
  } else if (existsSync(batchPath)) {
    rmSync(batchPath);
  }
  writeFileAtomic(runPath, `${JSON.stringify({ settings: fp, startedAt: new Date().toISOString() }, null, 2)}\n`);
  return { previous, skip };
}
