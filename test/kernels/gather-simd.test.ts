/**
 * gatherLogProbs on every CPU SIMD path against the JS twin, within 1e-5 absolute + 1e-5 relative.
 * The addon picks its path once per process (MEMPO_SIMD=scalar|avx2|avx512 caps it, native/cpu/simd.h),
 * so each path runs in a child node process on inputs written to a temp dir; the default path
 * also runs in this process. Shapes aim at the edges of the kernels: vocabularies that are not a
 * multiple of 16 (masked / scalar tails) or that straddle the 2048-float blocks, rows split
 * across workers (fewer rows than 8 per thread), -inf runs (masked vocabulary, whole blocks and
 * whole slices of a split row), huge and non-finite logits, targets at 0, V-1 and block edges.
 */
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { backend, gatherLogProbs, setBackend } from '../../src';
import { EXPECTED_BACKEND, firstMismatch, onEachBackend, rng } from '../helpers';

type Case = { name: string; R: number; V: number; logits: Float32Array; targets: Int32Array };

const QWEN_V = 151936;
const NEG = -Infinity;

function make(name: string, R: number, V: number, seed: number, fill: (r: () => number, row: number, v: number) => number, targets?: number[]): Case {
  const r = rng(seed);
  const logits = new Float32Array(R * V);
  for (let row = 0; row < R; row++) for (let v = 0; v < V; v++) logits[row * V + v] = fill(r, row, v);
  const t = targets ?? Array.from({ length: R }, (_, i) => [0, V - 1][i % 2]!);
  return { name, R, V, logits, targets: Int32Array.from(t.map((x) => Math.min(V - 1, x))) };
}

const normal = (r: () => number): number => (r() - 0.5) * 60;
// Logits near 0: every entry counts in the sum, so a dropped or padded tail shows.
const narrow = (r: () => number): number => r() * 2 - 1;

const CASES: Case[] = [
  make('V = 7 (below one vector)', 4, 7, 1, narrow, [0, 6, 3, 6]),
  make('V = 23 (between one and two AVX-512 vectors)', 3, 23, 2, narrow, [0, 22, 16]),
  make('V = 33', 3, 33, 3, narrow, [32, 0, 31]),
  make('3 blocks + 5, targets at 0, 2047, 2048, V-1', 4, 3 * 2048 + 5, 4, narrow, [0, 2047, 2048, 3 * 2048 + 4]),
  make('odd vocab 32003', 5, 32003, 5, normal),
  make('odd vocab 32003, logits near 0', 2, 32003, 17, narrow),
  make('Qwen vocab, 3 rows (each row split across workers)', 3, QWEN_V, 6, normal, [0, QWEN_V - 1, 75968]),
  make('one row, V = 151943 (split, odd tail)', 1, 151943, 7, normal, [151942]),
  make('one dominant logit per row', 3, 50021, 8, (r, _row, v) => (v === 777 ? 80 : (r() - 0.5) * 10), [777, 777, 0]),
  make('large magnitudes (±1e4)', 4, 20011, 9, (r) => (r() - 0.5) * 2e4),
  make('huge magnitudes (±3e38)', 4, 4099, 10, (r) => (r() - 0.5) * 6e38, [0, 4098, 2048, 1]),
  // 30 % of the vocabulary masked to -inf; the targets hit masked and unmasked entries.
  make('-inf sprinkled (masked vocabulary)', 6, 10007, 11, (r, _row, v) => (v % 10 < 3 ? NEG : normal(r)), [0, 3, 10006, 5, 2047, 2048]),
  make('leading -inf blocks, then finite', 2, 20011, 12, (r, row, v) => (row === 0 ? (v < 9000 ? NEG : normal(r)) : v === 20010 ? 4 : NEG), [9000, 20010]),
  make('all -inf row (NaN), one finite entry', 2, 4103, 13, (_r, row, v) => (row === 1 && v === 0 ? 1.5 : NEG), [5, 0]),
  // One row split across workers whose first slices are all -inf (merge of empty states).
  make('split rows with all -inf slices', 2, QWEN_V, 14, (r, _row, v) => (v < 100000 ? NEG : normal(r)), [0, QWEN_V - 1]),
  make('+inf / NaN in first, middle, tail entries (NaN rows)', 6, 2061, 15, (r, row, v) => {
    const at = [0, 1030, 2060][row % 3]!;
    return v === at ? (row < 3 ? Infinity : NaN) : normal(r);
  }),
  make('+inf / NaN in the last slice of a split row', 2, QWEN_V, 16, (r, row, v) => (v === QWEN_V - 1 ? (row === 0 ? Infinity : NaN) : normal(r)), [0, 5]),
];

/** The JS twin's result for every case (computed here, never by the code under test). */
const expected = new Map<string, Float32Array>();
function js(c: Case): Float32Array {
  let e = expected.get(c.name);
  if (!e) {
    const before = backend();
    try {
      setBackend('js');
      e = gatherLogProbs(c.logits, c.targets, c.R, c.V);
    } finally {
      setBackend(before);
    }
    expected.set(c.name, e);
  }
  return e;
}

