/**
 * Inputs a hostile caller can give the kernels (issue 13, "The native addon"): whatever they are
 * given, the process survives and both backends throw or compute the same. Each case runs on the
 * project's backend and, where it compares, on both.
 */
import { spawnSync } from 'child_process';
import * as path from 'path';
import { Worker } from 'worker_threads';
import {
  answerProbability,
  backend,
  gatherLogProbs,
  grpoOutcomeAdvantage,
  memoryAdvantage,
  memoryRewards,
  ppoPolicyLoss,
  setBackend,
} from '../../src';
import { MAX_RESULT_BYTES, newResult } from '../../src/kernels/result';
import { onEachBackend, outcomeOf } from '../helpers';

/** What fn does on each backend: its result, or the error's class and message. */
function onBoth(fn: () => unknown): { native: unknown; js: unknown } {
  return onEachBackend(() => {
    const o = outcomeOf(fn);
    return 'value' in o ? o.value : o;
  });
}

function sameThrow(fn: () => unknown, name: string, message: string | RegExp): void {
  const { native, js } = onBoth(fn);
  expect(native).toEqual(js);
  expect(js).toEqual({ threw: name, message: typeof message === 'string' ? message : expect.stringMatching(message) });
}

describe('results too large for a typed array', () => {
  // The size rule is checked before anything is allocated: the message is the pre-check's own.
  const tooLarge = /^Expected a result of at most \d+ float32 values \(\d+ bytes, the largest buffer Node hands an addon\) for /;
  const node20 = MAX_RESULT_BYTES <= 2 ** 32 ? it : it.skip; // the issue's shapes exceed 4 GiB, Node 20's limit

  node20('memoryAdvantage with a 4 GiB + 256 KiB result: the same RangeError on both backends', () => {
    sameThrow(() => memoryAdvantage([], [], new Int32Array(0), 65536, 16385), 'RangeError', tooLarge);
    sameThrow(() => memoryAdvantage([], [], new Int32Array(0), 65536, 16385), 'RangeError', /for batch\*seqLen but received 65536\*16385 = 1073807360$/);
  });

  node20('grpoOutcomeAdvantage with an 8 GiB result (a 2 GiB mask) on both backends', () => {
    const mask = new Uint8Array(2 ** 31); // the input is real; the check comes before the output
    sameThrow(() => grpoOutcomeAdvantage([1, 0], ['a', 'a'], mask, 2 ** 30), 'RangeError', /for B\*seqLen but received 2\*1073741824 = 2147483648$/);
  });

  node20('memoryAdvantage with a 32 GiB result (more than memory) on both backends', () => {
    sameThrow(() => memoryAdvantage([], [], new Int32Array(0), 2 ** 20, 2 ** 13), 'RangeError', tooLarge);
  });

  it('a result beyond any typed array on any Node version', () => {
    sameThrow(() => memoryAdvantage([], [], new Int32Array(0), 2 ** 31 - 1, 2 ** 31 - 1), 'RangeError', tooLarge);
  });

  it('the JS twin words an allocation failure as the addon does', () => {
    expect(() => newResult(2 ** 33)).toThrow(new RangeError('Cannot allocate the result (a Float32Array of length 8589934592): out of memory'));
  });

  // The addon itself, past the TypeScript checks, under a 3 GB address-space limit: every large
  // allocation fails at once, cheaply. (Not under ASan, whose shadow memory needs terabytes, nor
  // under qemu-user, scripts/arm64-check.sh: its arm64 Node cannot be spawned by the x64 host.)
  const plainAddon = process.env.MEMPO_ASAN === '1' || process.env.MEMPO_QEMU === '1' ? it.skip : it;
  plainAddon('the addon throws a catchable RangeError where it cannot allocate the result', () => {
    const root = path.resolve(__dirname, '..', '..');
    const explicit = process.env.MEMPO_NATIVE_BINDING;
    const addonPath = explicit ? path.resolve(explicit) : (require('node-gyp-build') as { path(dir: string): string }).path(root);
    const script = `
      const a = require(${JSON.stringify(addonPath)});
      const none = [new Float64Array(0), new Int32Array(0), 0, new Int32Array(0)];
      for (const [rows, cols] of [[32768, 32768], [65536, 16385], [2 ** 20, 2 ** 13]]) {
        try { a.memoryAdvantage(...none, rows, cols, 1e-6, true); console.log('allocated'); }
        catch (e) { console.log(e.name + ': ' + e.message); }
      }`;
    const r = spawnSync('bash', ['-c', 'ulimit -v 3000000 && exec "$0" -e "$1"', process.execPath, script], { encoding: 'utf8', timeout: 60000 });
    expect({ status: r.status, signal: r.signal }).toEqual({ status: 0, signal: null });
    expect(r.stdout.trim().split('\n')).toEqual([
      'RangeError: Cannot allocate the result (a Float32Array of length 1073741824): out of memory',
      'RangeError: Cannot allocate the result (a Float32Array of length 1073807360): out of memory',
      'RangeError: Cannot allocate the result (a Float32Array of length 8589934592): out of memory',
    ]);
  });
});

