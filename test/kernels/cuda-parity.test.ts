/**
 * CUDA against the CPU kernels and the pure-JS twin, through the public API: the CUDA build of
 * the addon (build-cuda/Release/mempo.node, or MEMPO_CUDA_BINDING) is loaded with
 * MEMPO_NATIVE_BINDING in an isolated module registry and every kernel runs on 'native-cuda',
 * 'native' and 'js'; results agree within 1e-5 absolute + 1e-5 relative, NaN/inf positions
 * exactly. Needs an NVIDIA GPU: scripts/gpu-check.sh runs it. Without the CUDA build or a
 * device every test is skipped, visibly (a console warning, the reason in each test's name),
 * unless MEMPO_REQUIRE_CUDA=1, which turns the skip into a failure.
 */
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { expectClose, rng } from '../helpers';

type Api = typeof import('../../src');
type BackendApi = typeof import('../../src/kernels/backend');

const root = path.resolve(__dirname, '..', '..');
const CUDA_ADDON = path.resolve(root, process.env.MEMPO_CUDA_BINDING ?? 'build-cuda/Release/mempo.node');

function load(): { api: Api; be: BackendApi } | string {
  if (process.env.MEMPO_BACKEND === 'js') return 'runs once, in the native jest project';
  if (!fs.existsSync(CUDA_ADDON)) return `${CUDA_ADDON} is absent (scripts/build-cuda.sh builds it)`;
  const saved = { ...process.env };
  let out: { api: Api; be: BackendApi } | string = 'not loaded';
  try {
    process.env.MEMPO_NATIVE_BINDING = CUDA_ADDON;
    process.env.MEMPO_BACKEND = 'native';
    delete process.env.MEMPO_DEVICE;
    jest.isolateModules(() => {
      const be = require('../../src/kernels/backend') as BackendApi;
      const api = require('../../src') as Api;
      const info = be.nativeInfo();
      if (!info) out = `the CUDA addon did not load: ${be.nativeLoadErrors().join('; ')}`;
      else if (!info.cudaBuilt) out = `${CUDA_ADDON} is not a CUDA build`;
      else if (!info.cuda) out = `no usable CUDA device (${info.cudaError})`;
      else out = { api, be };
    });
  } finally {
    process.env = saved;
  }
  return out;
}

const loaded = load();
const skipReason = typeof loaded === 'string' ? loaded : null;
if (skipReason) console.warn(`test/kernels/cuda-parity.test.ts: SKIPPED: ${skipReason}`);
// scripts/gpu-check.sh sets MEMPO_REQUIRE_CUDA=1: there a skip is a failure.
if (skipReason && process.env.MEMPO_REQUIRE_CUDA === '1' && process.env.MEMPO_BACKEND !== 'js') {
  it('has the CUDA addon and a usable device (MEMPO_REQUIRE_CUDA=1)', () => {
    throw new Error(`CUDA parity cannot run: ${skipReason}`);
  });
}
const api = typeof loaded === 'string' ? (null as unknown as Api) : loaded.api;
const be = typeof loaded === 'string' ? (null as unknown as BackendApi) : loaded.be;
const gpuIt = (name: string, fn: () => void): void => {
  if (skipReason) it.skip(`${name} [skipped: ${skipReason}]`, fn);
  else it(name, fn);
};

/** Runs `body` in a child node process with `addon` (the CUDA build) and `out(json)` in scope. */
 
function child(body: string, env: Record<string, string> = {}): any {
  const script = `const addon = require(${JSON.stringify(CUDA_ADDON)});
    const out = (v) => process.stdout.write(JSON.stringify(v));
    ${body}`;
  const res = spawnSync(process.execPath, ['-e', script], {
    env: { ...process.env, MEMPO_NATIVE_BINDING: CUDA_ADDON, ...env },
    encoding: 'utf8',
    maxBuffer: 1 << 28,
  });
  if (res.status !== 0) throw new Error(`child node failed (${res.status}): ${res.stderr}`);
  return JSON.parse(res.stdout);
}

/** fn on CUDA, on the CPU kernels and on the JS twin; restores the backend. */
function onAll<T>(fn: () => T): { cuda: T; cpu: T; js: T } {
  const before = api.backend();
  try {
    api.setBackend('native-cuda');
    expect(api.backend()).toBe('native-cuda');
    const cuda = fn();
    api.setBackend('native');
    const cpu = fn();
    api.setBackend('js');
    const js = fn();
    return { cuda, cpu, js };
  } finally {
    api.setBackend(before);
  }
}

