/**
 * `mempo train` end to end on a tiny slice of the embedded world with the spawned torch learner
 * (docs/algorithm.md §9, docs/learner.md): metrics.jsonl, checkpoints that `mempo eval --model`
 * loads, the report; a run killed with SIGKILL and resumed repeats the uninterrupted run's
 * metrics; a learner that breaks mid-run fails it loudly and loses no checkpoint.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { killOnceExists, runCli } from './run-cli';
import { describeWithTorch, jsonMismatches } from '../helpers';
import { LocalModel } from '../../src/engines/local/local-model';
import { CausalLM } from '../../src/engines/local/causal-lm';
import { createCompletionsServer, listen } from '../../src/servers/completions-server';
import { EMBEDDED } from '../../src/paths';


const CLI = resolve(__dirname, '../../dist/cli/main.js');
// The search-only world (--no-pages), in which the metrics fixture below was recorded by b037786, which knew no other.
const TINY = ['--questions-per-step', '2', '-n', '3', '--eval-every', '2', '--eval-questions', '3', '--max-turns', '4', '--threads', '1', '--quiet', '--no-pages'];

type Line = Record<string, unknown> & { step: number; wallMs: Record<string, number> };
const lines = (dir: string, name = 'metrics.jsonl'): Line[] => readFileSync(join(dir, name), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Line);
const withoutTimes = (ls: Line[]) => ls.map(({ wallMs: _w, ...rest }) => rest);

describeWithTorch('mempo train', () => {
  const root = mkdtempSync(join(tmpdir(), 'mempo-train-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const ref = join(root, 'ref');

  it('two steps: one metrics line per step after the step-0 evaluation, checkpoints, report', async () => {
    const r = await runCli(['train', '--out', relative(process.cwd(), ref), '--steps', '3', ...TINY]);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    const ls = lines(ref);
    expect(ls.map((l) => l.step)).toEqual([0, 1, 2, 3]);
    // The default loop (--async-level 0) is the loop before overlapped steps existed: these same flags
    // gave this metrics.jsonl with the code of b037786 (recorded on the 2-core dev machine, spawned learner's default threads;
    // re-recorded with b037786's code, built in a worktree, whenever models/mempo-tiny changes: last on 2026-12-07, the RL model).
    // Counts and structure exactly; floats within 1e-4 relative (+1e-6 absolute): the figures are float32 sums and
    // three Adam steps recomputed on another CPU (an Intel Xeon gave pFull 0.1413711905 for the AMD-recorded
    // 0.1413710614, 9e-7 relative), where the reductions run in another order; a changed algorithm moves them by far more.
    expect(jsonMismatches(withoutTimes(ls), withoutTimes(lines(resolve(__dirname, '../train/fixtures'), 'train-sync-b037786.jsonl')), 1e-6, 1e-4)).toEqual([]);
    expect(ls[0]!['eval']).not.toBeNull();
    expect(ls[1]!['eval']).toBeNull();
    expect(ls[2]!['eval']).not.toBeNull();
    for (const l of ls.slice(1)) {
      expect(l['trajectories']).toBe(6);
      expect(typeof l['loss']).toBe('number');
      expect(l['gradNorm'] as number).toBeGreaterThan(0);
      for (const k of ['rollout', 'scoring', 'learnerForward', 'learnerBackward', 'optimiser', 'save', 'sync', 'total']) expect(l.wallMs[k]).toBeGreaterThanOrEqual(0);
    }
    // keepCheckpoints 2: step-1 was pruned; the others are complete model directories
    expect(existsSync(join(ref, 'checkpoints', 'step-1'))).toBe(false);
    for (const s of [2, 3]) for (const f of ['model.onnx', 'config.json', 'tokenizer.json', 'learner.json', 'learner.safetensors', 'trainer.json']) expect(existsSync(join(ref, 'checkpoints', `step-${s}`, f))).toBe(true);
    expect(readFileSync(join(ref, 'train-report.html'), 'utf8')).toContain('<svg');
    // the report's title names the run directory as typed (relative here), not the machine's absolute path
    expect(readFileSync(join(ref, 'train-report.html'), 'utf8')).toContain(`<h1>mempo train — ${relative(process.cwd(), ref)}</h1>`);
    const ev = await runCli(['eval', '--model', join(ref, 'checkpoints', 'step-3'), '--limit', '2', '--quiet', '--json']);
    expect(ev.code).toBe(0);
    expect((JSON.parse(ev.out) as { questions: number }).questions).toBe(2);
  }, 300_000);

  it('killed with SIGKILL during step 3 and resumed, it repeats the uninterrupted run (metrics equal but for wall times)', async () => {
    const out = join(root, 'killed');
    const child = spawn(process.execPath, [CLI, 'train', '--out', out, '--steps', '3', ...TINY], { stdio: 'ignore' });
    await killOnceExists(child, join(out, 'checkpoints', 'step-2', 'trainer.json'));
    await new Promise((r) => child.once('exit', r));
    expect(lines(out).at(-1)!.step).toBe(2);
    // the learner it spawned notices (it watches its parent) and exits
    await new Promise((r) => setTimeout(r, 3000));
    expect(spawnSync('pgrep', ['-f', '--', `--parent-pid ${child.pid}$`]).status).toBe(1); // 1: no such process
    const r = await runCli(['train', '--out', out, '--steps', '3', ...TINY, '--resume']);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(withoutTimes(lines(out))).toEqual(withoutTimes(lines(ref)));
  }, 300_000);

  it('a learner that answers garbage mid-run: exit 1 naming it, the previous checkpoint and metrics kept', async () => {
    const out = join(root, 'broken');
    expect((await runCli(['train', '--out', out, '--steps', '1', ...TINY, '--eval-every', '0'])).code).toBe(0);
    const server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        if (req.url === '/info') res.end(JSON.stringify({ protocol: 1, learner: 'fake', model: 'm', parameters: 1, device: 'cpu', dtype: 'fp32', step: 1 }));
        else if (req.url === '/load_checkpoint') res.end(JSON.stringify({ step: 1 }));
        else res.end('not a frame');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const r = await runCli(['train', '--out', out, '--steps', '2', ...TINY, '--eval-every', '0', '--resume', '--learner', url]);
      expect(r.code).toBe(1);
      expect(r.err).toContain(`error: learner ${url} POST /forward: not a valid frame`);
    } finally {
      server.closeAllConnections();
      server.close();
    }
    expect(lines(out).map((l) => l.step)).toEqual([1]);
    expect(existsSync(join(out, 'checkpoints', 'step-1', 'trainer.json'))).toBe(true);
    expect(existsSync(join(out, 'checkpoints', 'step-2'))).toBe(false);
  }, 300_000);

  it('with --server, every replica is updated after each step (POST /update_weights_from_disk) and then scores with the checkpoint', async () => {
    const replicas = await Promise.all([0, 1].map(async () => {
      const model = await LocalModel.load(EMBEDDED.model());
      const server = createCompletionsServer(model, { modelName: 'mempo-tiny' });
      return { model, server, url: await listen(server, 0) };
    }));
    const out = join(root, 'served');
    try {
      const r = await runCli(['train', '--out', out, '--steps', '1', ...TINY, '--eval-every', '0', '--server', replicas.map((x) => x.url).join(',')]);
      expect(r.err).toBe('');
      expect(r.code).toBe(0);
      const item = { contextIds: [5, 17, 40, 3, 99], targetIds: [12, 7, 301] };
      const ck = await CausalLM.load(join(out, 'checkpoints', 'step-1'));
      const base = await CausalLM.load(EMBEDDED.model());
      try {
        const want = (await ck.scoreTargets([item]))[0]!;
        expect(Array.from(want)).not.toEqual(Array.from((await base.scoreTargets([item]))[0]!));
        for (const x of replicas) expect(Array.from((await x.model.score([item]))[0]!)).toEqual(Array.from(want));
      } finally {
        await ck.dispose();
        await base.dispose();
      }
    } finally {
      for (const x of replicas) {
        x.server.closeAllConnections();
        x.server.close();
        await x.model.dispose();
      }
    }
  }, 300_000);

  it('refuses a directory holding a run without --resume or --force, and a learner URL nobody serves', async () => {
    const r = await runCli(['train', '--out', ref, '--steps', '1', ...TINY]);
    expect(r.code).toBe(1);
    expect(r.err).toContain('holds a training run (metrics.jsonl or checkpoints/); pass --resume to continue it or --force to start over');
    const c = await runCli(['train', '--out', join(root, 'ctx'), ...TINY, '--context', 'memory']);
    expect(c.code).toBe(2);
    expect(c.err).toContain("--context: mempo train samples with the 'full' context policy");
    const d = await runCli(['train', '--out', join(root, 'nobody'), '--steps', '1', ...TINY, '--learner', 'http://127.0.0.1:9']);
    expect(d.code).toBe(1);
    expect(d.err).toMatch(/error: learner http:\/\/127\.0\.0\.1:9 GET \/info: .*ECONNREFUSED/);
  }, 120_000);
});