describe('SharedArrayBuffer inputs changed by another thread during the call', () => {
  // A worker flips one index between a valid value and one far outside the arrays while the
  // kernels run in a loop: validation may see either, the kernel must never use an unchecked one.
  async function race(indices: Int32Array, at: number, good: number, bad: number, call: () => void): Promise<{ ran: number; refused: number }> {
    const ctl = new Int32Array(new SharedArrayBuffer(4));
    const worker = new Worker(
      `const { workerData: { buf, ctl, at, good, bad } } = require('worker_threads');
       const a = new Int32Array(buf), c = new Int32Array(ctl);
       while (Atomics.load(c, 0) === 0) { Atomics.store(a, at, bad); Atomics.store(a, at, good); }`,
      { eval: true, workerData: { buf: indices.buffer, ctl: ctl.buffer, at, good, bad } },
    );
    await new Promise((resolve) => worker.once('online', resolve));
    let ran = 0;
    let refused = 0;
    try {
      const until = Date.now() + 700;
      for (let i = 0; i < 20000 && Date.now() < until; i++) {
        try {
          call();
          ran++;
        } catch (err) {
          if ((err as Error).name !== 'RangeError') throw err;
          refused++; // validation saw the bad value: the right answer too
        }
      }
    } finally {
      Atomics.store(ctl, 0, 1);
      await worker.terminate();
    }
    return { ran, refused };
  }

  it.each(['native', 'js'] as const)('gatherLogProbs with racing targets (%s)', async (b) => {
    const before = backend();
    setBackend(b);
    try {
      const R = 512, V = 64;
      const logits = new Float32Array(R * V).fill(0.5);
      const targets = new Int32Array(new SharedArrayBuffer(4 * R));
      const n = await race(targets, R - 1, 3, 0x3fffffff, () => gatherLogProbs(logits, targets, R, V));
      expect(n.ran + n.refused).toBeGreaterThan(0);
    } finally {
      setBackend(before);
    }
  });

  it.each(['native', 'js'] as const)('memoryAdvantage with racing span rows and ends (%s)', async (b) => {
    const before = backend();
    setBackend(b);
    try {
      const M = 256, B = 256, T = 64;
      const spans = new Int32Array(new SharedArrayBuffer(12 * M));
      for (let m = 0; m < M; m++) spans.set([m, 0, 32], 3 * m);
      const rewards = Array.from({ length: M }, (_, m) => m % 7);
      const groups = Array.from({ length: M }, (_, m) => m % 5);
      const rows = await race(spans, 3 * (M - 1), M - 1, 0x3fffffff, () => memoryAdvantage(rewards, groups, spans, B, T));
      const ends = await race(spans, 3 * (M - 1) + 2, 32, 0x7ffffff0, () => memoryAdvantage(rewards, groups, spans, B, T));
      expect(rows.ran + rows.refused + ends.ran + ends.refused).toBeGreaterThan(0);
    } finally {
      setBackend(before);
    }
  });
});

describe('a Proxy over a typed array', () => {
  const typedError = (arg: string, shape: string) => `Expected Float32Array of length ${shape} for ${arg} but received an object`;
  it('is refused by every kernel with the same TypeError on both backends', () => {
    const logp = new Proxy(new Float32Array(4), {});
    const n4 = () => new Float32Array(4);
    sameThrow(() => gatherLogProbs(logp, new Int32Array([0, 1]), 2, 2), 'TypeError', typedError('logits', 'rows*vocab = 4'));
    sameThrow(() => answerProbability(logp, new Uint8Array(4), 2, 2), 'TypeError', typedError('logp', 'rows*cols = 4'));
    const input = { logp: n4(), oldLogp: n4(), advantages: n4(), mask: new Uint8Array(4), rows: 2, cols: 2 };
    sameThrow(() => ppoPolicyLoss({ ...input, oldLogp: logp }), 'TypeError', typedError('oldLogp', 'rows*cols = 4'));
    const mask = new Proxy(new Uint8Array(4), {});
    sameThrow(() => grpoOutcomeAdvantage([1, 0], ['a', 'a'], mask, 2), 'TypeError', /^Expected Uint8Array of length B\*T = 4 for responseMask but received an object$/);
  });

  it('and so is a typed array whose prototype was swapped or whose length was redefined', () => {
    const fake = Object.setPrototypeOf(new Int32Array(4), Float32Array.prototype) as Float32Array;
    sameThrow(() => answerProbability(fake, new Uint8Array(4), 2, 2), 'TypeError', /^Expected Float32Array of length rows\*cols = 4 for logp but received /);
    const short = new Float32Array(2);
    Object.defineProperty(short, 'length', { value: 4 });
    sameThrow(() => answerProbability(short, new Uint8Array(4), 2, 2), 'RangeError', /^Expected Float32Array of length rows\*cols = 4 for logp but received /);
  });
});

