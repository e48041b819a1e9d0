/**
 * The CUDA build of the addon (scripts/build-cuda.sh -> build-cuda/Release/mempo.node) on any
 * machine: it loads, reports itself, falls back to the CPU kernels when no GPU is usable
 * (cuda: false, the CUDA error text kept) and then computes exactly what the node-gyp build
 * computes, and the backend layer selects 'native', refusing 'native-cuda' with the reason.
 * Skipped, visibly, when the CUDA build is absent. GPU results are test/cuda-parity.test.ts.
 */
import * as fs from 'fs';
import * as path from 'path';
import type { AggModeCode, KlTypeCode, NativeAddon } from '../../src/kernels/addon';
import { rng } from '../helpers';

const root = path.resolve(__dirname, '..', '..');
const CUDA_ADDON = path.resolve(root, process.env.MEMPO_CUDA_BINDING ?? 'build-cuda/Release/mempo.node');
const present = fs.existsSync(CUDA_ADDON);

function loadCpuAddon(): NativeAddon {
   
  return (require('node-gyp-build') as (dir: string) => NativeAddon)(root);
}

it('has scripts/build-cuda.sh to produce the CUDA build', () => {
  const script = path.join(root, 'scripts', 'build-cuda.sh');
  expect(fs.statSync(script).mode & 0o111).not.toBe(0);
});

