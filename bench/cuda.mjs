// CUDA vs CPU (native) vs JS on MemPO shapes. Run by scripts/gpu-check.sh on a GPU machine:
//   gatherLogProbs R=256 and R=4608 at V=151936 (host logits each call, and resident in a
//   DeviceBuffer), advantages at B=2048 T=4096 (groups of 16, 3 mem spans per trajectory),
//   ppoPolicyLoss at 8M tokens.
// Needs dist/ (npm run build:ts) and the CUDA addon (scripts/build-cuda.sh; path in
// MEMPO_NATIVE_BINDING, default build-cuda/Release/mempo.node). Without a usable GPU it still
// runs, CPU and JS only, and says so.
//   node bench/cuda.mjs [--json] [--quick] [--no-js] [--out results.json]
// Fixed iteration counts (not time-boxed) so the whole run fits a few minutes; the JS twin runs
// once per shape (tens of seconds in total), --no-js skips it.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.env.MEMPO_NATIVE_BINDING ??= path.join(root, 'build-cuda', 'Release', 'mempo.node');
delete process.env.MEMPO_BACKEND;
delete process.env.MEMPO_DEVICE;

const args = process.argv.slice(2);
const json = args.includes('--json');
const quick = args.includes('--quick');
const noJs = args.includes('--no-js');
const outIdx = args.indexOf('--out');
const outFile = outIdx >= 0 ? args[outIdx + 1] : null;
const log = json ? () => {} : (...a) => console.log(...a);

const mempo = require(path.join(root, 'dist', 'index.js'));
const be = require(path.join(root, 'dist', 'kernels', 'backend.js'));
const errors = be.nativeLoadErrors();
if (errors.length) {
  console.error(`bench/cuda.mjs: the addon at ${process.env.MEMPO_NATIVE_BINDING} did not load:\n${errors.join('\n')}`);
  process.exit(1);
}
const info = be.nativeInfo();
const haveCuda = info.cuda === true;

const { mulberry32: rng } = require(path.join(root, 'dist', 'rng.js'));

/** Mean ms over `iters` calls after `warmup` calls. */
function time(fn, iters, warmup = 1) {
  for (let i = 0; i < warmup; i++) fn();
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < iters; i++) fn();
  return Number(process.hrtime.bigint() - t0) / 1e6 / iters;
}

const ITERS = { 'native-cuda': 5, native: 3, js: 1 };
const WARMUP = { 'native-cuda': 2, native: 1, js: 0 };

function onBackends(fn, { js = true } = {}) {
  const res = {};
  const list = [...(haveCuda ? ['native-cuda'] : []), 'native', ...(js && !noJs ? ['js'] : [])];
  for (const b of list) {
    be.setBackend(b);
    res[b] = time(fn, ITERS[b], WARMUP[b]);
  }
  be.setBackend(haveCuda ? 'native-cuda' : 'native');
  return res;
}

const rows = [];
function report(name, shape, ms, bytes) {
  const row = { name, shape, ms };
  if (bytes) row.gbs = Object.fromEntries(Object.entries(ms).map(([k, v]) => [k, bytes / (v / 1e3) / 1e9]));
  if (ms['native-cuda'] !== undefined) {
    row.cudaVsNative = ms.native / ms['native-cuda'];
    if (ms.js !== undefined) row.cudaVsJs = ms.js / ms['native-cuda'];
  }
  rows.push(row);
  const cell = (k) =>
    ms[k] === undefined ? '' : `${k} ${ms[k].toFixed(2).padStart(9)} ms${bytes ? ` (${row.gbs[k].toFixed(1)} GB/s)` : ''}  `;
  log(`${name.padEnd(30)} ${shape.padEnd(30)} ${cell('native-cuda')}${cell('native')}${cell('js')}` +
      (row.cudaVsNative ? `cuda/native ${row.cudaVsNative.toFixed(1)}x` : ''));
}

log(`machine: ${os.cpus()[0]?.model ?? 'unknown'} x${os.cpus().length}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}`);
log(`addon: ${process.env.MEMPO_NATIVE_BINDING}  cuda=${info.cuda}${haveCuda ? ` (${info.deviceName})` : ` (${info.cudaError})`}  cpu ${info.simd} x${info.threads}`);
if (!haveCuda) log('NOTE: no usable CUDA device; CPU and JS only');
log('');

