/**
 * One writer per run directory (docs/rollout.md, docs/train.md "The run directory's lock"), with
 * real processes (the built command, dist/cli/main.js): a second `mempo rollout` / `mempo train`
 * on a directory another process is writing is refused naming that process, in another process
 * or in this one; SIGTERM and Ctrl-C release the lock, a failing run too; a run killed with
 * SIGKILL leaves a stale lock that the next run takes over, saying so.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { questionsDir, runCli } from './run-cli';
import { describeWithTorch } from '../helpers';

const BIN = resolve(__dirname, '..', '..', 'dist', 'cli', 'main.js');
const built = existsSync(BIN);
const maybe = built ? test : test.skip;
if (!built) console.warn(`run-lock: ${BIN} is not built (npm run build:ts); skipping the tests with two processes`);

const QUESTIONS = Array.from({ length: 12 }, (_, i) => ({ id: `q${i}`, question: `In which country is Mamek ${i}?`, golds: ['Thersekle'] }));
const { dir, questions } = questionsDir('mempo-run-lock-', QUESTIONS);
const ROLLOUT = ['--questions', questions, '--limit', 'none', '-n', '2', '--questions-per-batch', '1', '--max-round-tokens', '48', '--max-turns', '2', '--threads', '1'];

interface Exit { code: number | null; signal: string | null; err: string }

function start(args: string[]): { child: ChildProcess; exit: Promise<Exit> } {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const exit = new Promise<Exit>((res) => child.on('exit', (code, signal) => res({ code, signal, err })));
  return { child, exit };
}

/** Resolves once `file` holds text; rejects if `exit` comes first. */
function whenWritten(file: string, exit?: Promise<Exit>): Promise<void> {
  return new Promise((res, rej) => {
    const timer = setInterval(() => {
      if (existsSync(file) && readFileSync(file, 'utf8').length > 0) {
        clearInterval(timer);
        res();
      }
    }, 20);
    void exit?.then((e) => {
      clearInterval(timer);
      rej(new Error(`the run ended before ${file} was written: ${e.err}`));
    });
  });
}

const keys = (file: string) => readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => {
  const r = JSON.parse(l) as { uid: string; sample: number };
  return `${r.uid}/${r.sample}`;
});
const ALL = QUESTIONS.flatMap((q) => [`${q.id}/0`, `${q.id}/1`]).sort();

