// `node bench/profile-call.mjs [--json]` (after `npm run build:ts`): where a kernel call's time
// goes at small shapes, per phase, median µs of many calls (each phase timed on its own, in
// turn, round-robin so that load spikes hit every phase alike). Phases: the public wrapper on
// the native backend (checks + group mapping + the addon), the addon called directly with
// prepared arguments (argument checks in C++, allocation, compute, threads), the wrapper's JS
// steps alone (denseGroups, checkGroupRange) and the JS twin. Run it under MEMPO_THREADS=1 and
// =2: the difference at one shape is what the threads cost or save.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const mempo = require(path.join(root, 'dist', 'index.js'));
const { denseGroups } = require(path.join(root, 'dist', 'kernels', 'groups.js'));
const { checkGroupRange } = require(path.join(root, 'dist', 'kernels', 'group-normalize.js'));
const { mulberry32 } = require(path.join(root, 'dist', 'rng.js'));
const addon = require('node-gyp-build')(root);
const json = process.argv.includes('--json');

/** Median µs per call of each phase, the phases interleaved call by call. */
function profile(phases, calls) {
  const names = Object.keys(phases), t = Object.fromEntries(names.map((n) => [n, []]));
  for (const n of names) for (let i = 0; i < 3; i++) phases[n](); // warm up (JIT, pools)
  for (let i = 0; i < calls; i++) {
    for (const n of names) {
      const a = process.hrtime.bigint();
      phases[n]();
      t[n].push(Number(process.hrtime.bigint() - a) / 1e3);
    }
  }
  return Object.fromEntries(names.map((n) => { const s = t[n].sort((x, y) => x - y); return [n, { median: s[s.length >> 1], min: s[0] }]; }));
}

function advantageCase(B, T) {
  const r = mulberry32(7);
  const scores = new Float64Array(B).map(() => (r() < 0.5 ? 1 : 0));
  const uids = Array.from({ length: B }, (_, i) => `q${Math.floor(i / 16)}`);
  const ints = Int32Array.from({ length: B }, (_, i) => Math.floor(i / 16));
  const mask = new Uint8Array(B * T).map(() => (r() < 0.8 ? 1 : 0));
  const g = denseGroups(uids, 'groups', B, 'B');
  const out = new Float32Array(B * T); // a trainer's buffer, reused call after call
  return {
    'wrapper, string uids': () => mempo.grpoOutcomeAdvantage(scores, uids, mask, T),
    'wrapper, Int32Array ids': () => mempo.grpoOutcomeAdvantage(scores, ints, mask, T),
    'wrapper, Int32Array ids, out': () => mempo.grpoOutcomeAdvantage(scores, ints, mask, T, { out }),
    'addon direct': () => addon.grpoOutcomeAdvantage(scores, g.ids, g.count, mask, B, T, 1e-6, true),
    'addon direct, out': () => addon.grpoOutcomeAdvantage(scores, g.ids, g.count, mask, B, T, 1e-6, true, out),
    'denseGroups (string uids)': () => denseGroups(uids, 'groups', B, 'B'),
    'denseGroups (Int32Array)': () => denseGroups(ints, 'groups', B, 'B'),
    checkGroupRange: () => checkGroupRange(scores, g.ids, g.count, 1e-6, true, 'scores'),
    'JS twin': () => { mempo.setBackend('js'); try { mempo.grpoOutcomeAdvantage(scores, uids, mask, T); } finally { mempo.setBackend('native'); } },
  };
}

