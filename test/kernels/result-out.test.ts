/**
 * Caller-owned results (`out`) of the [B, T] advantage kernels: grpoOutcomeAdvantage and
 * memoryAdvantage (opts.out) and mempoAdvantages (input.out). The array is overwritten whole
 * (stale values, NaN and -0 included, never survive), returned as it is, and holds bit for bit
 * what the allocating call returns, on both backends and across them; on every SIMD path of the
 * addon (child processes under MEMPO_SIMD); a wrong array is refused before anything is written,
 * with the same error on both backends, and by the addon itself when called directly.
 */
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { grpoOutcomeAdvantage, memoryAdvantage, mempoAdvantages, setBackend, backend } from '../../src';
import type { MempoAdvantages, MempoAdvantagesInput } from '../../src';
import { EXPECTED_BACKEND, onEachBackend, outcomeOf, rng } from '../helpers';

const root = path.resolve(__dirname, '..', '..');

/** Throws at the first element where a and b differ as bits of a float (NaN = NaN, -0 != +0). */
function expectSame(a: Float32Array, b: Float32Array, what: string): void {
  expect(a.length).toBe(b.length);
  for (let i = 0; i < a.length; i++) {
    if (Object.is(a[i], b[i])) continue;
    throw new Error(`${what}[${i}]: ${a[i]} vs ${b[i]}`);
  }
}

/** A Float32Array of n stale values (NaN, -0, big numbers), 4 bytes past a 32-byte boundary when `skew`. */
function stale(n: number, skew = false): Float32Array {
  const a = skew ? new Float32Array(new ArrayBuffer(4 * (n + 1)), 4, n) : new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = i % 3 === 0 ? NaN : i % 3 === 1 ? -0 : 1e30;
  return a;
}

/** A batch with spans of 1-40 tokens (vector tails), rows without spans, singleton groups; Int32Array ids. */
function batch(seed: number, B: number, T: number): MempoAdvantagesInput & { groups: Int32Array; memGroups: Int32Array } {
  const r = rng(seed);
  const spans: number[] = [], memGroups: number[] = [], rounds: number[] = [];
  for (let b = 0; b < B; b++) {
    let pos = Math.floor(r() * 5);
    for (let k = 0; pos < T && r() > 0.2; k++) {
      const end = Math.min(T, pos + 1 + Math.floor(r() * 40));
      spans.push(b, pos, end);
      memGroups.push(Math.floor(b / 4));
      rounds.push(k);
      pos = end + Math.floor(r() * 50);
    }
  }
  const M = memGroups.length;
  return {
    scores: Float64Array.from({ length: B }, () => (r() < 0.5 ? Math.round(r()) : r() * 2 - 1)),
    groups: Int32Array.from({ length: B }, (_, b) => (b % 5 === 4 ? b : Math.floor(b / 6))),
    responseMask: new Uint8Array(B * T).map(() => (r() < 0.8 ? 1 : 0)),
    seqLen: T,
    memRewards: Float64Array.from({ length: M }, () => r() - 0.5),
    memGroups: Int32Array.from(memGroups),
    spans: Int32Array.from(spans),
    rounds: Int32Array.from(rounds),
    alpha: 0.5,
  };
}

/** The three kernels on `i`, into fresh arrays or, with `out`, into the caller's (checking that they come back). */
function runAll(i: ReturnType<typeof batch>, out?: { grpo: Float32Array; memory: Float32Array; stage: MempoAdvantages }) {
  const B = i.scores.length, T = i.seqLen;
  const grpo = grpoOutcomeAdvantage(i.scores, i.groups, i.responseMask, T, out && { out: out.grpo });
  const memory = memoryAdvantage(i.memRewards, i.memGroups, i.spans, B, T, { memGrouping: 'question-round', rounds: i.rounds, ...(out && { out: out.memory }) });
  const stage = mempoAdvantages(out ? { ...i, out: out.stage } : i);
  if (out) {
    expect(grpo).toBe(out.grpo);
    expect(memory).toBe(out.memory);
    for (const k of ['outcome', 'memory', 'final'] as const) expect(stage[k]).toBe(out.stage[k]);
  }
  return { grpo, memory, stage };
}