describe('mempo rollout: one writer per --out', () => {
  maybe('a second process is refused naming the first; SIGTERM releases the lock; --resume then finishes the run, every sample once', async () => {
    const out = join(dir, 'two');
    const first = start(['rollout', '--out', out, ...ROLLOUT]);
    await whenWritten(join(out, 'batch.jsonl'), first.exit);
    const second = await runCli(['rollout', '--out', out, ...ROLLOUT, '--resume', '--quiet']);
    expect(second.code).toBe(1);
    expect(second.err).toMatch(new RegExp(`^error: ${out.replace(/[.\\/]/g, '\\$&')} is in use by pid ${first.child.pid} \\(mempo rollout, started [0-9T:.Z-]+\\): one run writes a directory at a time\\n$`));
    first.child.kill('SIGTERM');
    const e = await first.exit;
    expect(e.code).toBe(143);
    expect(existsSync(join(out, '.lock'))).toBe(false);
    const third = await runCli(['rollout', '--out', out, ...ROLLOUT, '--resume', '--quiet']);
    expect(third.code).toBe(0);
    expect(keys(join(out, 'batch.jsonl')).sort()).toEqual(ALL);
  });

  test('a second run in the same process is refused too; the lock goes when the first ends', async () => {
    const out = join(dir, 'same-process');
    const first = runCli(['rollout', '--out', out, ...ROLLOUT, '--quiet']);
    await whenWritten(join(out, '.lock'));
    const second = await runCli(['rollout', '--out', out, ...ROLLOUT, '--resume', '--quiet']);
    expect(second.code).toBe(1);
    expect(second.err).toContain(`is in use by pid ${process.pid} (mempo rollout, started `);
    expect((await first).code).toBe(0);
    expect(existsSync(join(out, '.lock'))).toBe(false);
    expect(keys(join(out, 'batch.jsonl')).sort()).toEqual(ALL);
  });

  maybe('a run killed with SIGKILL leaves a stale lock, which --resume takes over, saying so', async () => {
    const out = join(dir, 'killed');
    const first = start(['rollout', '--out', out, ...ROLLOUT]);
    await whenWritten(join(out, 'batch.jsonl'), first.exit);
    first.child.kill('SIGKILL');
    await first.exit;
    expect((JSON.parse(readFileSync(join(out, '.lock'), 'utf8')) as { pid: number }).pid).toBe(first.child.pid);
    const r = await runCli(['rollout', '--out', out, ...ROLLOUT, '--resume']);
    expect(r.code).toBe(0);
    expect(r.err).toMatch(new RegExp(`^mempo rollout: took over ${join(out, '.lock').replace(/[.\\/]/g, '\\$&')} from pid ${first.child.pid} \\(mempo rollout, started [0-9T:.Z-]+\\), which is no longer running\\n`));
    expect(existsSync(join(out, '.lock'))).toBe(false);
    expect(keys(join(out, 'batch.jsonl')).sort()).toEqual(ALL);
  });

  test('a run that fails releases the lock', async () => {
    const out = join(dir, 'failing');
    const r = await runCli(['train', '--out', out, '--steps', '1', '--questions', questions, '--eval-every', '0', '--threads', '1', '--quiet', '--learner', 'http://127.0.0.1:9']);
    expect(r.code).toBe(1);
    expect(r.err).toContain('ECONNREFUSED');
    expect(existsSync(join(out, '.lock'))).toBe(false);
  });
});

describeWithTorch('mempo train: one writer per --out', () => {
  const TRAIN = ['--questions', questions, '--questions-per-step', '1', '-n', '2', '--eval-every', '0', '--max-turns', '2', '--threads', '1', '--quiet'];

  maybe('a second train on a directory being trained is refused naming the first; Ctrl-C releases it; --resume ends with one metrics line per step', async () => {
    const out = join(dir, 'train');
    const first = start(['train', '--out', out, '--steps', '30', ...TRAIN]);
    await whenWritten(join(out, 'checkpoints', 'step-1', 'trainer.json'), first.exit);
    const second = await runCli(['train', '--out', out, '--steps', '3', ...TRAIN, '--resume']);
    expect(second.code).toBe(1);
    expect(second.err).toContain(`error: ${out} is in use by pid ${first.child.pid} (mempo train, started `);
    first.child.kill('SIGINT');
    const e = await first.exit;
    expect(e.code).toBe(130);
    expect(e.err).toContain('rerun with --resume to continue from the newest');
    expect(existsSync(join(out, '.lock'))).toBe(false);
    // The learner it spawned exits with it (it watches its parent).
    await new Promise((r) => setTimeout(r, 3000));
    expect(spawnSync('pgrep', ['-f', '--', `--parent-pid ${first.child.pid}$`]).status).toBe(1);
    // The newest complete checkpoint: the resumed run continues after it.
    const done = Math.max(...readdirSync(join(out, 'checkpoints')).filter((n) => existsSync(join(out, 'checkpoints', n, 'trainer.json'))).map((n) => Number(n.slice('step-'.length))));
    const third = await runCli(['train', '--out', out, '--steps', String(done + 1), ...TRAIN, '--resume']);
    expect(third.err).toBe('');
    expect(third.code).toBe(0);
    const steps = readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => (JSON.parse(l) as { step: number }).step);
    expect(steps).toEqual(Array.from({ length: done + 1 }, (_, i) => i + 1));
  }, 180_000);
});
