// `npm run bench:peer`: mempo's kernels against torch running the same math the way verl writes
// it (bench/peer.py: verl's own formulas, plus the fastest vectorised torch form of each), on the
// same inputs, one thread each and two threads each (MEMPO_THREADS=1/2, torch.set_num_threads(1/2)).
// Long-lived children per thread count, two mempo (this script with --child: out and alloc) and
// one torch; the parent writes each case's inputs once (seeded) into a temp dir all read, then
// runs interleaved rounds (mempo, torch, mempo, torch, ...), each child timing `--reps` calls per
// round; the figures are medians over all calls. Every output is checked against torch's within
// float32 rounding. The [B, T] advantages (grpo, stage) are timed two ways, each in its own
// child, interleaved round by round: into arrays the child allocated once (`out`, as a trainer
// reusing its buffers per micro-batch calls them: the ratio's figure) and into new arrays (the
// allocating call, kept beside it); the two results must be identical bit for bit. Skipped, saying why, when no Python
// with torch is found (MEMPO_PYTHON, python3, /usr/bin/python3).
// Flags: --rounds 5, --reps (per round; default by case), --quick (small shapes only),
// --threads 1,2, --only name-substring, --json.
import { execFileSync, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { root, flag, value } from './args.mjs';

const require = createRequire(import.meta.url);
const mempo = require(path.join(root, 'dist', 'index.js'));
const { mulberry32 } = require(path.join(root, 'dist', 'rng.js'));
const script = fileURLToPath(import.meta.url);

// --- the cases: name, kind, shape, reps per round --------------------------------------------------
const BIG_V = 151936, SMALL_V = 3072;
const CASES = [
  { name: 'gather R=256 V=151936', kind: 'gather', R: 256, V: BIG_V, reps: 5 },
  { name: 'gather R=16 V=151936', kind: 'gather', R: 16, V: BIG_V, reps: 40, small: true },
  { name: 'gather R=256 V=3072', kind: 'gather', R: 256, V: SMALL_V, reps: 60, small: true },
  { name: 'gather R=16 V=3072', kind: 'gather', R: 16, V: SMALL_V, reps: 400, small: true },
  { name: 'grpo B=2048 T=4096', kind: 'grpo', B: 2048, T: 4096, reps: 5 },
  { name: 'grpo B=512 T=1024', kind: 'grpo', B: 512, T: 1024, reps: 60, small: true },
  { name: 'grpo B=16 T=64', kind: 'grpo', B: 16, T: 64, reps: 400, small: true },
  { name: 'stage B=2048 T=4096', kind: 'stage', B: 2048, T: 4096, reps: 5 },
  { name: 'stage B=512 T=1024', kind: 'stage', B: 512, T: 1024, reps: 40, small: true },
  { name: 'ppo 2048x4096 (8.4M tokens)', kind: 'ppo', rows: 2048, cols: 4096, reps: 3 },
  { name: 'ppo 256x4096 (1M tokens)', kind: 'ppo', rows: 256, cols: 4096, reps: 10, small: true },
  { name: 'ppo 16x64', kind: 'ppo', rows: 16, cols: 64, reps: 400, small: true },
];

const bin = (dir, name, arr) => writeFileSync(path.join(dir, `${name}.bin`), Buffer.from(arr.buffer, arr.byteOffset, arr.byteLength));
const readF32 = (dir, name) => { const b = readFileSync(path.join(dir, `${name}.bin`)); return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4); };
const readBin = (dir, name, Ctor) => { const b = readFileSync(path.join(dir, `${name}.bin`)); return new Ctor(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength)); };