function agree(r: { cuda: ArrayLike<number>; cpu: ArrayLike<number>; js: ArrayLike<number> }): void {
  expectClose(r.cuda, r.cpu, 1e-5, 1e-5);
  expectClose(r.cuda, r.js, 1e-5, 1e-5);
}

describe('CUDA device', () => {
  gpuIt('is selected by default in the CUDA build and reports its name', () => {
    expect(be.backend()).toBe('native-cuda');
    const info = be.nativeInfo()!;
    expect(info.cuda).toBe(true);
    expect(info.device).toBe('cuda');
    expect(typeof info.deviceName).toBe('string');
    console.log(`CUDA device: ${info.deviceName}`);
  });
});

describe('gatherLogProbs: CUDA = CPU = JS', () => {
  const cases: [string, number, number, (r: () => number, i: number) => number][] = [
    ['tiny', 3, 5, (r) => r() * 4 - 2],
    ['odd vocab (rows off 16-byte alignment)', 17, 32003, (r) => (r() - 0.5) * 60],
    ['Qwen2.5 vocab, few rows (split rows)', 4, 151936, (r) => (r() - 0.5) * 60],
    ['Qwen2.5 vocab, 64 rows', 64, 151936, (r) => (r() - 0.5) * 20],
    ['Qwen2.5 vocab, large magnitudes', 8, 151936, (r) => (r() - 0.5) * 2e4],
    ['Qwen2.5 vocab, one dominant logit', 4, 151936, (r, i) => (i % 151936 === 777 ? 80 : (r() - 0.5) * 10)],
    ['flat rows', 4, 151936, () => 1.5],
  ];
  for (const [name, R, V, gen] of cases) {
    gpuIt(`${name} (R=${R}, V=${V})`, () => {
      const r = rng(R * 7919 + V);
      const logits = new Float32Array(R * V);
      for (let i = 0; i < logits.length; i++) logits[i] = gen(r, i);
      const targets = new Int32Array(R).map(() => Math.floor(r() * V));
      targets[0] = 777 % V;
      agree(onAll(() => api.gatherLogProbs(logits, targets, R, V)));
    });
  }

  gpuIt('non-finite rows follow torch.log_softmax (NaN, +inf, all -inf, -inf target, -inf prefix)', () => {
    const R = 6, V = 9001;
    const r = rng(3);
    const logits = new Float32Array(R * V).map(() => (r() - 0.5) * 30);
    const targets = new Int32Array([1, 2, 3, 4, 6000, 6]);
    logits[0 * V + 100] = NaN;
    logits[1 * V + 7] = Infinity;
    logits.fill(-Infinity, 2 * V, 3 * V);
    logits[3 * V + 4] = -Infinity;
    logits.fill(-Infinity, 4 * V, 4 * V + 5000);
    const res = onAll(() => api.gatherLogProbs(logits, targets, R, V));
    agree(res);
    expect(Array.from(res.cuda.slice(0, 3)).every(Number.isNaN)).toBe(true);
    expect(res.cuda[3]).toBe(-Infinity);
    expect(Number.isFinite(res.cuda[4]!)).toBe(true);
  });

  // Environment knobs are read by the addon with getenv(), which jest's sandboxed process.env
  // does not reach: such checks run in a child node process with a real environment.
  gpuIt('host logits streamed in small batches on two streams (MEMPO_CUDA_BATCH_MB=1) give the same values', () => {
    const res = child(`
      const R = 9, V = 151936;
      let s = 9;
      const r = () => ((s = (s * 1103515245 + 12345) % 2147483648) / 2147483648);
      const logits = new Float32Array(R * V).map(() => (r() - 0.5) * 40);
      const targets = new Int32Array(R).map(() => Math.floor(r() * V));
      addon.setDevice('cuda');
      const whole = addon.gatherLogProbs(logits, targets, R, V);
      process.env.MEMPO_CUDA_BATCH_MB = '1';  // 1 MiB: one 0.6 MB row per batch, 9 batches
      const batched = addon.gatherLogProbs(logits, targets, R, V);
      addon.setDevice('cpu');
      const cpu = addon.gatherLogProbs(logits, targets, R, V);
      out({ whole: Array.from(whole), batched: Array.from(batched), cpu: Array.from(cpu) });
    `);
    expectClose(res.batched, res.whole, 1e-6, 1e-6); // other pieces per row: last-bit differences only
    expectClose(res.whole, res.cpu, 1e-5, 1e-5);
  });

  gpuIt('DeviceBuffer: resident logits give the same values; write, read back, free', () => {
    const R = 32, V = 151936;
    const r = rng(21);
    const logits = new Float32Array(R * V).map(() => (r() - 0.5) * 40);
    const targets = new Int32Array(R).map(() => Math.floor(r() * V));
    be.setBackend('native-cuda');
    const host = api.gatherLogProbs(logits, targets, R, V);
    const buf = api.uploadToDevice(logits); // the package root's exports
    try {
      expect(buf.length).toBe(R * V);
      expect(buf.byteLength).toBe(4 * R * V);
      expect(Array.from(api.gatherLogProbsOnDevice(buf, targets, R, V))).toEqual(Array.from(host));
      const next = logits.map((x) => -x);
      buf.write(next);
      expect(Buffer.from(buf.toFloat32Array().buffer).equals(Buffer.from(next.buffer))).toBe(true);
      expectClose(api.gatherLogProbsOnDevice(buf, targets, R, V), api.gatherLogProbs(next, targets, R, V), 1e-6, 1e-6);
      // The handle still works while the CPU kernels are selected (read back, CPU kernel).
      const addon = be.nativeAddon()!; // 'native-cuda' selected
      addon.setDevice!('cpu');
      expectClose(addon.gatherLogProbs(buf, targets, R, V), api.gatherLogProbs(next, targets, R, V), 1e-5, 1e-5);
      addon.setDevice!('cuda');
      expect(() => addon.gatherLogProbs(buf, targets, R, V + 1)).toThrow(
        `Expected a Float32Array or DeviceBuffer of length ${R * (V + 1)} for logits but received DeviceBuffer of length ${R * V}`,
      );
      expect(() => buf.write(new Float32Array(3))).toThrow(`Expected Float32Array of length ${R * V} for data`);
    } finally {
      buf.free();
    }
    expect(buf.freed).toBe(true);
    expect(() => api.gatherLogProbsOnDevice(buf, targets, R, V)).toThrow('mempo native: this DeviceBuffer was freed');
  });
});

