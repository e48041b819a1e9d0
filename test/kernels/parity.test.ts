/**
 * The native addon against the pure-JS twin on randomised inputs: every kernel, shapes from
 * tiny to MemPO-sized (Qwen2.5's vocabulary of 151 936, B*T in the millions), equal within
 * 1e-5 absolute + 1e-5 relative. MEMPO_PARITY_SMALL=1 (scripts/asan-check.sh, where every native
 * call runs sanitized) scales the shapes down, keeping an odd vocabulary and the AVX2 tails.
 */
import {
  answerProbability,
  gatherLogProbs,
  grpoOutcomeAdvantage,
  memoryAdvantage,
  ppoPolicyLoss,
} from '../../src';
import { expectClose, onEachBackend, rng } from '../helpers';

const SMALL = process.env.MEMPO_PARITY_SMALL === '1';
const QWEN_V = SMALL ? 15193 : 151936; // Qwen2.5's vocabulary, or an odd tenth of it

const onBoth = onEachBackend;

describe('gatherLogProbs parity', () => {
  const cases: [string, number, number, (r: () => number, i: number) => number][] = [
    ['tiny', 3, 5, (r) => r() * 4 - 2],
    ['odd vocab, realistic logits', 17, 32003, (r) => (r() - 0.5) * 60],
    ['Qwen2.5 vocab, realistic logits', 8, QWEN_V, (r) => (r() - 0.5) * 60],
    ['Qwen2.5 vocab, large magnitudes', 8, QWEN_V, (r) => (r() - 0.5) * 2e4],
    ['Qwen2.5 vocab, one dominant logit per row', 4, QWEN_V, (r, i) => (i % QWEN_V === 777 ? 80 : (r() - 0.5) * 10)],
    ['Qwen2.5 vocab, flat rows', 4, QWEN_V, () => 1.5],
  ];
  it.each(cases)('%s (R=%d, V=%d)', (_name, R, V, gen) => {
    const r = rng(R * 7919 + V);
    const logits = new Float32Array(R * V);
    for (let i = 0; i < logits.length; i++) logits[i] = gen(r, i);
    const targets = new Int32Array(R).map(() => Math.floor(r() * V));
    targets[0] = 777 % V;
    const { native, js } = onBoth(() => gatherLogProbs(logits, targets, R, V));
    expectClose(native, js, 1e-5, 1e-5);
  });
});

describe('answerProbability parity', () => {
  it('agrees on 288 items x 16 answer tokens with random masks and thresholds', () => {
    const r = rng(5);
    const R = 288, A = 16;
    const logp = new Float32Array(R * A).map(() => Math.log(r() + 1e-9));
    const mask = new Uint8Array(R * A).map(() => (r() < 0.7 ? 1 : 0));
    for (const threshold of [Math.log(0.5), -Infinity, -0.1]) {
      const { native, js } = onBoth(() => answerProbability(logp, mask, R, A, { threshold }));
      expectClose(native, js, 1e-5, 1e-5);
    }
  });
});

describe('advantage parity', () => {
  const B = SMALL ? 128 : 1024, T = SMALL ? 515 : 2048; // 2M tokens (66k small)
  const r = rng(9);
  const scores = new Float32Array(B).map(() => (r() < 0.5 ? 1 : 0) + r() * 0.1);
  const groups = Array.from({ length: B }, (_, i) => `uid-${Math.floor(i / 16)}`);
  const mask = new Uint8Array(B * T).map(() => (r() < 0.85 ? 1 : 0));

  it.each([true, false])('grpoOutcomeAdvantage, normByStd=%s', (normByStd) => {
    const { native, js } = onBoth(() => grpoOutcomeAdvantage(scores, groups, mask, T, { normByStd, eps: 1e-6 }));
    expectClose(native, js, 1e-5, 1e-5);
  });

  it.each(['question', 'question-round'] as const)('memoryAdvantage, memGrouping=%s', (memGrouping) => {
    const M = B * 3;
    const spans = new Int32Array(M * 3);
    const rounds = new Int32Array(M);
    for (let m = 0; m < M; m++) {
      const row = Math.floor(m / 3), k = m % 3;
      const start = k * (SMALL ? 150 : 600) + Math.floor(r() * (SMALL ? 75 : 300));
      spans.set([row, start, start + 1 + Math.floor(r() * (SMALL ? 50 : 200))], 3 * m);
      rounds[m] = k + 2;
    }
    const rewards = new Float32Array(M).map(() => r() - 0.5);
    const uids = Array.from({ length: M }, (_, m) => Math.floor(m / 48));
    const { native, js } = onBoth(() => memoryAdvantage(rewards, uids, spans, B, T, { memGrouping, rounds }));
    expectClose(native, js, 1e-5, 1e-5);
  });
});

describe('ppoPolicyLoss parity', () => {
  const rows = SMALL ? 64 : 512, cols = SMALL ? 1029 : 4096; // 2M tokens (66k small)
  const r = rng(13);
  const n = rows * cols;
  const logp = new Float32Array(n).map(() => -r() * 5);
  const oldLogp = logp.map((x) => x + (r() - 0.5) * 0.8);
  const refLogp = logp.map((x) => x + (r() - 0.5) * 0.5);
  const advantages = new Float32Array(n).map(() => (r() - 0.5) * 3);
  const mask = new Uint8Array(n).map(() => (r() < 0.9 ? 1 : 0));
  it.each(['token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean'] as const)('%s with a k3 KL term', (aggMode) => {
    const { native, js } = onBoth(() => ppoPolicyLoss({ logp, oldLogp, advantages, mask, rows, cols, aggMode, refLogp, klCoef: 0.1 }));
    expectClose([native.loss, native.clipFrac, native.approxKl, native.kl!], [js.loss, js.clipFrac, js.approxKl, js.kl!], 1e-5, 1e-5);
    expectClose(native.grad, js.grad, 1e-5, 1e-5);
  });
});
