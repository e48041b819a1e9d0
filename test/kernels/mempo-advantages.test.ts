/**
 * mempoAdvantages (docs/algorithm.md §5): the three advantages in one call, on both kernel
 * backends. Hand-checked values on a small batch; on random batches the fused call equals the
 * separate grpoOutcomeAdvantage + memoryAdvantage + finalAdvantage bit for bit (same backend) and
 * the other backend within 1e-5; stale pooled result memory (native) is overwritten; the
 * pipeline's computeAdvantages gives what the separate kernels give, excluded rows included.
 */
import { spawnSync } from 'child_process';
import * as path from 'path';
import { finalAdvantage, grpoOutcomeAdvantage, memoryAdvantage, mempoAdvantages, computeAdvantages, backend } from '../../src';
import type { MempoAdvantagesInput } from '../../src';
import { EXPECTED_BACKEND, expectClose, onEachBackend, rng } from '../helpers';

const root = path.resolve(__dirname, '..', '..');

/** The separate path the fused kernel replaces (what src/pipeline/advantages.ts used to call). */
function separate(i: MempoAdvantagesInput) {
  const B = i.scores.length;
  const outcome = grpoOutcomeAdvantage(i.scores, i.groups, i.responseMask, i.seqLen, { eps: i.eps, normByStd: i.normByStd });
  const memory = memoryAdvantage(i.memRewards, i.memGroups, i.spans, B, i.seqLen, { eps: i.eps, normByStd: i.normByStd, memGrouping: i.memGrouping, rounds: i.rounds });
  return { outcome, memory, final: finalAdvantage(outcome, memory, i.responseMask, { alpha: i.alpha }) };
}

/** Throws at the first element where a and b differ as values (NaN = NaN, -0 != +0); jest's toEqual is far too slow at B·T = 1.2M. */
function expectSame(a: Float32Array, b: Float32Array, what: string): void {
  expect(a.length).toBe(b.length);
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!, y = b[i]!;
    if (Object.is(x, y)) continue;
    throw new Error(`${what}[${i}]: ${x} vs ${y}`);
  }
}

/** A random batch: spans in random order, rows without spans, singleton groups, empty span lists. */
function randomInput(seed: number, B: number, T: number, maxSpans: number): MempoAdvantagesInput {
  const r = rng(seed);
  const spans: number[] = [];
  const memGroups: string[] = [];
  const rounds: number[] = [];
  const groupOf = (b: number) => (b % 5 === 4 ? `solo${b}` : `q${Math.floor(b / 6)}`);
  for (let b = 0; b < B; b++) {
    let pos = 0;
    for (let k = 0; k < maxSpans && pos < T; k++) {
      const start = pos + Math.floor(r() * Math.min(40, T - pos));
      if (start >= T || r() < 0.25) break;
      const end = Math.min(T, start + 1 + Math.floor(r() * 60));
      spans.push(b, start, end);
      memGroups.push(groupOf(b));
      rounds.push(k + 2);
      pos = end;
    }
  }
  const M = memGroups.length;
  const perm = Array.from({ length: M }, (_, m) => m).sort(() => r() - 0.5);
  return {
    scores: Array.from({ length: B }, () => (r() < 0.5 ? Math.round(r()) : r() * 2 - 1)),
    groups: Array.from({ length: B }, (_, b) => groupOf(b)),
    responseMask: new Uint8Array(B * T).map(() => (r() < 0.8 ? 1 : 0)),
    seqLen: T,
    memRewards: perm.map(() => r() - 0.5),
    memGroups: perm.map((m) => memGroups[m]!),
    spans: Int32Array.from(perm.flatMap((m) => spans.slice(3 * m, 3 * m + 3))),
    rounds: Int32Array.from(perm.map((m) => rounds[m]!)),
  };
}

