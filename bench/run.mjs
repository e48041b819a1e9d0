// `npm run bench`: each kernel on realistic MemPO shapes, JS twin vs native addon in the same
// run, plus this machine's single-pass read bandwidth and the share of it native
// gatherLogProbs reaches; then the model runtime (bench/runtime.mjs: batched generation and the
// 2N scorer on the embedded model, native vs JS gathering, peak RSS) and the 2N pass with logits
// only at the targets against full logits at V = 151,936 (bench/real-vocab.mjs), unless --kernels-only.
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

const GATHER_V = 151936;
function gatherInput(R, rand) {
  const logits = new Float32Array(R * GATHER_V);
  for (let i = 0; i < logits.length; i++) logits[i] = (rand() - 0.5) * 40;
  return { logits, targets: new Int32Array(R).map(() => Math.floor(rand() * GATHER_V)) };
}
/** Disjoint views of `rows` rows each, taken in turn. */
function gatherViews(logits, targets, R, rows) {
  let k = 0;
  const n = Math.max(1, Math.floor(R / rows)), V = GATHER_V;
  return { next: () => { const j = k++ % n; return [logits.subarray(j * rows * V, (j + 1) * rows * V), targets.subarray(j * rows, (j + 1) * rows)]; } };
}

// `--gather-child R`: this process's gatherLogProbs path (MEMPO_SIMD picks it, once per process,
// native/cpu/simd.h) timed on the addon directly: median ms at R rows and at 16 rows.
if (args.includes('--gather-child')) {
  const R = Number(args[args.indexOf('--gather-child') + 1]), V = GATHER_V;
  const { logits, targets } = gatherInput(R, rng(1));
  const median = (fn, n) => {
    fn();
    const t = [];
    for (let i = 0; i < n; i++) { const a = process.hrtime.bigint(); fn(); t.push(Number(process.hrtime.bigint() - a) / 1e6); }
    return t.sort((a, b) => a - b)[n >> 1];
  };
  const slow = process.env.MEMPO_SIMD === 'scalar';
  const few = gatherViews(logits, targets, R, 16);
  const msR = median(() => addon.gatherLogProbs(logits, targets, R, V), slow ? 3 : 15);
  const ms16 = median(() => addon.gatherLogProbs(...few.next(), 16, V), slow ? 5 : 48);
  process.stdout.write(JSON.stringify({ R, msR, ms16 }));
  process.exit(0);
}

// Each gatherLogProbs SIMD path (MEMPO_SIMD=avx512 | avx2 | scalar) in a child process, round-robin
// `rounds` times, each round after a fresh read-bandwidth probe here; medians over the rounds.
function gatherSimdPaths(R, rounds) {
  const paths = ['avx512', 'avx2', 'scalar'], runs = Object.fromEntries(paths.map((p) => [p, []])), bws = [];
  const script = fileURLToPath(import.meta.url);
  for (let k = 0; k < rounds; k++) {
    bws.push(readBandwidthGBs());
    for (const p of paths) {
      const env = { ...process.env, MEMPO_SIMD: p };
      runs[p].push(JSON.parse(execFileSync(process.execPath, [script, '--gather-child', String(R)], { env, encoding: 'utf8' })));
    }
  }
  const med = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  const bw = med(bws), out = { readBandwidthGBs: bw, readBandwidthRounds: bws, rounds, paths: {} };
  log(`\ngatherLogProbs SIMD paths (child processes, medians of ${rounds} rounds; read bandwidth ${bw.toFixed(1)} GB/s, rounds ${bws.map((b) => b.toFixed(1)).join(' / ')})`);
  for (const p of paths) {
    const row = {};
    for (const [key, rows] of [['msR', R], ['ms16', 16]]) {
      const ms = med(runs[p].map((x) => x[key])), gbs = (rows * GATHER_V * 4) / ms / 1e6;
      row[`R${rows}`] = { ms, GBs: gbs, bandwidthShare: gbs / bw, msRounds: runs[p].map((x) => x[key]) };
    }
    out.paths[p] = row;
    log(`  MEMPO_SIMD=${p.padEnd(7)} ` + Object.entries(row).map(([k, v]) => `${k}: ${v.ms.toFixed(2)} ms ${v.GBs.toFixed(1)} GB/s ${(100 * v.bandwidthShare).toFixed(0)}%`).join('   '));
  }
  return out;
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
  // Rows of logits at Qwen's vocabulary. R=16 cycles through 16 disjoint views of the R=256
  // buffer so that every call reads from memory (16 rows, 9.7 MB, would stay in a large L3).
  const R = quick ? 32 : 256, V = GATHER_V;
  const { logits, targets } = gatherInput(R, r);
  const row = await compare('gatherLogProbs', `R=${R} V=${V}`, () => mempo.gatherLogProbs(logits, targets, R, V), R * V * 4);
  row.bandwidthShare = row.nativeGBs / readBandwidth;
  log(`${''.padEnd(57)}native reaches ${(100 * row.bandwidthShare).toFixed(0)}% of read bandwidth`);
  kernels.push(row);
  const few = gatherViews(logits, targets, R, 16);
  const row16 = await compare('gatherLogProbs', `R=16 V=${V}`, () => mempo.gatherLogProbs(...few.next(), 16, V), 16 * V * 4);
  row16.bandwidthShare = row16.nativeGBs / readBandwidth;
  log(`${''.padEnd(57)}native reaches ${(100 * row16.bandwidthShare).toFixed(0)}% of read bandwidth`);
  kernels.push(row16);
}
let gatherPaths;
if (!args.includes('--skip-simd-paths')) gatherPaths = gatherSimdPaths(quick ? 32 : 256, quick ? 1 : 3);

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

// Each in its own process, one ORT thread so that figures are comparable on a shared 2-core
// machine: the model runtime (it forks one per phase for clean peak-RSS figures), then the 2N pass
// with selected vs full logits (its model is built by tools/: `npm run bench`'s prebench compiles it).
function child(script, title) {
  const childArgs = [path.join(root, 'bench', script), '--threads', '1', ...(quick ? ['--quick'] : [])];
  log(`\n${title} (bench/${script}):`);
  if (json) return JSON.parse(execFileSync(process.execPath, [...childArgs, '--json'], { encoding: 'utf8', maxBuffer: 1 << 26 }));
  execFileSync(process.execPath, childArgs, { stdio: 'inherit' });
  return undefined;
}
let runtime, realVocab;
if (!args.includes('--kernels-only')) {
  runtime = child('runtime.mjs', 'model runtime');
  realVocab = child('real-vocab.mjs', '2N scoring pass, selected vs full logits');
}

if (json) {
  const out = { machine, readBandwidthGBs: readBandwidth, kernels };
  if (gatherPaths) out.gatherSimdPaths = gatherPaths;
  if (runtime) out.runtime = runtime;
  if (realVocab) out.realVocab = realVocab;
  process.stdout.write(JSON.stringify(out, null, 2) + '\n');
}
