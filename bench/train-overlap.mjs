// `node bench/train-overlap.mjs`: overlapped training steps (`mempo train --async-level`) against
// the synchronous loop, interleaved (A B A B …), each arm a fresh run with its own torch learner
// reached over `--learner URL` (started here with --threads T), on the embedded defaults.
//   --steps 6 --questions-per-step 4 --rounds 2 --eval-every 6 --eval-questions 30 --out DIR
//   --arms sync:0:2:2,async:1:1:1   name:asyncLevel:ortThreads:torchThreads, in the order run
//   --device cpu|cuda|auto --dtype fp32|bf16|auto   the learner's (default cpu, fp32: the CPU runs' settings)
// Per arm and round: the median step time (wallMs.total − wallMs.eval: an evaluation is not a
// training step) and each phase's median; DIR/<arm>-<round>/metrics.jsonl is kept. Prints JSON.
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { root, value } from './args.mjs';

const steps = value('--steps', '6');
const perStep = value('--questions-per-step', '4');
const rounds = Number(value('--rounds', '2'));
const evalEvery = value('--eval-every', '6');
const evalQuestions = value('--eval-questions', '30');
const out = path.resolve(value('--out', path.join(os.tmpdir(), 'mempo-train-overlap')));
const arms = value('--arms', 'sync:0:2:2,async:1:1:1').split(',').map((a) => {
  const [name, level, ort, torch] = a.split(':');
  return { name, level: Number(level), ort: Number(ort), torch: Number(torch) };
});
const device = value('--device', 'cpu');
const dtype = value('--dtype', 'fp32');
const model = path.join(root, 'models', 'mempo-tiny');
const python = process.env.MEMPO_PYTHON ?? '/usr/bin/python3';
const median = (xs) => {
  const s = xs.slice().sort((a, b) => a - b);
  return s.length === 0 ? null : s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

/** A learner on a free loopback port; resolves with its URL and process. */
function startLearner(threads) {
  const p = spawn(python, ['-m', 'mempo_learner', '--model', model, '--threads', String(threads), '--device', device, '--dtype', dtype, '--seed', '0', '--parent-pid', String(process.pid)], {
    env: { ...process.env, PYTHONPATH: path.join(root, 'learner') }, stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((res, rej) => {
    createInterface({ input: p.stdout }).on('line', (l) => {
      try {
        const m = JSON.parse(l);
        if (m.event === 'listening') res({ url: m.url, p });
      } catch { /* a log line */ }
    });
    p.once('exit', (c) => rej(new Error(`the learner exited (${c}) before listening`)));
  });
}

function summary(dir) {
  const lines = readFileSync(path.join(dir, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l)).filter((l) => l.step > 0);
  const phases = {};
  for (const l of lines) for (const [k, v] of Object.entries(l.wallMs)) (phases[k] ??= []).push(v);
  const stepMs = lines.map((l) => l.wallMs.total - (l.wallMs.eval ?? 0));
  return {
    stepMs: median(stepMs), steps: stepMs,
    phases: Object.fromEntries(Object.entries(phases).map(([k, v]) => [k, median(v)])),
    meanScore: lines.map((l) => l.meanScore), loss: lines.map((l) => l.loss),
    eval: lines.filter((l) => l.eval !== null).map((l) => ({ step: l.step, em: l.eval.em })),
  };
}

mkdirSync(out, { recursive: true });
const results = [];
const load = () => os.loadavg()[0].toFixed(2);
for (let r = 1; r <= rounds; r++) {
  for (const arm of arms) {
    const dir = path.join(out, `${arm.name}-${r}`);
    rmSync(dir, { recursive: true, force: true });
    const { url, p } = await startLearner(arm.torch);
    const loadBefore = load();
    const t0 = Date.now();
    const res = spawnSync(process.execPath, [path.join(root, 'dist', 'cli', 'main.js'), 'train', '--out', dir, '--steps', steps,
      '--questions-per-step', perStep, '--eval-every', evalEvery, '--eval-questions', evalQuestions, '--threads', String(arm.ort),
      '--async-level', String(arm.level), '--learner', url, '--no-report', '--quiet'], { stdio: ['ignore', 'inherit', 'inherit'] });
    const wallS = (Date.now() - t0) / 1000;
    p.kill('SIGTERM');
    await new Promise((ok) => p.once('exit', ok));
    if (res.status !== 0) throw new Error(`${arm.name} round ${r}: mempo train exited ${res.status}`);
    const s = { arm: arm.name, round: r, ...arm, wallS, loadBefore, loadAfter: load(), ...summary(dir) };
    results.push(s);
    process.stderr.write(`${arm.name} round ${r}: median step ${(s.stepMs / 1000).toFixed(1)} s, run ${wallS.toFixed(0)} s, load ${loadBefore} → ${s.loadAfter}\n`);
  }
}
const doc = { date: new Date().toISOString(), cpu: os.cpus()[0]?.model, cores: os.cpus().length, learner: { device, dtype }, steps, perStep, results };
writeFileSync(path.join(out, 'summary.json'), `${JSON.stringify(doc, null, 2)}\n`);
process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