function staleOuts(n: number, skew: boolean) {
  return { grpo: stale(n, skew), memory: stale(n, skew), stage: { outcome: stale(n, skew), memory: stale(n, skew), final: stale(n, skew) } };
}

function expectAllSame(a: ReturnType<typeof runAll>, b: ReturnType<typeof runAll>, what: string): void {
  expectSame(a.grpo, b.grpo, `${what} grpo`);
  expectSame(a.memory, b.memory, `${what} memoryAdvantage`);
  for (const k of ['outcome', 'memory', 'final'] as const) expectSame(a.stage[k], b.stage[k], `${what} stage ${k}`);
}

describe('out: the caller owns the result', () => {
  // T = 1, 15, 17, 33, 100: vector tails on every path; 360 x 4,100 (3 x 5.9 MB): the stage's streamed stores.
  const shapes: [number, number][] = [[1, 1], [2, 8], [3, 15], [9, 17], [7, 33], [40, 100], [360, 4100]];
  it.each(shapes)('B = %i, T = %i: the very values of the allocating call, in place, on both backends and across them', (B, T) => {
    const i = batch(B * 7 + T, B, T);
    const n = B * T;
    const both = onEachBackend(() => {
      const fresh = runAll(i);
      const outs = staleOuts(n, T % 2 === 1);
      const given = runAll(i, outs);
      expectAllSame(given, fresh, `${backend()} out vs fresh`);
      // Reused for another batch of the same shape: nothing of the first call survives.
      const j = batch(B * 7 + T + 1, B, T);
      expectAllSame(runAll(j, outs), runAll(j), `${backend()} reused out vs fresh`);
      return given;
    });
    expectAllSame(both.native, both.js, 'native vs js');
  });

  it('reaches the values that show a careless writer: -0 outcomes (+0 finals), zeros off the mask and between spans', () => {
    // Row 4 is a singleton group: its score -0 gives the outcome -0, and final -0 + alpha * 0 = +0.
    const i = batch(5, 12, 50);
    i.scores = Float64Array.from({ length: 12 }, (_, b) => (b === 4 ? -0 : b < 6 ? 0.1 : -0.3));
    const n = 12 * 50;
    const { native, js } = onEachBackend(() => runAll(i, staleOuts(n, false)));
    expectAllSame(native, js, 'native vs js');
    const row4 = (a: Float32Array) => Array.from(a.subarray(4 * 50, 5 * 50));
    const on = Array.from(i.responseMask.subarray(4 * 50, 5 * 50), (m) => m === 1);
    expect(row4(js.grpo).every((x, t) => Object.is(x, on[t] ? -0 : 0))).toBe(true);
    expect(row4(js.stage.outcome).every((x, t) => Object.is(x, on[t] ? -0 : 0))).toBe(true);
    expect(js.stage.final.some((x, k) => Object.is(x, 0) && i.responseMask[k] === 1)).toBe(true);
    expect(js.stage.memory.some((x, k) => x === 0 && i.responseMask[k] === 1)).toBe(true);
  });
});

