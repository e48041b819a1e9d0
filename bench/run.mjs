// `npm run bench`: each kernel on realistic MemPO shapes, JS twin vs native addon in the same
// run, plus this machine's single-pass read bandwidth and the share of it native
// gatherLogProbs reaches; then the model runtime (bench/runtime.mjs: batched generation and the
// 2N scorer on the embedded model, native vs JS gathering, peak RSS), unless --kernels-only.
// `npm run bench -- --json` prints the same figures as JSON on stdout.
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Bench } from 'tinybench';

const require = createRequire(import.meta.url);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const mempo = require(path.join(root, 'dist', 'index.js'));
const addon = require('node-gyp-build')(root);

const args = process.argv.slice(2);
const json = args.includes('--json');
const quick = args.includes('--quick'); // smaller shapes, for a smoke run
const log = json ? () => {} : (...a) => console.log(...a);

const { mulberry32: rng } = require(path.join(root, 'dist', 'rng.js'));

function readBandwidthGBs() {
  const n = 64 * 1024 * 1024; // 256 MiB of floats: far beyond any cache
  const buf = new Float32Array(n).fill(1);
  let best = Infinity;
  addon.readBandwidth(buf, 1); // touch the pages once
  for (let i = 0; i < 5; i++) best = Math.min(best, addon.readBandwidth(buf, 2) / 2);
  return (n * 4) / best / 1e9;
}

// Each iteration first yields to the event loop once, as a trainer's step does between calls:
// that is when the addon's finalizers return dropped [B, T] results to its mapping pool.
const turn = () => new Promise((resolve) => setImmediate(resolve));

async function measure(fn, time) {
  const bench = new Bench({ time, warmupTime: 0, warmupIterations: 1, iterations: 3 });
  bench.add('x', fn, { beforeEach: turn });
  await bench.run();
  const r = bench.tasks[0].result;
  if (!r || r.state !== 'completed') throw new Error(`benchmark task did not complete: ${r?.state} ${r?.error ?? ''}`);
  return { opsPerSec: 1000 / r.latency.mean, ms: r.latency.mean, rme: r.latency.rme };
}

// jsFn: what the JS side runs where it differs from fn (the advantage stage: 3 kernels vs fused).
async function compare(name, shape, fn, bytes, jsFn = fn) {
  mempo.setBackend('js');
  const js = await measure(jsFn, 1500);
  mempo.setBackend('native');
  const native = await measure(fn, 1500);
  const row = { name, shape, jsOpsPerSec: js.opsPerSec, nativeOpsPerSec: native.opsPerSec, ratio: native.opsPerSec / js.opsPerSec };
  if (bytes) row.nativeGBs = (bytes * native.opsPerSec) / 1e9;
  log(
    `${name.padEnd(22)} ${shape.padEnd(34)} js ${js.ms.toFixed(2).padStart(9)} ms  native ${native.ms.toFixed(2).padStart(8)} ms  ` +
      `ratio ${row.ratio.toFixed(1).padStart(6)}x` + (bytes ? `  ${row.nativeGBs.toFixed(1)} GB/s` : ''),
  );
  return row;
}

const r = rng(1);
const info = addon.info();
const machine = {
  cpu: os.cpus()[0]?.model ?? 'unknown',
  cores: os.cpus().length,
  memoryGiB: Math.round(os.totalmem() / 2 ** 30),
  node: process.version,
  simd: info.simd,
  nativeThreads: info.threads,
};
log(`machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB, Node ${machine.node}, native ${machine.simd} x${machine.nativeThreads} threads`);
const readBandwidth = readBandwidthGBs();
log(`single-pass read bandwidth: ${readBandwidth.toFixed(1)} GB/s\n`);

const kernels = [];