describe('mempoAdvantages', () => {
  it('runs where the backend says (native: the addon export exists)', () => {
    expect(backend()).toBe(EXPECTED_BACKEND);
    if (EXPECTED_BACKEND === 'native') {
      const addon = require('node-gyp-build')(root) as Record<string, unknown>;
      expect(typeof addon.mempoAdvantages).toBe('function');
    }
  });

  it('gives the hand-computed advantages of a small batch (§5)', () => {
    const e = 1e-6;
    const a0 = 0.5 / (Math.SQRT1_2 + e); // group a: scores 1, 0 → mean 0.5, unbiased std √0.5
    const c = 5 / (1 + e); // group b: a singleton → mean 0, std 1
    const m0 = -1 / (1 + e), m2 = 1 / (1 + e), m3 = 7 / (1 + e); // memory group a: 1, 2, 3 → mean 2, std 1
    const alpha = 0.5;
    const res = mempoAdvantages({
      scores: [1, 0, 5],
      groups: ['a', 'a', 'b'],
      responseMask: Uint8Array.from([1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 0, 1]),
      seqLen: 4,
      memRewards: [1, 2, 3, 7],
      memGroups: ['a', 'a', 'a', 'b'],
      spans: Int32Array.from([0, 1, 3, 1, 0, 2, 1, 3, 4, 2, 2, 4]),
      alpha,
    });
    expectClose(res.outcome, [a0, a0, a0, 0, 0, -a0, -a0, -a0, c, c, 0, c], 1e-6, 1e-6);
    expectClose(res.memory, [0, m0, m0, 0, 0, 0, 0, m2, 0, 0, m3, m3], 1e-6, 1e-6);
    // Row 2, column 2: a memory value off the mask, so final 0 there.
    const f = [a0, a0 + alpha * m0, a0 + alpha * m0, 0, 0, -a0, -a0, -a0 + alpha * m2, c, c, 0, c + alpha * m3];
    expectClose(res.final, f, 1e-6, 1e-6);
  });

  const shapes: [number, number, number][] = [[1, 1, 1], [3, 7, 2], [17, 8, 3], [9, 33, 4], [40, 100, 3], [64, 1031, 5], [300, 4096, 3]];
  it.each(shapes)('equals the three separate kernels bit for bit: B=%i T=%i up to %i spans a row', (B, T, maxSpans) => {
    for (const [k, extra] of [{}, { normByStd: false, alpha: -0.7 }, { eps: 0.1, alpha: 0, memGrouping: 'question-round' as const }, { alpha: 2.5 }].entries()) {
      const input = { ...randomInput(B * 131 + T + k, B, T, maxSpans), ...extra };
      const fused = mempoAdvantages(input);
      const sep = separate(input);
      for (const key of ['outcome', 'memory', 'final'] as const) expectSame(fused[key], sep[key], key);
    }
  });

  it('agrees across backends within 1e-5, with and without memory spans', () => {
    for (const input of [randomInput(5, 50, 777, 3), { ...randomInput(6, 20, 64, 0), alpha: 3 }]) {
      const r = onEachBackend(() => mempoAdvantages(input));
      for (const k of ['outcome', 'memory', 'final'] as const) expectClose(r.native[k], r.js[k], 1e-5, 1e-5);
    }
  });

  it('handles an empty batch, and an empty mask', () => {
    const empty = mempoAdvantages({ scores: [], groups: [], responseMask: new Uint8Array(0), seqLen: 4, memRewards: [], memGroups: [], spans: new Int32Array(0) });
    expect(empty.final).toHaveLength(0);
    const r = mempoAdvantages({ scores: [1, 0], groups: [0, 0], responseMask: new Uint8Array(4), seqLen: 2, memRewards: [3], memGroups: [0], spans: Int32Array.from([1, 0, 2]) });
    expect(Array.from(r.final)).toEqual([0, 0, 0, 0]);
    expect(Array.from(r.memory)).toEqual([0, 0, 3 / (1 + 1e-6), 3 / (1 + 1e-6)].map(Math.fround));
  });

  it.each([
    [() => mempoAdvantages(null as never), TypeError, /for input but received null/],
    [() => mempoAdvantages({ ...randomInput(1, 2, 4, 1), Alpha: 1 } as never), TypeError, /misspelled option "Alpha" should be "alpha"/],
    [() => mempoAdvantages({ ...randomInput(1, 2, 4, 1), alpha: Infinity }), RangeError, /Expected a finite number for input.alpha/],
    [() => mempoAdvantages({ ...randomInput(1, 2, 4, 1), spans: Int32Array.from([0, 0, 9]), memRewards: [1], memGroups: [0] }), RangeError, /seqLen = 4 for spans\[0\]/],
    [() => mempoAdvantages({ ...randomInput(1, 2, 4, 1), memGrouping: 'question-round', rounds: undefined }), TypeError, /input.rounds/],
    [() => mempoAdvantages({ ...randomInput(1, 3, 4, 0), scores: [1e308, 1e308, 0], groups: [0, 0, 0] }), RangeError, /for scores\[0\]/],
  ])('refuses bad input the same way on every backend (%#)', (call, type, message) => {
    expect(call).toThrow(type);
    expect(call).toThrow(message);
  });
});

