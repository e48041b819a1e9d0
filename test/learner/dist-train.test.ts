/**
 * `mempo train --learner-procs 2` (docs/learner.md "Several processes") with real processes: the
 * spawned learner runs its two ranks over gloo on loopback, a run killed with SIGKILL leaves no
 * rank behind and resumes from its checkpoint, and the flag is refused beside --learner URL.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { killOnceExists, runCli } from '../cli/run-cli';
import { describeWithTorch } from '../helpers';
import { spawnLearner } from '../../src/learner/spawn';
import { EMBEDDED } from '../../src/paths';
import { MempoError } from '../../src/errors';

const CLI = resolve(__dirname, '../../dist/cli/main.js');
const SHORT = ['--questions-per-step', '1', '-n', '2', '--eval-every', '0', '--max-turns', '4', '--threads', '1', '--quiet', '--learner-procs', '2'];
const steps = (dir: string) => readFileSync(join(dir, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => (JSON.parse(l) as { step: number }).step);

/** Whether a process has exited (a zombie nobody reaps counts). */
function gone(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(')').pop()!.trim().startsWith('Z');
  } catch {
    return true;
  }
}

const pids = (args: string[]) => spawnSync('pgrep', args, { encoding: 'utf8' }).stdout.split('\n').filter(Boolean).map(Number);

describeWithTorch('mempo train --learner-procs 2', () => {
  const root = mkdtempSync(join(tmpdir(), 'mempo-dist-train-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('killed with SIGKILL after step 1, no rank outlives it, and --resume finishes the run on 2 processes again', async () => {
    const out = join(root, 'run');
    const child = spawn(process.execPath, [CLI, 'train', '--out', out, '--steps', '2', ...SHORT], { stdio: 'ignore' });
    let learner: number[] = [];
    await killOnceExists(child, join(out, 'checkpoints', 'step-1', 'trainer.json'), {
      tick() {
        if (learner.length > 0) return;
        const [rank0] = pids(['-f', '--', `--parent-pid ${child.pid} --nproc 2$`]);
        if (rank0 !== undefined) learner = [rank0];
      },
      beforeKill() {
        learner.push(...pids(['-P', String(learner[0])])); // rank 1 (and multiprocessing's helpers)
      },
    });
    // (an exit already seen, e.g. a run that ended between two polls on a loaded machine, is not waited for again)
    if (child.exitCode === null && child.signalCode === null) await new Promise((r) => child.once('exit', r));
    expect(learner.length).toBeGreaterThanOrEqual(2); // rank 0 and rank 1 were seen
    expect(steps(out)).toEqual([1]);
    // rank 0 watches mempo, rank 1 watches rank 0: both gone within a few seconds
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline && !learner.every(gone)) await new Promise((r) => setTimeout(r, 200));
    expect(learner.filter((p) => !gone(p))).toEqual([]);
    const r = await runCli(['train', '--out', out, '--steps', '2', ...SHORT, '--resume']);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(steps(out)).toEqual([1, 2]);
    expect(existsSync(join(out, 'checkpoints', 'step-2', 'learner.safetensors'))).toBe(true);
  }, 240_000);

  it('a rank killed fails the call naming it and its signal, and every later call, as a dead single learner does', async () => {
    const logs: string[] = [];
    const l = await spawnLearner({ model: EMBEDDED.model(), seed: 1, threads: 1, procs: 2, onLog: (line) => logs.push(line) });
    try {
      expect((await l.info()).parameters).toBe(3410176);
      const rank1 = Number(/rank 1: pid (\d+)/.exec(logs.join('\n'))?.[1]);
      expect(rank1).toBeGreaterThan(0);
      process.kill(rank1, 'SIGKILL');
      while (!gone(rank1)) await new Promise((r) => setTimeout(r, 20));
      const err = await l.forward([{ ids: [5, 6, 7, 8], targetStart: 1 }]).then(() => null, (e: unknown) => e);
      expect(err).toBeInstanceOf(MempoError);
      expect((err as MempoError).message).toContain(`rank 1 (pid ${rank1}) exited with signal SIGKILL`);
      await expect(l.info()).rejects.toThrow(/the learner \(.* --nproc 2\) exited \(code 1\)/);
    } finally {
      await l.close();
    }
  }, 120_000);

  it('--learner-procs is refused beside --learner URL, naming both; procs below 1 is refused', async () => {
    const r = await runCli(['train', '--out', join(root, 'url'), '--steps', '1', ...SHORT, '--learner', 'http://127.0.0.1:9']);
    expect(r.code).not.toBe(0);
    expect(r.err).toContain('--learner-procs 2 is for the learner mempo spawns, not for --learner http://127.0.0.1:9');
    expect(existsSync(join(root, 'url'))).toBe(false);
    await expect(spawnLearner({ model: EMBEDDED.model(), procs: 0 })).rejects.toThrow('Expected an integer >= 1 for procs but received 0');
  });
});