describe('answerProbability: CUDA = CPU = JS', () => {
  gpuIt('2M items x answer tokens, thresholds ln 0.5, -Infinity, -0.1', () => {
    const r = rng(5);
    for (const [R, A] of [
      [288, 16],
      [4096, 7],
      [3, 1],
    ] as const) {
      const logp = new Float32Array(R * A).map(() => Math.log(r() + 1e-9));
      const mask = new Uint8Array(R * A).map(() => (r() < 0.7 ? 1 : 0));
      logp[1] = NaN;
      for (const threshold of [Math.log(0.5), -Infinity, -0.1]) {
        agree(onAll(() => api.answerProbability(logp, mask, R, A, { threshold })));
      }
    }
  });
});

describe('advantages: CUDA = CPU = JS', () => {
  gpuIt('grpoOutcomeAdvantage: groups of 16, a singleton, normByStd on and off', () => {
    const r = rng(17);
    const B = 16 * 20 + 1, T = 1000;
    const scores = Array.from({ length: B }, () => (r() < 0.4 ? 1 : r()));
    const uids = Array.from({ length: B }, (_, i) => `q${Math.floor(i / 16)}`);
    const mask = new Uint8Array(B * T).map(() => (r() < 0.85 ? 1 : 0));
    for (const normByStd of [true, false]) {
      agree(onAll(() => api.grpoOutcomeAdvantage(scores, uids, mask, T, { normByStd })));
    }
  });

  gpuIt('memoryAdvantage: 3 mem spans per trajectory, question and question-round grouping', () => {
    const r = rng(19);
    const B = 64, T = 2048;
    const M = B * 3;
    const spans = new Int32Array(M * 3);
    const rounds = new Int32Array(M);
    const uids: string[] = [];
    const rewards: number[] = [];
    for (let b = 0; b < B; b++) {
      for (let k = 0; k < 3; k++) {
        const s = 100 + 600 * k + Math.floor(r() * 50);
        spans.set([b, s, s + 20 + Math.floor(r() * 100)], (b * 3 + k) * 3);
        rounds[b * 3 + k] = k + 2;
        uids.push(`q${Math.floor(b / 16)}`);
        rewards.push(r() - 0.5);
      }
    }
    for (const memGrouping of ['question', 'question-round'] as const) {
      agree(onAll(() => api.memoryAdvantage(rewards, uids, spans, B, T, { memGrouping, rounds })));
    }
  });
});