describe('native result memory reused from the pool (child process, --expose-gc)', () => {
  const run = EXPECTED_BACKEND === 'native' ? it : it.skip;
  run('overwrites stale pooled memory in mempoAdvantages and memoryAdvantage', () => {
    // Poisons every result, lets the GC hand its mapping back to the pool, calls again.
    const script = `
      const addon = require('node-gyp-build')(${JSON.stringify(root)});
      const B = 512, T = 4096, M = B * 2;
      const scores = Float64Array.from({ length: B }, (_, b) => (b * 7919) % 13);
      const groups = Int32Array.from({ length: B }, (_, b) => b >> 4);
      const mask = Uint8Array.from({ length: B * T }, (_, i) => (i * 2654435761) % 5 !== 0);
      const spans = new Int32Array(3 * M), rewards = new Float64Array(M), mg = new Int32Array(M);
      for (let m = 0; m < M; m++) { const b = m >> 1, s = (m & 1) * 2000 + (m % 37); spans.set([b, s, s + 50 + (m % 300)], 3 * m); rewards[m] = (m * 31) % 17; mg[m] = b >> 4; }
      let bad = 0;
      const expectMem = (mem) => { const want = new Set(); for (let m = 0; m < M; m++) for (let c = spans[3*m+1]; c < spans[3*m+2]; c++) want.add(spans[3*m] * T + c);
        for (let i = 0; i < mem.length; i += 7) if (!want.has(i) && mem[i] !== 0) bad++; };
      (async () => {
        for (let round = 0; round < 8; round++) {
          const r = addon.mempoAdvantages(scores, groups, 32, mask, B, T, rewards, mg, 32, spans, 1e-6, true, 1);
          expectMem(r.memory);
          for (let i = 0; i < mask.length; i += 7) if (!mask[i] && (r.final[i] !== 0 || r.outcome[i] !== 0)) bad++;
          const m = addon.memoryAdvantage(rewards, mg, 32, spans, B, T, 1e-6, true);
          expectMem(m);
          for (const a of [r.outcome, r.memory, r.final, m]) a.fill(NaN);
          global.gc(); await new Promise((res) => setImmediate(res)); global.gc(); await new Promise((res) => setImmediate(res));
        }
        process.stdout.write(String(bad));
      })();`;
    const res = spawnSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8' });
    expect(res.stderr).toBe('');
    expect(res.stdout).toBe('0');
  });
});

