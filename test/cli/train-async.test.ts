/**
 * `mempo train --async-level 1` end to end (src/train/overlap.ts, docs/train.md "Overlapped
 * steps") with the spawned torch learner on the same tiny slice as train.test.ts: step 2 samples
 * with the starting weights while the learner holds step 1's (each line says which), every step
 * updates, and a run killed with SIGKILL after step 1 and resumed repeats the uninterrupted run,
 * the in-flight rollout of step 2 redone with the starting model's weights. (Which version samples
 * each step, over more steps and levels, and resuming from a kept checkpoint: test/train/overlap.test.ts.)
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { killOnceExists, runCli } from './run-cli';
import { describeWithTorch } from '../helpers';

const CLI = resolve(__dirname, '../../dist/cli/main.js');
const TINY = ['--steps', '2', '--questions-per-step', '2', '-n', '3', '--eval-every', '2', '--eval-questions', '3', '--max-turns', '4', '--threads', '1', '--quiet', '--async-level', '1'];

type Line = Record<string, unknown> & { step: number; wallMs: Record<string, number> };
const lines = (dir: string): Line[] => readFileSync(join(dir, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Line);
const withoutTimes = (ls: Line[]) => ls.map(({ wallMs: _w, ...rest }) => rest);

describe('mempo train --async-level: options', () => {
  it('--old-logp learner with --async-level 1 is refused naming both, before anything starts', async () => {
    const out = mkdtempSync(join(tmpdir(), 'mempo-async-opt-'));
    try {
      const r = await runCli(['train', '--out', out, '--async-level', '1', '--old-logp', 'learner', '--quiet']);
      expect(r.code).toBe(2);
      expect(r.err).toMatch(/^error: --old-logp learner cannot go with --async-level 1: .*--old-logp sampler/);
      expect(existsSync(join(out, 'metrics.jsonl'))).toBe(false);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});

describeWithTorch('mempo train --async-level 1', () => {
  const root = mkdtempSync(join(tmpdir(), 'mempo-train-async-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const ref = join(root, 'ref');

  it('step 2 samples with the starting weights; every step updates on the sampler\'s log-probs; settings recorded', async () => {
    const r = await runCli(['train', '--out', ref, ...TINY]);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    const ls = lines(ref);
    expect(ls.map((l) => l.step)).toEqual([0, 1, 2]);
    expect(ls.map((l) => l['samplerVersion'])).toEqual([undefined, 0, 0]);
    expect(ls.map((l) => l['eval'] === null)).toEqual([false, true, false]);
    for (const l of ls.slice(1)) {
      expect(l['trained']).toBe(6);
      expect(typeof l['loss']).toBe('number');
      expect(l['gradNorm'] as number).toBeGreaterThan(0);
      for (const k of ['wait', 'rollout', 'scoring', 'learnerForward', 'learnerBackward', 'save', 'sync', 'total']) expect(l.wallMs[k]).toBeGreaterThanOrEqual(0);
    }
    // Step 2's rows were sampled by version 0 and trained by version 1: the sampler's log-probs differ from the learner's.
    expect(ls[2]!['approxKl']).not.toBe(0);
    const trainer = JSON.parse(readFileSync(join(ref, 'checkpoints', 'step-2', 'trainer.json'), 'utf8')) as { settings: { train: Record<string, unknown> } };
    expect(trainer.settings.train['asyncLevel']).toBe(1);
    expect(trainer.settings.train['oldLogp']).toBe('sampler');
  }, 300_000);

  it('killed with SIGKILL after step 1 and resumed, it repeats the uninterrupted run (step 2 resampled with the starting weights)', async () => {
    const out = join(root, 'killed');
    const child = spawn(process.execPath, [CLI, 'train', '--out', out, ...TINY], { stdio: 'ignore' });
    await killOnceExists(child, join(out, 'checkpoints', 'step-1', 'trainer.json'));
    await new Promise((r) => child.once('exit', r));
    expect(lines(out).at(-1)!.step).toBe(1);
    const r = await runCli(['train', '--out', out, ...TINY, '--resume']);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(withoutTimes(lines(out))).toEqual(withoutTimes(lines(ref)));
  }, 300_000);
});