if (!present) {
  const reason = `${CUDA_ADDON} is absent (run scripts/build-cuda.sh to test it)`;
  console.warn(`test/kernels/cuda-build.test.ts: SKIPPED: ${reason}`);
  it.skip(`CUDA addon build: ${reason}`, () => undefined);
} else {
  describe(`CUDA addon build (${path.relative(root, CUDA_ADDON)})`, () => {
     
    const cuda = require(CUDA_ADDON) as NativeAddon;
    const cpu = loadCpuAddon();
    const info = cuda.info();

    it('loads and reports a CUDA build', () => {
      expect(info.cudaBuilt).toBe(true);
      expect(typeof info.cuda).toBe('boolean');
      expect(info.simd).toBe(cpu.info().simd);
      expect(info.threads).toBe(cpu.info().threads);
      expect(typeof cuda.setDevice).toBe('function');
      expect(typeof cuda.DeviceBuffer).toBe('function');
      for (const name of Object.keys(cpu)) expect(typeof (cuda as unknown as Record<string, unknown>)[name]).toBe('function');
    });

    const noDevice = info.cuda === false;
    const whenNoDevice = noDevice ? it : it.skip;

    whenNoDevice('without a usable GPU reports cuda: false with the CUDA error text and runs on the CPU', () => {
      expect(info.cuda).toBe(false);
      expect(info.device).toBe('cpu');
      expect(info.deviceName).toBeUndefined();
      expect(info.cudaError).toMatch(/^cudaGetDeviceCount failed: .+ \(cuda\w+\)$|no CUDA device|context creation failed/);
      expect(() => cuda.setDevice!('cuda')).toThrow(/^mempo native: no usable CUDA device: /);
      expect(() => new cuda.DeviceBuffer!(new Float32Array(4))).toThrow(/^mempo native: DeviceBuffer needs a CUDA device: /);
      cuda.setDevice!('cpu');
      cuda.setDevice!('auto');
      expect(cuda.info().device).toBe('cpu');
      expect(() => cuda.setDevice!('gpu' as never)).toThrow(`Expected 'cpu', 'cuda' or 'auto' for device but received "gpu"`);
    });

    // Bitwise: the same C++ compiled by CMake and by node-gyp, run on the CPU.
    const same = (a: Float32Array, b: Float32Array): void => {
      expect(a.length).toBe(b.length);
      expect(Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength))).toBe(true);
    };
    const onCpu = <T>(fn: (a: NativeAddon) => T): { c: T; g: T } => {
      cuda.setDevice!('cpu');
      try {
        return { c: fn(cuda), g: fn(cpu) };
      } finally {
        cuda.setDevice!('auto');
      }
    };

    it('gatherLogProbs: identical to the node-gyp build (incl. non-finite rows)', () => {
      const r = rng(11);
      for (const [R, V] of [
        [3, 5],
        [9, 4099],
        [4, 151936],
      ] as const) {
        const logits = new Float32Array(R * V).map(() => (r() - 0.5) * 40);
        const targets = new Int32Array(R).map(() => Math.floor(r() * V));
        if (R >= 4) {
          logits[1 * V + 2] = NaN;
          logits[2 * V + 1] = Infinity;
          logits.fill(-Infinity, 3 * V, 4 * V);
        }
        const { c, g } = onCpu((a) => a.gatherLogProbs(logits, targets, R, V));
        same(c, g);
      }
    });

    it('answerProbability, both advantages and ppoPolicyLoss: identical to the node-gyp build', () => {
      const r = rng(12);
      const R = 64, A = 12;
      const logp = new Float32Array(R * A).map(() => Math.log(r() + 1e-9));
      const ans = new Uint8Array(R * A).map(() => (r() < 0.7 ? 1 : 0));
      const ap = onCpu((a) => a.answerProbability(logp, ans, R, A, Math.log(0.5)));
      same(ap.c, ap.g);

      const B = 48, T = 300, G = 3;
      const scores = new Float64Array(B).map(() => (r() < 0.5 ? 1 : 0));
      const groups = new Int32Array(B).map((_, i) => Math.floor(i / 16));
      const mask = new Uint8Array(B * T).map(() => (r() < 0.8 ? 1 : 0));
      const oa = onCpu((a) => a.grpoOutcomeAdvantage(scores, groups, G, mask, B, T, 1e-6, true));
      same(oa.c, oa.g);

      const spans = new Int32Array(B * 3 * 3);
      for (let b = 0; b < B; b++) for (let k = 0; k < 3; k++) spans.set([b, 10 + 90 * k, 40 + 90 * k], (b * 3 + k) * 3);
      const rewards = new Float64Array(B * 3).map(() => r() - 0.5);
      const rgroups = new Int32Array(B * 3).map((_, i) => Math.floor(i / 48));
      const ma = onCpu((a) => a.memoryAdvantage(rewards, rgroups, G, spans, B, T, 1e-6, true));
      same(ma.c, ma.g);

      const n = B * T;
      const lp = new Float32Array(n).map(() => -r() * 3);
      const old = lp.map((v) => v + (r() - 0.5) * 0.6);
      const adv = new Float32Array(n).map(() => (r() - 0.5) * 2);
      const ref = lp.map((v) => v + (r() - 0.5) * 0.2);
      for (const agg of [0, 1, 2] as AggModeCode[]) {
        for (const kl of [0, 1, 2, 3] as KlTypeCode[]) {
          const res = onCpu((a) => a.ppoPolicyLoss(lp, old, adv, mask, B, T, 0.2, 0.28, 3, agg, kl ? ref : null, 0.01, kl));
          same(res.c.grad, res.g.grad);
          expect(res.c.loss).toBe(res.g.loss);
          expect(res.c.clipFrac).toBe(res.g.clipFrac);
          expect(res.c.approxKl).toBe(res.g.approxKl);
          expect(res.c.kl).toBe(res.g.kl);
        }
      }
    });

    it('keeps the argument checks and their wording', () => {
      expect(() => cuda.gatherLogProbs(new Float32Array(5), new Int32Array(1), 1, 6)).toThrow(
        'Expected Float32Array of length 6 for logits but received Float32Array of length 5',
      );
      expect(() => cuda.gatherLogProbs(new Float32Array(6), new Int32Array([6]), 1, 6)).toThrow(
        'Expected a token id in [0, vocab = 6) for targets[0] but received 6',
      );
    });

    it('through the backend layer: native without a device, native-cuda refused with the reason', () => {
      const saved = { ...process.env };
      try {
        jest.isolateModules(() => {
          process.env.MEMPO_NATIVE_BINDING = CUDA_ADDON;
          process.env.MEMPO_BACKEND = '';
          delete process.env.MEMPO_DEVICE;
          const b = require('../../src/kernels/backend') as typeof import('../../src/kernels/backend');
          expect(b.nativeLoadErrors()).toEqual([]);
          expect(b.nativeInfo()?.cudaBuilt).toBe(true);
          if (noDevice) {
            expect(b.backend()).toBe('native');
            expect(() => b.setBackend('native-cuda')).toThrow(/^Cannot use the 'native-cuda' backend: no usable CUDA device: /);
            expect(b.backend()).toBe('native');
            expect(() => b.uploadToDevice(new Float32Array(2))).toThrow(/^Cannot use the 'native-cuda' backend: no usable CUDA device: /);
            expect(() => b.gatherLogProbsOnDevice({} as never, new Int32Array(1), 1, 2)).toThrow(
              /^Cannot use the 'native-cuda' backend: no usable CUDA device: /,
            );
          } else {
            expect(b.backend()).toBe('native-cuda');
            b.setBackend('native');
            expect(b.backend()).toBe('native');
          }
          b.setBackend('js');
          expect(b.backend()).toBe('js');
        });
        if (noDevice) {
          jest.isolateModules(() => {
            process.env.MEMPO_DEVICE = 'cuda';
            const b = require('../../src/kernels/backend') as typeof import('../../src/kernels/backend');
            expect(() => b.backend()).toThrow(/^Cannot use the 'native-cuda' backend: no usable CUDA device: /);
          });
        }
        jest.isolateModules(() => {
          process.env.MEMPO_DEVICE = 'cpu';
          const b = require('../../src/kernels/backend') as typeof import('../../src/kernels/backend');
          expect(b.backend()).toBe('native');
        });
        jest.isolateModules(() => {
          process.env.MEMPO_DEVICE = 'gpu';
          const b = require('../../src/kernels/backend') as typeof import('../../src/kernels/backend');
          expect(() => b.backend()).toThrow(`Expected 'cpu' or 'cuda' for MEMPO_DEVICE but received "gpu"`);
        });
      } finally {
        process.env = saved;
        jest.resetModules();
      }
    });
  });
}