/** The inputs of a case, seeded, as bench/run.mjs shapes them; also written to dir for torch. */
function writeInputs(c, dir) {
  const r = mulberry32(17);
  if (c.kind === 'gather') {
    const logits = new Float32Array(c.R * c.V);
    for (let i = 0; i < logits.length; i++) logits[i] = (r() - 0.5) * 40;
    bin(dir, 'logits', logits);
    bin(dir, 'targets', Int32Array.from({ length: c.R }, () => Math.floor(r() * c.V)));
  } else if (c.kind === 'grpo' || c.kind === 'stage') {
    const { B, T } = c;
    c.groups = Math.ceil(B / 16);
    bin(dir, 'scores', Float64Array.from({ length: B }, () => (r() < 0.5 ? 1 : 0)));
    bin(dir, 'groups', Int32Array.from({ length: B }, (_, i) => Math.floor(i / 16)));
    bin(dir, 'mask', new Uint8Array(B * T).map(() => (r() < 0.8 ? 1 : 0)));
    if (c.kind === 'stage') {
      const M = B * 3, third = Math.floor(T / 3), spans = new Int32Array(M * 3);
      for (let m = 0; m < M; m++) {
        const start = (m % 3) * third + Math.floor(r() * third * 0.15);
        spans.set([Math.floor(m / 3), start, start + Math.max(1, Math.floor(third * (0.03 + r() * 0.06)))], 3 * m);
      }
      bin(dir, 'spans', spans);
      bin(dir, 'rewards', Float64Array.from({ length: M }, () => r() - 0.5));
      bin(dir, 'memGroups', Int32Array.from({ length: M }, (_, m) => Math.floor(m / 48)));
      c.memGroups = Math.ceil(M / 48);
      c.alpha = 0.5;
    }
  } else {
    const n = c.rows * c.cols;
    const logp = new Float32Array(n).map(() => -r() * 4);
    bin(dir, 'logp', logp);
    bin(dir, 'oldLogp', logp.map((x) => x + (r() - 0.5) * 0.4));
    bin(dir, 'advantages', new Float32Array(n).map(() => r() - 0.5));
    bin(dir, 'mask', new Uint8Array(n).map(() => (r() < 0.9 ? 1 : 0)));
  }
}

// --- the mempo child ---------------------------------------------------------------------------------
/**
 * mempo's calls for a case, through the public API on the native backend (integer group ids):
 * `alloc` returns new arrays; `out` (the [B, T] advantages) writes into arrays allocated once,
 * as a trainer that reuses its buffers per micro-batch calls it.
 */
function mempoCall(c, dir) {
  if (c.kind === 'gather') {
    const logits = readF32(dir, 'logits'), targets = readBin(dir, 'targets', Int32Array);
    return { runs: { alloc: () => mempo.gatherLogProbs(logits, targets, c.R, c.V) }, save: (o) => ({ out: o }) };
  }
  if (c.kind === 'grpo' || c.kind === 'stage') {
    const scores = readBin(dir, 'scores', Float64Array), groups = readBin(dir, 'groups', Int32Array);
    const mask = readBin(dir, 'mask', Uint8Array);
    const n = c.B * c.T;
    if (c.kind === 'grpo') {
      const out = new Float32Array(n);
      return {
        runs: { out: () => mempo.grpoOutcomeAdvantage(scores, groups, mask, c.T, { out }), alloc: () => mempo.grpoOutcomeAdvantage(scores, groups, mask, c.T) },
        save: (o) => ({ out: o }),
      };
    }
    const input = {
      scores, groups, responseMask: mask, seqLen: c.T, alpha: c.alpha,
      memRewards: readBin(dir, 'rewards', Float64Array), memGroups: readBin(dir, 'memGroups', Int32Array), spans: readBin(dir, 'spans', Int32Array),
    };
    const withOut = { ...input, out: { outcome: new Float32Array(n), memory: new Float32Array(n), final: new Float32Array(n) } };
    return { runs: { out: () => mempo.mempoAdvantages(withOut), alloc: () => mempo.mempoAdvantages(input) }, save: (o) => o };
  }
  const input = {
    logp: readF32(dir, 'logp'), oldLogp: readF32(dir, 'oldLogp'), advantages: readF32(dir, 'advantages'),
    mask: readBin(dir, 'mask', Uint8Array), rows: c.rows, cols: c.cols, clipC: 3,
  };
  return { runs: { alloc: () => mempo.ppoPolicyLoss(input) }, save: (o) => ({ loss: Float32Array.of(o.loss), grad: o.grad }) };
}

// Each call after one event-loop turn, as a trainer's step makes between calls (the addon's
// dropped results go back to its pool then); only the call is timed.
const turn = () => new Promise((resolve) => setImmediate(resolve));