/** The fused advantage stage (mempoAdvantages) as bench/peer.mjs shapes it: 3 spans per row. */
function stageCase(B, T) {
  const r = mulberry32(13), M = B * 3, third = Math.floor(T / 3);
  const spans = new Int32Array(M * 3);
  for (let m = 0; m < M; m++) {
    const start = (m % 3) * third + Math.floor(r() * third * 0.15);
    spans.set([Math.floor(m / 3), start, start + Math.max(1, Math.floor(third * (0.03 + r() * 0.06)))], 3 * m);
  }
  const input = {
    scores: new Float64Array(B).map(() => (r() < 0.5 ? 1 : 0)), groups: Int32Array.from({ length: B }, (_, i) => Math.floor(i / 16)),
    responseMask: new Uint8Array(B * T).map(() => (r() < 0.8 ? 1 : 0)), seqLen: T, alpha: 0.5,
    memRewards: new Float64Array(M).map(() => r() - 0.5), memGroups: Int32Array.from({ length: M }, (_, m) => Math.floor(m / 48)), spans,
  };
  const out = { outcome: new Float32Array(B * T), memory: new Float32Array(B * T), final: new Float32Array(B * T) };
  const withOut = { ...input, out };
  const direct = (...o) => addon.mempoAdvantages(input.scores, input.groups, B / 16, input.responseMask, B, T, input.memRewards,
    input.memGroups, M / 48, spans, 1e-6, true, 0.5, ...o);
  return {
    wrapper: () => mempo.mempoAdvantages(input),
    'wrapper, out': () => mempo.mempoAdvantages(withOut),
    'addon direct': () => direct(),
    'addon direct, out': () => direct(out.outcome, out.memory, out.final),
  };
}

function lossCase(rows, cols) {
  const r = mulberry32(9), n = rows * cols;
  const logp = new Float32Array(n).map(() => -r() * 4);
  const oldLogp = logp.map((x) => x + (r() - 0.5) * 0.4);
  const advantages = new Float32Array(n).map(() => r() - 0.5);
  const mask = new Uint8Array(n).map(() => (r() < 0.9 ? 1 : 0));
  const input = { logp, oldLogp, advantages, mask, rows, cols };
  return {
    wrapper: () => mempo.ppoPolicyLoss(input),
    'addon direct': () => addon.ppoPolicyLoss(logp, oldLogp, advantages, mask, rows, cols, 0.2, 0.2, 3, 0, null, 0, 0),
  };
}

function gatherCase(R, V) {
  const r = mulberry32(11);
  const logits = new Float32Array(R * V).map(() => (r() - 0.5) * 40);
  const targets = Int32Array.from({ length: R }, () => Math.floor(r() * V));
  return {
    wrapper: () => mempo.gatherLogProbs(logits, targets, R, V),
    'addon direct': () => addon.gatherLogProbs(logits, targets, R, V),
  };
}

mempo.setBackend('native');
const info = addon.info();
const out = { threads: info.threads, simd: info.simd, cases: {} };
const cases = [
  ['grpoOutcomeAdvantage B=16 T=64', advantageCase(16, 64), 4000],
  ['grpoOutcomeAdvantage B=512 T=1024', advantageCase(512, 1024), 300],
  ['mempoAdvantages B=16 T=64', stageCase(16, 64), 4000],
  ['mempoAdvantages B=512 T=1024', stageCase(512, 1024), 300],
  ['ppoPolicyLoss 16x64', lossCase(16, 64), 4000],
  ['ppoPolicyLoss 512x1024', lossCase(512, 1024), 200],
  ['gatherLogProbs R=16 V=3072', gatherCase(16, 3072), 4000],
  ['gatherLogProbs R=256 V=3072', gatherCase(256, 3072), 600],
];
for (const [name, phases, calls] of cases) {
  out.cases[name] = profile(phases, calls);
  if (!json) {
    console.log(`${name} (MEMPO_THREADS → ${info.threads} threads, ${info.simd}), µs per call, median / min:`);
    for (const [phase, v] of Object.entries(out.cases[name])) console.log(`  ${phase.padEnd(28)} ${v.median.toFixed(1).padStart(9)} ${v.min.toFixed(1).padStart(9)}`);
  }
}
if (json) process.stdout.write(JSON.stringify(out, null, 2) + '\n');
