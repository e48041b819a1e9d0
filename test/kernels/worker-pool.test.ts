/**
 * The addon's persistent worker pool (native/cpu/parallel.h): created once, reused by every call
 * (no thread per call), shared safely by worker_threads calling at the same time, joined when the
 * last env that loaded the addon goes away, and started again by a later one. Each check runs in
 * a child process (MEMPO_THREADS is read once per process) that loads the addon the tests load
 * (MEMPO_NATIVE_BINDING under scripts/asan-check.sh, else node-gyp-build); a hang fails on the
 * timeout. Native only: the JS twin has no threads.
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { EXPECTED_BACKEND } from '../helpers';

const root = path.resolve(__dirname, '..', '..');
const nativeIt = EXPECTED_BACKEND === 'native' ? it : it.skip;
const linuxIt = EXPECTED_BACKEND === 'native' && fs.existsSync('/proc/self/task') ? it : it.skip;

// Loads the addon and defines inputs large enough for every kernel to use all its workers.
const PRELUDE = `
const path = require('path');
const addon = process.env.MEMPO_NATIVE_BINDING ? require(path.resolve(process.env.MEMPO_NATIVE_BINDING)) : require('node-gyp-build')(${JSON.stringify(root)});
let seed = 7;
const rand = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
const B = 2048, T = 1024, R = 64, V = 8192;
const scores = Float64Array.from({ length: B }, () => (rand() < 0.5 ? 1 : 0));
const groups = Int32Array.from({ length: B }, (_, i) => i >> 4);
const mask = Uint8Array.from({ length: B * T }, () => (rand() < 0.8 ? 1 : 0));
const logits = Float32Array.from({ length: R * V }, () => (rand() - 0.5) * 40);
const targets = Int32Array.from({ length: R }, () => Math.floor(rand() * V));
const outcome = () => addon.grpoOutcomeAdvantage(scores, groups, B / 16, mask, B, T, 1e-6, true);
const gather = () => addon.gatherLogProbs(logits, targets, R, V);
const same = (a, b) => a.length === b.length && Buffer.compare(Buffer.from(a.buffer, a.byteOffset, a.byteLength), Buffer.from(b.buffer, b.byteOffset, b.byteLength)) === 0;
`;

function runChild(code: string, threads: number): string {
  return execFileSync(process.execPath, ['-e', PRELUDE + code], {
    env: { ...process.env, MEMPO_THREADS: String(threads) },
    encoding: 'utf8',
    timeout: 60000,
  });
}

describe('the native worker pool', () => {
  linuxIt('keeps the same worker threads from one call to the next (no thread per call)', () => {
    const out = runChild(
      `
const fs = require('fs');
const tids = () => new Set(fs.readdirSync('/proc/self/task'));
const before = tids();
outcome();
const afterFirst = tids();
for (let i = 0; i < 50; i++) { outcome(); gather(); }
const afterMany = tids();
const added = [...afterFirst].filter((t) => !before.has(t));
process.stdout.write(JSON.stringify({ added: added.length, kept: added.filter((t) => afterMany.has(t)).length, threads: addon.info().threads }));
`,
      3,
    );
    const r = JSON.parse(out) as { added: number; kept: number; threads: number };
    expect(r.threads).toBe(3);
    expect(r.added).toBeGreaterThanOrEqual(2); // MEMPO_THREADS - 1 workers, alive after the call
    expect(r.kept).toBe(r.added); // the same ones after 100 more calls
  });

  nativeIt('gives the same results, bit for bit, with one thread and with three', () => {
    const code = `process.stdout.write(JSON.stringify([Array.from(new Uint8Array(outcome().buffer, 0, 4 * 4096)), Array.from(gather())]));`;
    const one = runChild(code, 1);
    expect(runChild(code, 3)).toBe(one);
  });

  nativeIt('serves worker_threads calling at the same time, and the process exits when they and the main thread are done', () => {
    const out = runChild(
      `
const { Worker } = require('worker_threads');
const ref = { outcome: outcome(), gather: gather() };
const workerCode = ${JSON.stringify(PRELUDE)} + \`
const { parentPort, workerData } = require('worker_threads');
let ok = true;
for (let i = 0; i < 20; i++) ok = ok && same(outcome(), workerData.outcome) && same(gather(), workerData.gather);
parentPort.postMessage(ok);
\`;
const runs = Array.from({ length: 3 }, () => new Promise((resolve, reject) => {
  const w = new Worker(workerCode, { eval: true, workerData: ref });
  let ok = false;
  w.on('message', (m) => { ok = m; });
  w.on('error', reject);
  w.on('exit', () => resolve(ok));
}));
let mainOk = true;
for (let i = 0; i < 20; i++) mainOk = mainOk && same(outcome(), ref.outcome);
Promise.all(runs).then((oks) => {
  // The workers' envs are gone; the pool still serves the main thread.
  const after = same(outcome(), ref.outcome) && same(gather(), ref.gather);
  process.stdout.write(JSON.stringify({ workers: oks, main: mainOk, after }));
});
`,
      2,
    );
    expect(JSON.parse(out)).toEqual({ workers: [true, true, true], main: true, after: true });
  });

  nativeIt('joins the pool when the only env using it exits, and starts it again for the next', () => {
    const out = runChild(
      `
const { Worker } = require('worker_threads');
const once = () => new Promise((resolve, reject) => {
  const w = new Worker(${JSON.stringify(PRELUDE)} + "require('worker_threads').parentPort.postMessage(Array.from(gather()));", { eval: true });
  let got = null;
  w.on('message', (m) => { got = m; });
  w.on('error', reject);
  w.on('exit', () => resolve(got));
});
once().then((a) => once().then((b) => process.stdout.write(JSON.stringify({ equal: JSON.stringify(a) === JSON.stringify(b), length: a.length }))));
`,
      2,
    );
    expect(JSON.parse(out)).toEqual({ equal: true, length: 64 });
  });
});