async function child() {
  mempo.setBackend('native');
  let cached = null;
  for await (const line of createInterface({ input: process.stdin })) {
    const cmd = JSON.parse(line);
    if (cached?.name !== cmd.case.name) cached = { name: cmd.case.name, call: mempoCall(cmd.case, cmd.dir) };
    const run = cached.call.runs[cmd.variant];
    const first = run();
    if (cmd.save) for (const [part, a] of Object.entries(cached.call.save(first))) bin(cmd.dir, `${cmd.prefix}-${part}`, a);
    const times = [];
    for (let i = 0; i < cmd.reps; i++) {
      await turn();
      const t0 = process.hrtime.bigint();
      run();
      times.push(Number(process.hrtime.bigint() - t0) / 1e9);
    }
    process.stdout.write(JSON.stringify({ times: { [cmd.variant]: times }, info: mempo.nativeInfo() }) + '\n');
  }
}

// --- the parent ----------------------------------------------------------------------------------------
/** A child speaking one JSON line per command. */
function worker(cmd, argv, env) {
  const p = spawn(cmd, argv, { env, stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: p.stdout })[Symbol.asyncIterator]();
  return {
    async ask(msg) {
      p.stdin.write(JSON.stringify(msg) + '\n');
      const { value: line, done } = await lines.next();
      if (done) throw new Error(`${cmd} ${argv.join(' ')} exited before answering`);
      return JSON.parse(line);
    },
    close() { p.stdin.end(); },
  };
}