describe('out: a wrong array is refused, the same way on both backends, before anything is written', () => {
  const B = 4, T = 6, n = B * T;
  const i = batch(11, B, T);
  const outcomeOut = (out: unknown) => () => grpoOutcomeAdvantage(i.scores, i.groups, i.responseMask, T, { out } as never);
  const memoryOut = (out: unknown) => () => memoryAdvantage(i.memRewards, i.memGroups, i.spans, B, T, { out } as never);
  const stageOut = (out: unknown) => () => mempoAdvantages({ ...i, out } as never);

  function sameThrow(fn: () => unknown, name: string, message: string | RegExp): void {
    const { native, js } = onEachBackend(() => outcomeOf(fn));
    expect(native).toEqual(js);
    expect(js).toEqual({ threw: name, message: typeof message === 'string' ? message : expect.stringMatching(message) });
  }

  it('not a Float32Array, or not of length B*T', () => {
    for (const bad of [new Float64Array(n), Array.from({ length: n }, () => 0), null, new Int32Array(n)]) {
      sameThrow(outcomeOut(bad), 'TypeError', /^Expected Float32Array of length B\*T = 24 for opts\.out but received /);
      sameThrow(memoryOut(bad), 'TypeError', /^Expected Float32Array of length batch\*seqLen = 24 for opts\.out but received /);
    }
    sameThrow(outcomeOut(new Float32Array(n + 1)), 'RangeError', 'Expected Float32Array of length B*T = 24 for opts.out but received Float32Array of length 25');
    sameThrow(stageOut({ outcome: new Float32Array(n), memory: new Float32Array(n - 1), final: new Float32Array(n) }), 'RangeError',
      'Expected Float32Array of length B*T = 24 for input.out.memory but received Float32Array of length 23');
  });

  it('input.out: an object of exactly outcome, memory and final', () => {
    sameThrow(stageOut(new Float32Array(n)), 'TypeError', 'Expected an object { outcome, memory, final } of Float32Arrays for input.out but received Float32Array of length 24');
    sameThrow(stageOut(7), 'TypeError', 'Expected an object { outcome, memory, final } of Float32Arrays for input.out but received 7');
    sameThrow(stageOut({ outcome: new Float32Array(n), memory: new Float32Array(n) }), 'TypeError', 'Expected Float32Array of length B*T = 24 for input.out.final but received undefined');
    sameThrow(stageOut({ outcome: new Float32Array(n), memory: new Float32Array(n), final: new Float32Array(n), extra: 1 }), 'TypeError', /input\.out/);
  });

  it('sharing memory with an input or with another result', () => {
    const buf = new ArrayBuffer(4 * n + n);
    const mask = new Uint8Array(buf, 4 * n - 1, n); // its first byte is the out's last
    mask.set(i.responseMask);
    const over = new Float32Array(buf, 0, n);
    over.fill(NaN);
    sameThrow(() => grpoOutcomeAdvantage(i.scores, i.groups, mask, T, { out: over }), 'RangeError',
      'Expected a Float32Array of length B*T = 24 that shares no memory with responseMask for opts.out but received a Float32Array over the memory of responseMask');
    expect(over.every(Number.isNaN)).toBe(true); // nothing written
    // Spans read after writing starts on the JS twin: refused too.
    const sbuf = new ArrayBuffer(4 * n + 4 * i.spans.length);
    const spans = new Int32Array(sbuf, 4 * n - 4, i.spans.length);
    spans.set(i.spans);
    sameThrow(() => memoryAdvantage(i.memRewards, i.memGroups, spans, B, T, { out: new Float32Array(sbuf, 0, n) }), 'RangeError', /shares no memory with spans for opts\.out/);
    const one = new Float32Array(n);
    sameThrow(stageOut({ outcome: one, memory: new Float32Array(n), final: one }), 'RangeError', /shares no memory with input\.out\.outcome for input\.out\.final/);
    const scores = new Float32Array(n);
    sameThrow(() => grpoOutcomeAdvantage(scores.subarray(0, B), i.groups, i.responseMask, T, { out: scores }), 'RangeError', /shares no memory with scores for opts\.out/);
  });

  it('the same buffer at disjoint ranges is fine', () => {
    const buf = new ArrayBuffer(4 * n + n);
    const out = new Float32Array(buf, 0, n);
    const mask = new Uint8Array(buf, 4 * n, n);
    mask.set(i.responseMask);
    const { native, js } = onEachBackend(() => Array.from(grpoOutcomeAdvantage(i.scores, i.groups, mask, T, { out })));
    expect(native).toEqual(js);
    expect(js).toEqual(Array.from(grpoOutcomeAdvantage(i.scores, i.groups, i.responseMask, T)));
  });
});