{
  const R = quick ? 32 : 256, V = 151936;
  const logits = new Float32Array(R * V);
  for (let i = 0; i < logits.length; i++) logits[i] = (r() - 0.5) * 40;
  const targets = new Int32Array(R).map(() => Math.floor(r() * V));
  const row = await compare('gatherLogProbs', `R=${R} V=${V}`, () => mempo.gatherLogProbs(logits, targets, R, V), R * V * 4);
  row.bandwidthShare = row.nativeGBs / readBandwidth;
  log(`${''.padEnd(57)}native reaches ${(100 * row.bandwidthShare).toFixed(0)}% of read bandwidth`);
  kernels.push(row);
}
{
  const R = 288, A = 16;
  const logp = new Float32Array(R * A).map(() => Math.log(r() + 1e-6));
  const mask = new Uint8Array(R * A).map(() => (r() < 0.8 ? 1 : 0));
  kernels.push(await compare('answerProbability', `R=${R} A=${A}`, () => mempo.answerProbability(logp, mask, R, A)));
}
{
  const B = quick ? 256 : 2048, T = 4096;
  const scores = new Float32Array(B).map(() => (r() < 0.5 ? 1 : 0));
  const groups = Array.from({ length: B }, (_, i) => Math.floor(i / 16));
  const mask = new Uint8Array(B * T).map(() => (r() < 0.8 ? 1 : 0));
  kernels.push(await compare('grpoOutcomeAdvantage', `B=${B} T=${T} groups of 16`, () => mempo.grpoOutcomeAdvantage(scores, groups, mask, T)));
  const M = B * 3;
  const spans = new Int32Array(M * 3);
  for (let m = 0; m < M; m++) {
    const start = (m % 3) * 1300 + Math.floor(r() * 200);
    spans.set([Math.floor(m / 3), start, start + 40 + Math.floor(r() * 80)], 3 * m);
  }
  const rewards = new Float32Array(M).map(() => r() - 0.5);
  const memGroups = Array.from({ length: M }, (_, m) => Math.floor(m / 48));
  kernels.push(await compare('memoryAdvantage', `B=${B} T=${T} 3 spans/traj`, () => mempo.memoryAdvantage(rewards, memGroups, spans, B, T)));
  // The whole advantage stage (docs/algorithm.md §5): outcome + memory + final. `stage3` is the
  // three-kernel path the pipeline used to take; the headline row is native mempoAdvantages (one
  // pass) against that path on the JS twins, the work the JS backend does for the same results.
  const stage3 = () => {
    const outcome = mempo.grpoOutcomeAdvantage(scores, groups, mask, T);
    return mempo.finalAdvantage(outcome, mempo.memoryAdvantage(rewards, memGroups, spans, B, T), mask, { alpha: 0.5 });
  };
  const fused = () => mempo.mempoAdvantages({ scores, groups, responseMask: mask, seqLen: T, memRewards: rewards, memGroups, spans, alpha: 0.5 });
  const stageShape = `B=${B} T=${T} 3 spans/traj`;
  const stage = await compare('advantage stage', `${stageShape}, fused vs JS 3 kernels`, fused, 0, stage3);
  const separate = await compare('advantage stage 3 krn', stageShape, stage3);
  const fusedBoth = await compare('mempoAdvantages', `${stageShape}, both fused`, fused);
  log(`${''.padEnd(57)}fused native is ${(separate.nativeOpsPerSec > 0 ? stage.nativeOpsPerSec / separate.nativeOpsPerSec : 0).toFixed(1)}x the 3 native kernels`);
  kernels.push(stage, separate, fusedBoth);
}
{
  const rows = quick ? 256 : 2048, cols = 4096, n = rows * cols;
  const logp = new Float32Array(n).map(() => -r() * 4);
  const oldLogp = logp.map((x) => x + (r() - 0.5) * 0.4);
  const advantages = new Float32Array(n).map(() => r() - 0.5);
  const mask = new Uint8Array(n).map(() => (r() < 0.9 ? 1 : 0));
  kernels.push(await compare('ppoPolicyLoss', `B*T=${n} (${rows}x${cols})`, () => mempo.ppoPolicyLoss({ logp, oldLogp, advantages, mask, rows, cols })));
}

let runtime;
if (!args.includes('--kernels-only')) {
  // Its own process (it forks one per phase for clean peak-RSS figures); one ORT thread so that
  // figures are comparable on a shared 2-core machine.
  const runtimeArgs = [path.join(root, 'bench', 'runtime.mjs'), '--threads', '1', ...(quick ? ['--quick'] : [])];
  log('\nmodel runtime (bench/runtime.mjs):');
  if (json) runtime = JSON.parse(execFileSync(process.execPath, [...runtimeArgs, '--json'], { encoding: 'utf8', maxBuffer: 1 << 26 }));
  else execFileSync(process.execPath, runtimeArgs, { stdio: 'inherit' });
}

if (json) {
  const out = { machine, readBandwidthGBs: readBandwidth, kernels };
  if (runtime) out.runtime = runtime;
  process.stdout.write(JSON.stringify(out, null, 2) + '\n');
}