describe('computeAdvantages (the pipeline) = the separate kernels', () => {
  it('with excluded trajectories, rows of several lengths and snapshots of excluded rows', () => {
    const r = rng(42);
    const lens = [5, 9, 3, 9, 7, 2];
    const excluded = [false, true, false, false, true, false];
    const scored = lens.map((n, i) => ({
      excluded: excluded[i],
      score: Math.round(r()),
      trajectory: { uid: `q${i % 2}`, responseIds: new Array(n).fill(1), responseMask: Uint8Array.from({ length: n }, () => (r() < 0.8 ? 1 : 0)) },
      roundRewards: [{ memReward: r() }, { memReward: r() }, { memReward: r() }],
    }));
    const snapshots = [[0, 2, [1, 3]], [1, 2, [0, 4]], [2, 2, [0, 1]], [3, 2, [2, 5]], [3, 3, [6, 9]], [4, 2, [0, 2]], [5, 3, [0, 2]]].map(
      ([row, round, span]) => ({ row, round, span, trajectory: scored[row as number]!.trajectory }),
    );
    const adv = { eps: 1e-6, normByStd: true, memGrouping: 'question' as const, alpha: 0.8 };
    computeAdvantages(scored as never, snapshots as never, adv as never);
    // By hand through the three kernels, on the kept rows only.
    const kept = [0, 2, 3, 5], T = 9;
    const mask = new Uint8Array(kept.length * T);
    kept.forEach((i, b) => mask.set(scored[i]!.trajectory.responseMask, b * T));
    const snaps = snapshots.filter((s) => kept.includes(s.row as number));
    const sep = separate({
      scores: kept.map((i) => scored[i]!.score), groups: kept.map((i) => scored[i]!.trajectory.uid), responseMask: mask, seqLen: T,
      memRewards: snaps.map((s) => scored[s.row as number]!.roundRewards[(s.round as number) - 1]!.memReward),
      memGroups: snaps.map((s) => s.trajectory.uid),
      spans: Int32Array.from(snaps.flatMap((s) => [kept.indexOf(s.row as number), ...(s.span as number[])])),
      eps: adv.eps, normByStd: adv.normByStd, alpha: adv.alpha,
    });
    kept.forEach((i, b) => {
      const s = scored[i] as unknown as Record<string, Float32Array>;
      const n = lens[i]!;
      expect(s.outcomeAdvantage).toEqual(sep.outcome.slice(b * T, b * T + n));
      expect(s.memoryAdvantage).toEqual(sep.memory.slice(b * T, b * T + n));
      expect(s.advantages).toEqual(sep.final.slice(b * T, b * T + n));
    });
    for (const i of [1, 4]) expect((scored[i] as Record<string, unknown>).advantages).toBeUndefined();
  });
});

/**
 * The CUDA twin (native/cuda/advantage.cu) through the public API, as test/kernels/cuda-parity.test.ts
 * does: the CUDA addon (MEMPO_CUDA_BINDING, default build-cuda/Release/mempo.node; the CPU
 * emulation build of native/cuda/emu/parity.sh also works) on 'native-cuda' = 'native' = 'js'.
 * Skipped, visibly, without a CUDA build and a usable (or emulated) device.
 */
describe('mempoAdvantages: CUDA = CPU = JS', () => {
  type Api = typeof import('../../src');
  const addonPath = path.resolve(root, process.env.MEMPO_CUDA_BINDING ?? 'build-cuda/Release/mempo.node');
  let api: Api | null = null;
  let why = 'runs in the native jest project only';
  if (EXPECTED_BACKEND === 'native') {
    const saved = { ...process.env };
    try {
      process.env.MEMPO_NATIVE_BINDING = addonPath;
      delete process.env.MEMPO_DEVICE;
      jest.isolateModules(() => {
        const be = require('../../src/kernels/backend') as typeof import('../../src/kernels/backend');
        const info = require('fs').existsSync(addonPath) ? be.nativeInfo() : null;
        if (!info) why = `no CUDA addon at ${addonPath}`;
        else if (!info.cuda) why = `no usable CUDA device (${info.cudaError})`;
        else api = require('../../src') as Api;
      });
    } finally {
      process.env = saved;
    }
  }
  if (!api) console.warn(`mempo-advantages.test.ts: CUDA checks SKIPPED: ${why}`);
  const gpuIt = api ? it : it.skip;
  gpuIt('agrees on random batches (several shapes, empty spans, question-round)', () => {
    const a = api!;
    const inputs = [
      { ...randomInput(11, 40, 300, 3), alpha: 0.3 },
      { ...randomInput(12, 7, 33, 0), alpha: -2 },
      { ...randomInput(13, 33, 129, 4), memGrouping: 'question-round' as const, normByStd: false, alpha: -1.5 },
    ];
    for (const input of inputs) {
      const got: Record<string, MempoAdvantagesResult> = {};
      for (const b of ['native-cuda', 'native', 'js'] as const) {
        a.setBackend(b);
        got[b] = a.mempoAdvantages(input);
      }
      a.setBackend('native');
      for (const k of ['outcome', 'memory', 'final'] as const) {
        expectClose(got['native-cuda']![k], got.native![k], 1e-5, 1e-5);
        expectClose(got['native-cuda']![k], got.js![k], 1e-5, 1e-5);
      }
    }
  });
});
type MempoAdvantagesResult = import('../../src').MempoAdvantages;