describe('non-finite and overflowing values', () => {
  const mask = new Uint8Array(6).fill(1);
  it('scores whose group sum overflows are refused, naming the score', () => {
    const msg = 'Expected a value whose group sum, squared deviations and advantage stay finite (float32 range for the advantage) for scores[0] but received 1e+308';
    sameThrow(() => grpoOutcomeAdvantage([1e308, 1e308, 0], ['a', 'a', 'a'], mask, 2), 'RangeError', msg);
  });

  it('scores whose squared deviations overflow (advantages silently 0 before) and singletons beyond float32', () => {
    sameThrow(() => grpoOutcomeAdvantage([1e200, -1e200, 0], ['a', 'a', 'a'], mask, 2), 'RangeError', /for scores\[0\] but received 1e\+200$/);
    sameThrow(() => grpoOutcomeAdvantage([1, 2, 1e39], ['a', 'a', 'b'], mask, 2), 'RangeError', /for scores\[2\] but received 1e\+39$/);
    sameThrow(() => grpoOutcomeAdvantage([1e39, 0, 1], ['a', 'a', 'b'], mask, 2, { normByStd: false }), 'RangeError', /for scores\[0\] but received 1e\+39$/);
  });

  it('memory rewards whose group sum overflows are refused, naming the reward', () => {
    const spans = new Int32Array([0, 0, 1, 1, 0, 1]);
    sameThrow(() => memoryAdvantage([1e308, 1e308], ['q', 'q'], spans, 2, 2), 'RangeError', /for memRewards\[0\] but received 1e\+308$/);
  });

  it('large but representable scores still compute', () => {
    const { native, js } = onBoth(() => Array.from(grpoOutcomeAdvantage([1e150, -1e150, 0], ['a', 'a', 'a'], mask, 2)));
    expect(native).toEqual(js);
    expect((js as number[]).every(Number.isFinite)).toBe(true);
  });

  it('an answer log-prob of +Infinity is refused, naming it; a mean that overflows P too', () => {
    const logp = new Float32Array([-0.1, Infinity, -0.2, -0.3]);
    sameThrow(() => answerProbability(logp, new Uint8Array([1, 1, 1, 1]), 2, 2), 'RangeError', /^Expected a log-probability below \+Infinity for logp\[1\] but received Infinity$/);
    sameThrow(() => answerProbability(new Float32Array([100, 90, -1, -1]), new Uint8Array(4).fill(1), 2, 2), 'RangeError', /for logp \(row 0\) but received a mean of 95 over 2 kept tokens$/);
    // Off the mask, +Infinity is never read.
    const { native, js } = onBoth(() => Array.from(answerProbability(logp, new Uint8Array([1, 0, 1, 1]), 2, 2)));
    expect(native).toEqual(js);
  });

  it.each(['logp', 'oldLogp'] as const)('ppoPolicyLoss with a NaN in %s: NaN loss and approxKl on both backends (torch)', (arg) => {
    const n = 32; // four AVX2 blocks of one row
    const input = {
      logp: new Float32Array(n).fill(-1),
      oldLogp: new Float32Array(n).fill(-1.1),
      advantages: new Float32Array(n).fill(0.5),
      mask: new Uint8Array(n).fill(1),
      rows: 1,
      cols: n,
    };
    input[arg][5] = NaN;
    const { native, js } = onBoth(() => ppoPolicyLoss(input));
    expect(native).toEqual(js);
    expect(js).toMatchObject({ loss: NaN, approxKl: NaN, clipFrac: 0 });
    expect((js as { grad: Float32Array }).grad[5]).toBe(0); // the clamp passes no gradient through NaN, as torch's
  });

  it('memoryRewards names snapshots when 2*snapshots rows are too many', () => {
    sameThrow(() => memoryRewards(new Float32Array(0), new Uint8Array(0), 2 ** 30, 1), 'RangeError', /^Expected a non-negative integer below 2\^30 \(2\*snapshots rows\) for snapshots but received 1073741824$/);
  });
});