describe('caller-owned results (out) on CUDA', () => {
  gpuIt('grpoOutcomeAdvantage, memoryAdvantage and mempoAdvantages write the fresh results into stale arrays', () => {
    const r = rng(23);
    const B = 48, T = 777, n = B * T;
    const scores = Array.from({ length: B }, () => (r() < 0.4 ? 1 : r()));
    const groups = Int32Array.from({ length: B }, (_, i) => (i === 5 ? 47 : Math.floor(i / 16)));
    const responseMask = new Uint8Array(n).map(() => (r() < 0.85 ? 1 : 0));
    const spans = new Int32Array(B * 2 * 3);
    for (let m = 0; m < B * 2; m++) {
      const s = (m % 2) * 400 + Math.floor(r() * 300);
      spans.set([m >> 1, s, s + 1 + Math.floor(r() * 60)], 3 * m);
    }
    const memRewards = Array.from({ length: B * 2 }, () => r() - 0.5);
    const memGroups = Int32Array.from({ length: B * 2 }, (_, m) => Math.floor(m / 32));
    const stale = () => new Float32Array(n).fill(NaN);
    const input = { scores, groups, responseMask, seqLen: T, memRewards, memGroups, spans, alpha: 0.5 };
    const run = (withOut: boolean) => {
      const outs = withOut ? { grpo: stale(), memory: stale(), stage: { outcome: stale(), memory: stale(), final: stale() } } : null;
      const grpo = api.grpoOutcomeAdvantage(scores, groups, responseMask, T, outs ? { out: outs.grpo } : undefined);
      const memory = api.memoryAdvantage(memRewards, memGroups, spans, B, T, outs ? { out: outs.memory } : undefined);
      const stage = api.mempoAdvantages(outs ? { ...input, out: outs.stage } : input);
      if (outs) {
        expect(grpo).toBe(outs.grpo);
        expect(memory).toBe(outs.memory);
        expect(stage.final).toBe(outs.stage.final);
      }
      return [grpo, memory, stage.outcome, stage.memory, stage.final];
    };
    const fresh = onAll(() => run(false));
    const given = onAll(() => run(true));
    for (let k = 0; k < 5; k++) {
      expect(Buffer.compare(Buffer.from(given.cuda[k]!.buffer), Buffer.from(fresh.cuda[k]!.buffer))).toBe(0);
      agree({ cuda: given.cuda[k]!, cpu: given.cpu[k]!, js: given.js[k]! });
    }
  });
});

describe('ppoPolicyLoss: CUDA = CPU = JS', () => {
  gpuIt('every aggregation mode and KL type, dual clip, an empty row, clamped ratios', () => {
    const r = rng(23);
    const B = 24, T = 700, n = B * T;
    const logp = new Float32Array(n).map(() => -r() * 3);
    const oldLogp = logp.map((v) => v + (r() - 0.5) * 0.8);
    const advantages = new Float32Array(n).map(() => (r() - 0.5) * 3);
    const refLogp = logp.map((v) => v + (r() - 0.5) * 0.4);
    const mask = new Uint8Array(n).map(() => (r() < 0.8 ? 1 : 0));
    mask.fill(0, 5 * T, 6 * T);
    oldLogp[7] = logp[7]! + 30;
    oldLogp[8] = logp[8]! - 25;
    refLogp[9] = logp[9]! + 40;
    mask[7] = mask[8] = mask[9] = 1;
    for (const aggMode of api.AGG_MODES) {
      for (const klType of [null, ...api.KL_TYPES]) {
        const input: Parameters<Api['ppoPolicyLoss']>[0] = {
          logp,
          oldLogp,
          advantages,
          mask,
          rows: B,
          cols: T,
          aggMode,
          clipHigh: 0.28,
          ...(klType ? { refLogp, klType, klCoef: 0.05 } : {}),
        };
        const res = onAll(() => api.ppoPolicyLoss(input));
        agree({ cuda: res.cuda.grad, cpu: res.cpu.grad, js: res.js.grad });
        for (const key of ['loss', 'clipFrac', 'approxKl', 'kl'] as const) {
          const v = (x: typeof res.cuda): number => (x as unknown as Record<string, number>)[key] ?? 0;
          agree({ cuda: [v(res.cuda)], cpu: [v(res.cpu)], js: [v(res.js)] });
        }
      }
    }
  });

  gpuIt('8M tokens (B=2048, T=4096)', () => {
    const r = rng(29);
    const B = 2048, T = 4096, n = B * T;
    const logp = new Float32Array(n);
    const oldLogp = new Float32Array(n);
    const advantages = new Float32Array(n);
    const mask = new Uint8Array(n);
    for (let i = 0; i < n; i++) {
      logp[i] = -r() * 3;
      oldLogp[i] = logp[i]! + (r() - 0.5) * 0.4;
      advantages[i] = (r() - 0.5) * 2;
      mask[i] = r() < 0.9 ? 1 : 0;
    }
    const input: Parameters<Api['ppoPolicyLoss']>[0] = { logp, oldLogp, advantages, mask, rows: B, cols: T };
    be.setBackend('native-cuda');
    const cuda = api.ppoPolicyLoss(input);
    be.setBackend('native');
    const cpu = api.ppoPolicyLoss(input);
    expectClose(cuda.grad, cpu.grad, 1e-5, 1e-5);
    expectClose([cuda.loss, cuda.clipFrac, cuda.approxKl], [cpu.loss, cpu.clipFrac, cpu.approxKl], 1e-5, 1e-5);
  });
});