// The addon's own checks (the backstop behind the TypeScript ones) and its SIMD paths: native only.
const nativeDescribe = EXPECTED_BACKEND === 'native' ? describe : describe.skip;

nativeDescribe('out in the addon itself', () => {
  type Addon = {
    grpoOutcomeAdvantage(...a: unknown[]): Float32Array;
    memoryAdvantage(...a: unknown[]): Float32Array;
    mempoAdvantages(...a: unknown[]): MempoAdvantages;
  };
  // The addon the suite runs on (scripts/asan-check.sh points MEMPO_NATIVE_BINDING at its sanitized build).
  const binding = process.env.MEMPO_NATIVE_BINDING;
  const addon = (binding ? require(path.resolve(binding)) : require('node-gyp-build')(root)) as Addon;
  const B = 4, T = 6, n = B * T;
  const i = batch(11, B, T);
  const M = i.memRewards.length;
  const scores = i.scores as Float64Array, rewards = i.memRewards as Float64Array;
  const grpo = (out: unknown) => addon.grpoOutcomeAdvantage(scores, i.groups, 4, i.responseMask, B, T, 1e-6, true, out);
  const stage = (...out: unknown[]) => addon.mempoAdvantages(scores, i.groups, 4, i.responseMask, B, T, rewards, i.memGroups, 1, i.spans, 1e-6, true, 0.5, ...out);

  it('checks type, length and overlap, naming the argument', () => {
    expect(() => grpo(new Float64Array(n))).toThrow(new TypeError('Expected Float32Array of length 24 for out but received Float64Array of length 24'));
    expect(() => grpo(new Float32Array(3))).toThrow(new RangeError('Expected Float32Array of length 24 for out but received Float32Array of length 3'));
    const buf = new ArrayBuffer(4 * n + n);
    const mask = new Uint8Array(buf, 4 * n - 2, n);
    expect(() => addon.grpoOutcomeAdvantage(scores, i.groups, 4, mask, B, T, 1e-6, true, new Float32Array(buf, 0, n))).toThrow(
      new RangeError('Expected a Float32Array of length 24 that shares no memory with responseMask for out but received a Float32Array over the memory of responseMask'),
    );
    const sc = new Float32Array(n + 8);
    const f64 = new Float64Array(sc.buffer, 0, B);
    expect(() => addon.grpoOutcomeAdvantage(f64, i.groups, 4, i.responseMask, B, T, 1e-6, true, sc.subarray(0, n))).toThrow(/shares no memory with scores for out/);
    expect(() => addon.memoryAdvantage(new Float64Array(sc.buffer, 0, M), i.memGroups, 1, i.spans, B, T, 1e-6, true, sc.subarray(0, n))).toThrow(/shares no memory with memRewards for out/);
    const a = new Float32Array(n);
    expect(() => stage(a, new Float32Array(n), a)).toThrow(/shares no memory with outcome for final/);
    expect(() => stage(new Float32Array(n), a, a)).toThrow(/shares no memory with memory for final/);
    expect(() => stage(undefined, new Float32Array(n), new Float32Array(n))).toThrow(new TypeError('Expected Float32Array of length 24 for outcome but received undefined'));
  });

  it('returns the arrays it was given, overwritten', () => {
    const out = stale(n);
    expect(grpo(out)).toBe(out);
    expect(Array.from(out)).toEqual(Array.from(grpo(undefined)));
    const o = { outcome: stale(n), memory: stale(n), final: stale(n) };
    const r = stage(o.outcome, o.memory, o.final);
    const fresh = stage();
    for (const k of ['outcome', 'memory', 'final'] as const) {
      expect(r[k]).toBe(o[k]);
      expectSame(r[k], fresh[k], k);
    }
  });
});