function check(name: string, got: Float32Array, want: Float32Array): void {
  const i = firstMismatch(got, want, 1e-5, 1e-5);
  if (i !== -1) throw new Error(`${name}: row ${i}: ${got[i]} vs JS ${want[i]}`);
}

describe('gatherLogProbs, default SIMD path in this process', () => {
  it.each(CASES.map((c) => [c.name, c] as const))('%s', (_n, c) => {
    const { native } = onEachBackend(() => gatherLogProbs(c.logits, c.targets, c.R, c.V));
    check(c.name, native, js(c));
  });
});

/** Each case through the addon in a child process with MEMPO_SIMD=simd; returns its info().simd and results. */
function runChild(dir: string, simd: string): { simd: string; out: Float32Array[] } {
  const script = `
    const fs = require('fs'), path = require('path');
    const addon = process.env.MEMPO_NATIVE_BINDING ? require(path.resolve(process.env.MEMPO_NATIVE_BINDING)) : require('node-gyp-build')(${JSON.stringify(path.resolve(__dirname, '..', '..'))});
    if (typeof addon.setDevice === 'function') addon.setDevice('cpu');
    const dir = ${JSON.stringify(dir)};
    const cases = JSON.parse(fs.readFileSync(path.join(dir, 'cases.json'), 'utf8'));
    const f32 = (b) => new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
    cases.forEach((c, k) => {
      const logits = f32(fs.readFileSync(path.join(dir, k + '.logits')));
      const t = fs.readFileSync(path.join(dir, k + '.targets'));
      const out = addon.gatherLogProbs(logits, new Int32Array(t.buffer, t.byteOffset, c.R), c.R, c.V);
      fs.writeFileSync(path.join(dir, k + '.' + ${JSON.stringify(simd)}), Buffer.from(out.buffer, out.byteOffset, out.byteLength));
    });
    process.stdout.write(addon.info().simd);`;
  const res = spawnSync(process.execPath, ['-e', script], { env: { ...process.env, MEMPO_SIMD: simd }, encoding: 'utf8', timeout: 120000 });
  if (res.status !== 0) throw new Error(`child (MEMPO_SIMD=${simd}) failed (${res.status}): ${res.stderr}`);
  const out = CASES.map((_c, k) => {
    const b = fs.readFileSync(path.join(dir, `${k}.${simd}`));
    return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
  });
  return { simd: res.stdout, out };
}

const cpuFlags = ((): Set<string> => {
  try {
    const line = /^flags\s*:(.*)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'));
    return new Set(line ? line[1]!.trim().split(/\s+/) : []);
  } catch {
    return new Set();
  }
})();
const hasAvx2 = cpuFlags.has('avx2') && cpuFlags.has('fma');
const hasAvx512 = hasAvx2 && ['avx512f', 'avx512bw', 'avx512dq', 'avx512vl'].every((f) => cpuFlags.has(f));

// The children test the addon itself: once, in the kernels:native project.
const childDescribe = EXPECTED_BACKEND === 'native' ? describe : describe.skip;

childDescribe('gatherLogProbs on each SIMD path (MEMPO_SIMD, child processes)', () => {
  let dir = '';
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mempo-gather-simd-'));
    fs.writeFileSync(path.join(dir, 'cases.json'), JSON.stringify(CASES.map((c) => ({ R: c.R, V: c.V }))));
    CASES.forEach((c, k) => {
      fs.writeFileSync(path.join(dir, `${k}.logits`), Buffer.from(c.logits.buffer));
      fs.writeFileSync(path.join(dir, `${k}.targets`), Buffer.from(c.targets.buffer));
    });
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  // avx512 is the default path where the CPU has AVX-512 F/BW/DQ/VL, else it falls back to AVX2 / scalar.
  const paths: [string, string][] = [
    ['avx512', hasAvx512 ? 'AVX-512' : 'no AVX-512 on this CPU: its best path'],
    ['avx2', hasAvx2 ? 'AVX2+FMA' : 'no AVX2 on this CPU: scalar'],
    ['scalar', 'scalar'],
  ];
  it.each(paths)('MEMPO_SIMD=%s (%s) agrees with the JS twin on every case', (simd) => {
    const child = runChild(dir, simd);
    // info().simd names the best path in force: MEMPO_SIMD caps it at what the CPU has.
    expect(child.simd).toBe(simd === 'scalar' || !hasAvx2 ? 'scalar' : simd === 'avx512' && hasAvx512 ? 'avx512' : 'avx2');
    CASES.forEach((c, k) => check(`${c.name} [${simd}]`, child.out[k]!, js(c)));
  });

  it('covers NaN, -inf and finite results (the cases reach the special values)', () => {
    const all = CASES.flatMap((c) => Array.from(js(c)));
    expect(all.some(Number.isNaN)).toBe(true);
    expect(all.some((x) => x === -Infinity)).toBe(true);
    expect(all.some((x) => Number.isFinite(x) && x > -1e-3)).toBe(true);
  });
});