// Fault injection exists only in the CPU emulation build (native/cuda/emu, MEMPO_EMU_*).
const emulated = !skipReason && (be.nativeInfo()?.deviceName ?? '').includes('emulation');
const emuIt = (name: string, fn: () => void): void => {
  if (skipReason) it.skip(`${name} [skipped: ${skipReason}]`, fn);
  else if (!emulated) it.skip(`${name} [skipped: fault injection needs the emulation build]`, fn);
  else it(name, fn);
};

describe('device errors become exceptions', () => {
  emuIt('out of device memory: a JS Error with the CUDA text, and the next call works', () => {
    const res = child(`
      const R = 8, V = 151936;
      const logits = new Float32Array(R * V).map((_, i) => Math.sin(i));
      const targets = new Int32Array(R).map((_, i) => i * 1000);
      addon.setDevice('cuda');
      const want = Array.from(addon.gatherLogProbs(logits, targets, R, V));
      const big = new Float32Array(2 * R * V).map((_, i) => Math.cos(i));
      const bigTargets = new Int32Array(2 * R).map((_, i) => i * 100);
      const message = (fn) => { try { fn(); return 'did not throw'; } catch (e) { return e.constructor.name + ': ' + e.message; } };
      process.env.MEMPO_EMU_MALLOC_LIMIT = '4096';
      const scratch = message(() => addon.gatherLogProbs(big, bigTargets, 2 * R, V));
      const upload = message(() => new addon.DeviceBuffer(logits));
      delete process.env.MEMPO_EMU_MALLOC_LIMIT;
      const again = Array.from(addon.gatherLogProbs(logits, targets, R, V));
      out({ scratch, upload, same: JSON.stringify(again) === JSON.stringify(want) });
    `);
    expect(res.scratch).toBe('Error: mempo native: CUDA error in cudaMalloc (scratch): out of memory (cudaErrorMemoryAllocation)');
    expect(res.upload).toBe('Error: mempo native: CUDA error in cudaMalloc (DeviceBuffer): out of memory (cudaErrorMemoryAllocation)');
    expect(res.same).toBe(true);
  });

  emuIt('no device: cuda false with the CUDA error text, CPU results, native-cuda refused', () => {
    const res = child(
      `const info = addon.info();
      let refused = '';
      try { addon.setDevice('cuda'); } catch (e) { refused = e.message; }
      out({ info, refused });`,
      { MEMPO_EMU_NO_DEVICE: '1' },
    );
    expect(res.info.cuda).toBe(false);
    expect(res.info.device).toBe('cpu');
    expect(res.info.cudaError).toBe('cudaGetDeviceCount failed: no CUDA-capable device is detected (cudaErrorNoDevice)');
    expect(res.refused).toBe(
      'mempo native: no usable CUDA device: cudaGetDeviceCount failed: no CUDA-capable device is detected (cudaErrorNoDevice)',
    );
  });

  gpuIt('errors surface as JS exceptions and the device stays usable', () => {
    be.setBackend('native-cuda');
    const addon = be.nativeAddon()!;
    expect(() => addon.setDevice!('gpu' as never)).toThrow(`Expected 'cpu', 'cuda' or 'auto' for device but received "gpu"`);
    expect(() => addon.gatherLogProbs(new Float32Array(6), new Int32Array([6]), 1, 6)).toThrow(
      'Expected a token id in [0, vocab = 6) for targets[0] but received 6',
    );
    const r = rng(1);
    const logits = new Float32Array(4 * 1000).map(() => r());
    const targets = new Int32Array([1, 2, 3, 4]);
    expectClose(api.gatherLogProbs(logits, targets, 4, 1000), onAll(() => api.gatherLogProbs(logits, targets, 4, 1000)).js);
  });
});
