// `npm run bench:learner`: the learner path of `mempo train` (docs/learner.md) against raw torch,
// on one batch (--samples S of about --tokens T tokens, every token after the first a target):
//   raw        TinyLM.forward_train + cross-entropy backward in one Python process (no mempo);
//   python     the learner's forward(grad) + backward from a Python client over loopback HTTP;
//   node       the same from Node through HttpLearner (frames, checks, the spawned learner);
//   update     policyUpdate, mempo's whole update of that batch (micro-batches, ppoPolicyLoss
//              with global normalisers, backward, optimStep), KL off, one update.
// raw and python come from learner/mempo_learner/bench.py run on the same batch (--batch). Prints
// tokens/s and each path's overhead against raw; --json prints the figures as JSON.
// Flags: --samples 16, --tokens 500, --threads 2, --reps 3, --json.
// --pythons A,B: instead, the same batch under two Pythons (e.g. python3 with the pinned torch 2.13 and
// Debian's /usr/bin/python3 with torch 1.13), interleaved A, B, A, B … for --reps rounds of
// mempo_learner.bench: the raw torch step and the learner's forward+backward over HTTP, medians, B / A.
// --procs 1,2: instead, the learner on 1 and 2 processes (docs/learner.md "Several processes",
// learner/mempo_learner/bench_dist.py): tokens/s of a training step (2 micro-batches), rank 0's
// time in collectives and the bytes all-reduced per step, and DDP against the explicit all-reduce.
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { root, flag, value } from './args.mjs';

const require = createRequire(import.meta.url);
const mempo = require(path.join(root, 'dist', 'index.js'));
const { encodeFrame } = require(path.join(root, 'dist', 'learner', 'frame.js'));
const { int32 } = require(path.join(root, 'dist', 'io', 'export-tensor.js'));

const S = Number(value('--samples', '16'));
const T = Number(value('--tokens', '500'));
const threads = Number(value('--threads', '2'));
const reps = Number(value('--reps', '3'));
const model = path.join(root, 'models', 'mempo-tiny');

// The batch: lengths within ±10 % of T, random ids of the embedded vocabulary, seeded.
const rnd = mempo.createRng(7, 0);
const samples = Array.from({ length: S }, () => {
  const n = Math.round(T * (0.9 + 0.2 * rnd()));
  return { ids: Array.from({ length: n }, () => Math.floor(rnd() * 3072)), targetStart: 1 };
});
const tokens = samples.reduce((a, s) => a + s.ids.length, 0);
const targets = tokens - S;

const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
/** The benchmark batch as a frame file in dir (what mempo_learner.bench --batch reads). */
function writeBatch(dir) {
  const batchFile = path.join(dir, 'batch.frame');
  const flat = samples.flatMap((s) => s.ids);
  writeFileSync(batchFile, encodeFrame({}, [
    ['ids', int32([flat.length], flat)],
    ['lengths', int32([S], samples.map((s) => s.ids.length))],
    ['target_start', int32([S], samples.map((s) => s.targetStart))],
  ]));
  return batchFile;
}

/** The learner step under each Python, one bench.py run (--reps 1) per Python per round, interleaved. */
async function comparePythons(pythons, dir) {
  if (pythons.length !== 2 || pythons.some((p) => p === '')) throw new Error(`--pythons: two comma-separated interpreters, got ${JSON.stringify(pythons)}`);
  const batchFile = writeBatch(dir);
  const runs = pythons.map(() => []);
  for (let r = 0; r < reps; r++) {
    pythons.forEach((py, k) => {
      runs[k].push(JSON.parse(execFileSync(py, ['-m', 'mempo_learner.bench', '--batch', batchFile, '--threads', String(threads), '--reps', '1'], {
        env: { ...process.env, PYTHONPATH: path.join(root, 'learner') }, encoding: 'utf8', maxBuffer: 1 << 20,
      }).trim().split('\n').pop()));
    });
  }
  const rows = pythons.map((py, k) => ({
    python: py, torch: runs[k][0].torch,
    raw_tokens_per_s: Math.round(tokens / median(runs[k].map((x) => x.raw_s))),
    http_tokens_per_s: Math.round(tokens / median(runs[k].map((x) => x.http_s))),
    optim_step_ms: Math.round(1000 * median(runs[k].map((x) => x.optim_step_s))),
  }));
  const res = { samples: S, tokens, threads, rounds: reps, cpu: os.cpus()[0]?.model ?? 'unknown', rows,
    raw_ratio_b_over_a: +(rows[1].raw_tokens_per_s / rows[0].raw_tokens_per_s).toFixed(3),
    http_ratio_b_over_a: +(rows[1].http_tokens_per_s / rows[0].http_tokens_per_s).toFixed(3),
    // per interleaved round: A's time / B's (B's tokens/s over A's), the spread the medians hide on a loaded machine
    raw_ratio_rounds: runs[0].map((x, r) => +(x.raw_s / runs[1][r].raw_s).toFixed(3)),
    http_ratio_rounds: runs[0].map((x, r) => +(x.http_s / runs[1][r].http_s).toFixed(3)),
    loadavg: os.loadavg().map((x) => +x.toFixed(2)) };
  if (flag('--json')) console.log(JSON.stringify(res));
  else {
    console.log(`learner step under two Pythons: ${S} samples, ${tokens} tokens, ${threads} threads, ${reps} interleaved rounds, median (${res.cpu})`);
    for (const r of rows) console.log(`  ${r.python} (torch ${r.torch}): raw ${r.raw_tokens_per_s} tokens/s, learner over HTTP ${r.http_tokens_per_s} tokens/s, optim_step ${r.optim_step_ms} ms`);
    console.log(`  B / A: raw ${res.raw_ratio_b_over_a}× (rounds ${Math.min(...res.raw_ratio_rounds)}–${Math.max(...res.raw_ratio_rounds)}), learner ${res.http_ratio_b_over_a}× (rounds ${Math.min(...res.http_ratio_rounds)}–${Math.max(...res.http_ratio_rounds)}); load ${res.loadavg.join(' ')}`);
  }
}