const r = rng(1);
const V = 151936;
for (const R of quick ? [32] : [256, 4608]) {
  const logits = new Float32Array(R * V);
  for (let i = 0; i < logits.length; i++) logits[i] = (r() - 0.5) * 30;
  const targets = new Int32Array(R).map(() => Math.floor(r() * V));
  const bytes = logits.byteLength;
  report('gatherLogProbs (host logits)', `R=${R} V=${V}`, onBackends(() => mempo.gatherLogProbs(logits, targets, R, V)), bytes);
  if (haveCuda) {
    be.setBackend('native-cuda');
    const t0 = process.hrtime.bigint();
    const buf = mempo.uploadToDevice(logits);
    const uploadMs = Number(process.hrtime.bigint() - t0) / 1e6;
    const ms = { 'native-cuda': time(() => mempo.gatherLogProbsOnDevice(buf, targets, R, V), 10, 2) };
    report('gatherLogProbs (DeviceBuffer)', `R=${R} V=${V}`, ms, bytes);
    rows[rows.length - 1].uploadMs = uploadMs;
    log(`${''.padEnd(30)} ${'(one-time upload)'.padEnd(30)} ${uploadMs.toFixed(1)} ms`);
    buf.free();
  }
}

{
  const B = quick ? 256 : 2048, T = 4096, group = 16;
  const scores = new Float64Array(B).map(() => (r() < 0.5 ? 1 : 0));
  const uids = Array.from({ length: B }, (_, i) => `q${Math.floor(i / group)}`);
  const mask = new Uint8Array(B * T);
  for (let b = 0; b < B; b++) mask.fill(1, b * T, b * T + 3000 + Math.floor(r() * 1000));
  report('grpoOutcomeAdvantage', `B=${B} T=${T} g=${group}`, onBackends(() => mempo.grpoOutcomeAdvantage(scores, uids, mask, T)));
  const M = B * 3;
  const spans = new Int32Array(M * 3);
  const memUids = [];
  for (let b = 0; b < B; b++) {
    for (let k = 0; k < 3; k++) {
      const s = 200 + 1200 * k;
      spans.set([b, s, s + 60 + Math.floor(r() * 60)], (b * 3 + k) * 3);
      memUids.push(uids[b]);
    }
  }
  const rewards = new Float64Array(M).map(() => r() - 0.5);
  report('memoryAdvantage', `B=${B} T=${T} 3 spans/row`, onBackends(() => mempo.memoryAdvantage(rewards, memUids, spans, B, T)));
}

{
  const B = quick ? 256 : 2048, T = 4096, n = B * T;
  const logp = new Float32Array(n);
  const oldLogp = new Float32Array(n);
  const advantages = new Float32Array(n);
  const refLogp = new Float32Array(n);
  const mask = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    logp[i] = -r() * 3;
    oldLogp[i] = logp[i] + (r() - 0.5) * 0.2;
    refLogp[i] = logp[i] + (r() - 0.5) * 0.2;
    advantages[i] = (r() - 0.5) * 2;
    mask[i] = r() < 0.9 ? 1 : 0;
  }
  const shape = `${(n / 2 ** 20).toFixed(0)}M tokens (B=${B} T=${T})`;
  report('ppoPolicyLoss', shape, onBackends(() => mempo.ppoPolicyLoss({ logp, oldLogp, advantages, mask, rows: B, cols: T })));
  report('ppoPolicyLoss + k3 KL', shape, onBackends(() =>
    mempo.ppoPolicyLoss({ logp, oldLogp, advantages, mask, rows: B, cols: T, refLogp, klType: 'k3', klCoef: 0.001 })));
}

const result = {
  machine: { cpu: os.cpus()[0]?.model, cores: os.cpus().length, node: process.version },
  addon: info,
  rows,
};
if (json) console.log(JSON.stringify(result, null, 2));
if (outFile) fs.writeFileSync(outFile, JSON.stringify(result, null, 2));
