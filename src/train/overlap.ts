/**
 * Overlapped training steps (`train.asyncLevel` N > 0, docs/train.md "Overlapped steps"), after
 * prime-rl's orchestrator (`async_level`) and AReaL (`max_head_offpolicyness`): a producer samples
 * step s with the weights of step s − 1 − N (version v = the weights after v updates; 0 = the
 * starting weights) while a consumer, the learner's side, updates on earlier steps.
 *
 * - The engines change weights only between two rollouts (never within one): every round of a
 *   step's trajectories is sampled by one version, recorded as the line's `samplerVersion`.
 * - The version is fixed by the step, not by timing: the producer waits for it (as prime-rl's
 *   orchestrator blocks when it is `async_level` ahead), so no row is ever older than N updates and
 *   none has to be dropped or reweighted; a seeded run repeats its metrics.
 * - The PPO ratio is taken against the sampler's log-probs (`oldLogp: 'sampler'`, required), i.e.
 *   against the version that sampled the row, not the learner's newer weights.
 * - Version v's evaluation runs on the engines when they load v, between two rollouts.
 * - Weights are written where the sync loop writes them (checkpoints/step-N, weights/); a save
 *   waits until the engines have loaded every earlier version, so a directory is never replaced
 *   before they read it.
 * - Resume from checkpoint c: rollouts c+1 … c+N need versions c − N … c − 1, read from the
 *   starting model (version 0) or from complete checkpoints still on disk; a version no longer
 *   there is replaced by c's weights (less stale), said in a notice, and the run then differs
 *   from the uninterrupted one. The rollouts in flight at a kill are redone.
 */
import { MempoError } from '../errors';
import type { Question } from '../contracts';
import { timed } from '../util';
import type { StepMetrics } from './metrics';
import { evalDue, evaluate, rolloutStep, stepMetrics, stepQuestions, updateStep, type StepRollout, type TrainContext } from './step';

export interface OverlapRun {
  /** First step to run (a resumed run: the checkpoint's step + 1); the engines and the learner hold version start − 1. */
  start: number;
  order: readonly Question[];
  /** The model directory of version v < start − 1 when it is still on disk (resume), else null. */
  priorWeights(version: number): string | null;
  /** Has the learner write version `step` and returns its directory (src/train/loop.ts). */
  saveWeights(step: number): Promise<string>;
  /** Writes step m's line and completes its checkpoint; in step order. */
  commit(m: StepMetrics): void;
  notice(message: string): void;
}

interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(err: unknown): void;
}

/** Values by index, each set once by one side and awaited by the other; `fail` rejects every pending one. */
class Slots<T> {
  private readonly map = new Map<number, Deferred<T>>();
  private failed: unknown = null;

  private at(i: number): Deferred<T> {
    let d = this.map.get(i);
    if (d === undefined) {
      let resolve!: (v: T) => void;
      let reject!: (e: unknown) => void;
      const promise = new Promise<T>((res, rej) => { resolve = res; reject = rej; });
      promise.catch(() => undefined); // a slot nobody awaits must not be an unhandled rejection
      d = { promise, resolve, reject };
      if (this.failed !== null) reject(this.failed);
      this.map.set(i, d);
    }
    return d;
  }

  get(i: number): Promise<T> {
    return this.at(i).promise;
  }

  set(i: number, v: T): void {
    this.at(i).resolve(v);
  }

  fail(err: unknown): void {
    this.failed ??= err;
    for (const d of this.map.values()) d.reject(err);
  }
}

/** A rollout as the producer hands it over: with the version that sampled it and the time its sync took. */
interface Sampled extends StepRollout {
  version: number;
  syncMs: number;
}