async function time(fn) {
  await fn(); // warm-up
  const out = [];
  for (let i = 0; i < reps; i++) {
    const t = performance.now();
    await fn();
    out.push((performance.now() - t) / 1000);
  }
  return median(out);
}

if (value('--procs', '') !== '') {
  const out = execFileSync(mempo.findPython(), ['-m', 'mempo_learner.bench_dist', '--procs', value('--procs', '1,2'), '--samples', String(S), '--tokens', String(T), '--threads', String(threads), '--reps', String(reps)], {
    env: { ...process.env, PYTHONPATH: path.join(root, 'learner') }, encoding: 'utf8', maxBuffer: 1 << 20,
  }).trim().split('\n').pop();
  const r = JSON.parse(out);
  if (flag('--json')) console.log(out);
  else {
    console.log(`learner on N processes: ${r.samples} samples, ${r.tokens} tokens in ${r.micro_batches} micro-batches per step, ${r.threads} threads in all on ${r.cpus} CPUs, median of ${r.reps} (torch ${r.torch})`);
    for (const [n, x] of Object.entries(r.procs)) {
      console.log(`  ${n} process(es) × ${x.threads_per_process} threads: step ${x.step_s} s, ${x.tokens_per_s} tokens/s, collectives ${x.comm_ms} ms, ${x.comm_bytes} bytes per step`);
    }
    const d = r.ddp;
    console.log(`  per backward on 2 ranks: none ${d.none_backward_ms} ms, DDP ${d.ddp_backward_ms} ms, backward + one flat all-reduce ${d.explicit_backward_ms} ms (${d.allreduce_bytes} bytes)`);
  }
  process.exit(0);
}

const dir = mkdtempSync(path.join(os.tmpdir(), 'mempo-bench-learner-'));
try {
  if (value('--pythons', '') !== '') {
    await comparePythons(value('--pythons', '').split(','), dir);
    process.exit(0);
  }
  const batchFile = writeBatch(dir);
  const python = mempo.findPython();
  const py = JSON.parse(execFileSync(python, ['-m', 'mempo_learner.bench', '--batch', batchFile, '--threads', String(threads), '--reps', String(reps)], {
    env: { ...process.env, PYTHONPATH: path.join(root, 'learner') }, encoding: 'utf8', maxBuffer: 1 << 20,
  }).trim().split('\n').pop());

  const learner = await mempo.spawnLearner({ model, threads, seed: 0 });
  let nodeS;
  let updateS;
  try {
    const grad = samples.map((s) => new Float32Array(s.ids.length - s.targetStart).fill(1 / targets));
    nodeS = await time(async () => {
      await learner.forward(samples, { grad: true });
      await learner.backward(grad);
    });
    const rows = samples.map((s) => {
      const n = s.ids.length - s.targetStart;
      return { sample: s, mask: new Uint8Array(n).fill(1), advantages: Float32Array.from({ length: n }, () => rnd() - 0.5), samplerLogp: null, tokens: n };
    });
    const o = mempo.resolveTrainOptions({ microBatchTokens: 16384, loss: { klCoef: 0 }, optim: { lr: 1e-6 } });
    updateS = await time(() => mempo.policyUpdate(learner, rows, o, 0));
  } finally {
    await learner.close();
  }
  const res = {
    samples: S, tokens, threads, reps, torch: py.torch,
    raw_tokens_per_s: Math.round(tokens / py.raw_s),
    python_http_tokens_per_s: Math.round(tokens / py.http_s),
    node_tokens_per_s: Math.round(tokens / nodeS),
    update_tokens_per_s: Math.round(tokens / updateS),
    node_overhead_vs_raw: +(nodeS / py.raw_s - 1).toFixed(3),
    update_overhead_vs_raw: +(updateS / py.raw_s - 1).toFixed(3),
    optim_step_ms: Math.round(py.optim_step_s * 1000),
    save_weights_ms: Math.round(py.save_weights_s * 1000),
  };
  if (flag('--json')) console.log(JSON.stringify(res));
  else {
    console.log(`learner bench: ${S} samples, ${tokens} tokens, ${threads} threads, median of ${reps} (torch ${py.torch})`);
    for (const [k, label] of [['raw', 'raw torch forward+backward'], ['python_http', 'learner from Python over HTTP'], ['node', 'learner from Node (HttpLearner)'], ['update', 'policyUpdate (loss, backward, optimStep)']]) {
      console.log(`  ${label.padEnd(40)} ${String(res[`${k}_tokens_per_s`]).padStart(7)} tokens/s`);
    }
    console.log(`  overhead against raw: node ${(res.node_overhead_vs_raw * 100).toFixed(1)} %, update ${(res.update_overhead_vs_raw * 100).toFixed(1)} % (target ≤ 30 %)`);
    console.log(`  optim_step ${res.optim_step_ms} ms, save_weights ${res.save_weights_ms} ms`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