nativeDescribe('out on each SIMD path of the addon (MEMPO_SIMD, child processes)', () => {
  const shapes: [number, number][] = [[3, 15], [9, 17], [7, 33], [40, 100]];
  let dir = '';
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mempo-out-simd-'));
    shapes.forEach(([B, T], k) => {
      const i = batch(100 + k, B, T);
      const bin = (name: string, a: ArrayBufferView) => fs.writeFileSync(path.join(dir, `${k}.${name}`), Buffer.from(a.buffer, a.byteOffset, a.byteLength));
      bin('scores', i.scores as Float64Array);
      bin('groups', i.groups);
      bin('mask', i.responseMask);
      bin('rewards', i.memRewards as Float64Array);
      bin('memGroups', i.memGroups);
      bin('spans', i.spans);
    });
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** The JS twin's three results of case k. */
  function expected(k: number): Float32Array[] {
    const [B, T] = shapes[k]!;
    const i = batch(100 + k, B, T);
    const before = backend();
    try {
      setBackend('js');
      const s = mempoAdvantages(i);
      return [grpoOutcomeAdvantage(i.scores, i.groups, i.responseMask, T), s.outcome, s.memory, s.final];
    } finally {
      setBackend(before);
    }
  }

  it.each(['avx512', 'avx2', 'scalar'])('MEMPO_SIMD=%s: out and fresh results equal the JS twin bit for bit', (simd) => {
    const script = `
      const fs = require('fs'), path = require('path');
      const addon = process.env.MEMPO_NATIVE_BINDING ? require(path.resolve(process.env.MEMPO_NATIVE_BINDING)) : require('node-gyp-build')(${JSON.stringify(root)});
      const dir = ${JSON.stringify(dir)}, shapes = ${JSON.stringify(shapes)};
      const rd = (k, name, C) => { const b = fs.readFileSync(path.join(dir, k + '.' + name)); return new C(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength)); };
      shapes.forEach(([B, T], k) => {
        const s = rd(k, 'scores', Float64Array), g = rd(k, 'groups', Int32Array), m = rd(k, 'mask', Uint8Array);
        const r = rd(k, 'rewards', Float64Array), mg = rd(k, 'memGroups', Int32Array), sp = rd(k, 'spans', Int32Array);
        const gc = Math.max(0, ...g) + 1, mgc = Math.max(0, ...mg) + 1, n = B * T;
        const stale = () => new Float32Array(n).fill(NaN);
        const outs = [stale(), stale(), stale(), stale()];
        const grpo = addon.grpoOutcomeAdvantage(s, g, gc, m, B, T, 1e-6, true, outs[0]);
        addon.mempoAdvantages(s, g, gc, m, B, T, r, mg, mgc, sp, 1e-6, true, 0.5, outs[1], outs[2], outs[3]);
        const f = addon.mempoAdvantages(s, g, gc, m, B, T, r, mg, mgc, sp, 1e-6, true, 0.5);
        const all = [grpo, ...outs.slice(1), addon.grpoOutcomeAdvantage(s, g, gc, m, B, T, 1e-6, true), f.outcome, f.memory, f.final];
        all.forEach((a, j) => fs.writeFileSync(path.join(dir, k + '.${simd}.' + j), Buffer.from(a.buffer, a.byteOffset, a.byteLength)));
      });
      process.stdout.write(addon.info().simd);`;
    const res = spawnSync(process.execPath, ['-e', script], { env: { ...process.env, MEMPO_SIMD: simd }, encoding: 'utf8', timeout: 120000 });
    if (res.status !== 0) throw new Error(`child (MEMPO_SIMD=${simd}) failed (${res.status}): ${res.stderr}`);
    shapes.forEach((_s, k) => {
      const want = expected(k);
      for (let j = 0; j < 8; j++) {
        const b = fs.readFileSync(path.join(dir, `${k}.${simd}.${j}`));
        expectSame(new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4), want[j % 4]!, `case ${k} [${simd}] result ${j}`);
      }
    });
  });
});