/** Runs steps run.start … ctx.train.steps overlapped; returns their metrics in order. */
export async function runOverlapped(ctx: TrainContext, run: OverlapRun): Promise<StepMetrics[]> {
  const o = ctx.train;
  const N = o.asyncLevel;
  const last = o.steps;
  const rollouts = new Slots<Sampled>();
  const saved = new Slots<string>();
  /** Resolved in version order once the engines no longer need version v's directory. */
  const loaded = new Slots<void>();
  const evals = new Slots<{ report: Awaited<ReturnType<typeof evaluate>>; ms: number }>();
  let failure: unknown = null;
  const fail = (err: unknown) => {
    failure ??= err;
    for (const s of [rollouts, saved, loaded, evals] as Slots<unknown>[]) s.fail(err);
  };

  let engine = run.start - 1; // the version the engines hold
  let released = -1;
  const release = (upTo: number) => {
    for (; released < upTo; ) loaded.set(++released, undefined);
  };
  let warned = false;
  /** Makes the engines hold `want` (or, on resume, the checkpoint's version when `want` is gone) and evaluates it when due; returns the version held and the sync time. */
  const hold = async (want: number, step: number): Promise<{ version: number; syncMs: number }> => {
    const wall: Record<string, number> = {};
    let version = want;
    release(want - 1); // the engines' versions only grow: nothing below `want` is loaded again (a save may go on)
    if (want !== engine) {
      let dir: string | null;
      if (want >= run.start) {
        dir = await saved.get(want);
      } else {
        dir = run.priorWeights(want);
        if (dir === null) {
          if (!warned) run.notice(`resuming an overlapped run: the weights of step ${want} are no longer on disk (a checkpoint pruned or not kept, or no starting model known), so step ${step} samples with step ${engine}'s; from here the run differs from the uninterrupted one`);
          warned = true;
          version = engine;
        }
      }
      if (dir !== null) {
        ctx.onPhase?.(step, 'sync');
        await timed(wall, 'sync', () => ctx.sync(dir));
        engine = want;
      }
    }
    if (version >= run.start && evalDue(ctx, version)) {
      ctx.onPhase?.(version, 'eval');
      const t = performance.now();
      const report = await evaluate(ctx, version);
      evals.set(version, { report, ms: performance.now() - t });
    }
    release(version);
    return { version, syncMs: wall['sync'] ?? 0 };
  };

  const producer = async () => {
    for (let s = run.start; s <= last && failure === null; s++) {
      const held = await hold(Math.max(0, s - 1 - N), s);
      const r = await rolloutStep(ctx, s, stepQuestions(run.order, s, o.questionsPerStep));
      rollouts.set(s, { ...r, ...held });
    }
    // The versions no rollout uses: loaded only to be evaluated.
    for (let v = Math.max(run.start, last - N); v <= last && failure === null; v++) {
      if (evalDue(ctx, v)) await hold(v, v);
      else release(v);
    }
  };

  const consumer = async () => {
    const out: StepMetrics[] = [];
    let t0 = performance.now();
    for (let k = run.start; k <= last; k++) {
      const wall: Record<string, number> = {};
      const r = await timed(wall, 'wait', () => rollouts.get(k));
      // By construction (the producer waits for its version); a breach would train on weights older than promised.
      if (k - 1 - r.version > N) throw new Error(`internal error: step ${k} was sampled with the weights of step ${r.version}, more than --async-level ${N} behind the learner's ${k - 1}`);
      if (r.rows.some((row) => row.samplerLogp === null)) {
        throw new MempoError('ERR_INVALID_INPUT', `step ${k}: the rollout engine returned no log-probs for a trajectory; overlapped steps (--async-level ${N}) take the PPO ratio against the sampler's log-probs (serve with log-probs, or use --async-level 0)`);
      }
      Object.assign(wall, r.wall);
      const u = await updateStep(ctx, r, wall);
      // Version k may replace weights/ (or prune a checkpoint) only once the engines hold every earlier version.
      const tw = performance.now();
      await loaded.get(k - 1);
      wall['wait'] = (wall['wait'] ?? 0) + performance.now() - tw;
      const dir = await timed(wall, 'save', () => run.saveWeights(k));
      saved.set(k, dir);
      wall['sync'] = r.syncMs;
      let ev = null;
      if (evalDue(ctx, k)) {
        const e = await evals.get(k);
        ev = e.report;
        wall['eval'] = e.ms;
      }
      wall['total'] = performance.now() - t0;
      const m: StepMetrics = { ...stepMetrics(ctx, r, u, ev, wall), samplerVersion: r.version };
      run.commit(m);
      out.push(m);
      t0 = performance.now();
    }
    return out;
  };

  const side = <T>(p: Promise<T>) => p.catch((err: unknown) => { fail(err); throw err; });
  const [p, c] = await Promise.allSettled([side(producer()), side(consumer())]);
  if (failure !== null) throw failure;
  if (p.status === 'rejected') throw p.reason;
  if (c.status === 'rejected') throw c.reason;
  return c.value;
}