function findTorch() {
  const tried = [];
  for (const py of process.env.MEMPO_PYTHON ? [process.env.MEMPO_PYTHON] : ['python3', '/usr/bin/python3']) {
    try {
      const v = execFileSync(py, ['-c', 'import torch, numpy; print(torch.__version__)'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
      return { python: py, torch: v };
    } catch (err) {
      tried.push(`${py}: ${String(err.stderr || err.message).trim().split('\n').pop()}`);
    }
  }
  return { tried };
}

/** Largest |a − b| over the largest |b|: float32 rounding differences stay around 1e-7. */
function relError(a, b) {
  if (a.length !== b.length) return Infinity;
  let diff = 0, scale = 0;
  for (let i = 0; i < a.length; i++) {
    if (Number.isNaN(a[i]) !== Number.isNaN(b[i])) return Infinity;
    diff = Math.max(diff, Math.abs(a[i] - b[i]));
    scale = Math.max(scale, Math.abs(b[i]));
  }
  return scale === 0 ? diff : diff / scale;
}

const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };

async function parent() {
  const json = flag('--json');
  const log = json ? (...a) => console.error(...a) : (...a) => console.log(...a); // --json: progress on stderr
  const found = findTorch();
  if (!found.python) {
    const why = `bench:peer skipped: no Python with torch and numpy (${found.tried.join('; ')}). Install torch (Debian: apt-get install python3-torch) or name an interpreter with MEMPO_PYTHON.`;
    if (json) process.stdout.write(JSON.stringify({ skipped: why }) + '\n');
    else console.log(why);
    return;
  }
  const rounds = Number(value('--rounds', '5'));
  const threadCounts = value('--threads', '1,2').split(',').map(Number);
  const only = value('--only', '');
  const cases = CASES.filter((c) => (!flag('--quick') || c.small) && c.name.includes(only));
  const results = [];
  const info = mempo.nativeInfo();
  log(`machine: ${os.cpus()[0]?.model ?? 'unknown'}, ${os.cpus().length} cores, Node ${process.version}, mempo native ${info?.simd}; torch ${found.torch} (${found.python})`);
  log(`medians of ${rounds} interleaved rounds; ratio = torch's best / mempo (> 1: mempo faster); error = max |mempo − torch| / max |torch|\n`);
  let caseDir = null;
  try {
    const kids = Object.fromEntries(threadCounts.map((t) => [t, {
      // One process per mempo variant: the allocating calls' garbage (and the GCs it schedules) must
      // not land in the out calls' timings, as it did when both ran call by call in one process.
      mempoOut: worker(process.execPath, [script, '--child'], { ...process.env, MEMPO_THREADS: String(t), MEMPO_BACKEND: 'native' }),
      mempoAlloc: worker(process.execPath, [script, '--child'], { ...process.env, MEMPO_THREADS: String(t), MEMPO_BACKEND: 'native' }),
      torch: worker(found.python, [path.join(root, 'bench', 'peer.py'), String(t)], { ...process.env, OMP_NUM_THREADS: String(t) }),
    }]));
    for (const c of cases) {
      caseDir = mkdtempSync(path.join(os.tmpdir(), 'mempo-peer-')); // one case's inputs at a time
      writeInputs(c, caseDir);
      const reps = Number(value('--reps', String(c.reps)));
      for (const t of threadCounts) {
        const { mempoOut, mempoAlloc, torch: p } = kids[t];
        const hasOut = c.kind === 'grpo' || c.kind === 'stage';
        const mempoTimes = {}, variantTimes = {};
        let errors = null, outEqualsAlloc = null;
        for (let k = 0; k < rounds; k++) {
          const save = k === 0;
          const a = { times: {} };
          if (hasOut) Object.assign(a.times, (await mempoOut.ask({ case: c, dir: caseDir, reps, save, variant: 'out', prefix: 'mempo' })).times);
          Object.assign(a.times, (await mempoAlloc.ask({ case: c, dir: caseDir, reps, save, variant: 'alloc', prefix: hasOut ? 'mempo-alloc' : 'mempo' })).times);
          const b = await p.ask({ case: c, dir: caseDir, reps, save });
          for (const [v, ts] of Object.entries(a.times)) (mempoTimes[v] ??= []).push(...ts);
          for (const [v, ts] of Object.entries(b.times)) (variantTimes[v] ??= []).push(...ts);
          if (save) {
            errors = {};
            const parts = c.kind === 'stage' ? ['outcome', 'memory', 'final'] : c.kind === 'ppo' ? ['loss', 'grad'] : ['out'];
            for (const v of Object.keys(b.times)) {
              errors[v] = Math.max(...parts.map((part) => relError(readF32(caseDir, `mempo-${part}`), readF32(caseDir, `torch-${v}-${part}`))));
            }
            if (a.times.alloc && a.times.out) {
              outEqualsAlloc = parts.every((part) => Buffer.compare(readFileSync(path.join(caseDir, `mempo-${part}.bin`)), readFileSync(path.join(caseDir, `mempo-alloc-${part}.bin`))) === 0);
            }
          }
        }
        // The trainer's path (out) where the kernel has one; the allocating call's figure beside it.
        const mempoMs = median(mempoTimes.out ?? mempoTimes.alloc) * 1e3;
        const allocMs = median(mempoTimes.alloc) * 1e3;
        const torchMs = Object.fromEntries(Object.entries(variantTimes).map(([v, ts]) => [v, median(ts) * 1e3]));
        const [bestVariant, bestMs] = Object.entries(torchMs).sort((x, y) => x[1] - y[1])[0];
        const maxError = Math.max(...Object.values(errors));
        const row = {
          case: c.name, threads: t, mempoPath: mempoTimes.out ? 'out' : 'alloc', mempoMs, torchMs, torchBest: bestVariant, ratio: bestMs / mempoMs,
          ...(mempoTimes.out && { mempoAllocMs: allocMs, ratioAlloc: bestMs / allocMs, outEqualsAlloc }),
          errors, equal: maxError <= 1e-5 && outEqualsAlloc !== false,
        };
        results.push(row);
        log(
          `${c.name.padEnd(28)} ${t} thr  mempo ${fmt(mempoMs)}${mempoTimes.out ? ` (out; new arrays ${fmt(allocMs)}, ratio ${row.ratioAlloc.toFixed(2)}x)` : ''}` +
            `  torch ${Object.entries(torchMs).map(([v, ms]) => `${v} ${fmt(ms)}`).join(', ')}` +
            `  ratio ${row.ratio.toFixed(2)}x  error ${maxError.toExponential(1)}${row.equal ? '' : '  NOT EQUAL'}`,
        );
      }
      rmSync(caseDir, { recursive: true, force: true });
      caseDir = null;
    }
    for (const k of Object.values(kids)) { k.mempoOut.close(); k.mempoAlloc.close(); k.torch.close(); }
  } finally {
    if (caseDir) rmSync(caseDir, { recursive: true, force: true });
  }
  if (json) process.stdout.write(JSON.stringify({ machine: { cpu: os.cpus()[0]?.model, cores: os.cpus().length, node: process.version, simd: info?.simd }, torch: found.torch, rounds, results }, null, 2) + '\n');
  if (results.some((r) => !r.equal)) process.exitCode = 1;
}

function fmt(ms) {
  return ms < 0.1 ? `${(ms * 1e3).toFixed(1)} µs` : `${ms.toFixed(ms < 10 ? 3 : 1)} ms`;
}

if (flag('--child')) await child();
else await parent();
