#!/usr/bin/env node
/**
 * `npm start` (until the rollout command lands): one MemPO group worked end to end on the kernel
 * API with hand-written trajectories — outcome rewards, memory rewards from answer log-probs,
 * GRPO + memory advantages on token spans, and one PPO loss evaluation.
 */
import {
  backend,
  computeScore,
  finalAdvantage,
  grpoOutcomeAdvantage,
  memoryAdvantage,
  memoryRewards,
  ppoPolicyLoss,
} from '..';

const golds = ['Lake Varne'];
const obs = '<information>Doc 1 (Orlen Dask): Orlen Dask was born in Tavi.</information>';
const trajectories = [
  `<mem>Q: where was Orlen Dask born, which lake is there</mem><think>find birthplace</think><search>Orlen Dask born</search>${obs}` +
    `<mem>Orlen Dask born in Tavi</mem><think>find the lake of Tavi</think><answer>Lake Varne</answer>`,
  `<mem>Q: birthplace lake</mem><think>search</think><search>Orlen Dask</search>${obs}` +
    `<mem>nothing yet</mem><think>guess</think><answer>Lake Ost</answer>`,
  `<mem>Q: birthplace of Orlen Dask</mem><think>search</think><search>Orlen Dask</search>${obs}` +
    `<mem>born in Tavi; Tavi lies on Lake Varne</mem><think>done</think><answer>lake varne</answer>`,
  `<think>no memory written</think><answer>Lake Varne</answer>`,
];
const B = trajectories.length;
const T = 24; // response tokens per trajectory in this toy batch
const scores = trajectories.map((t) => computeScore(t, golds));

// Round-2 snapshots of trajectories 0-2: log-probs of the 3 gold-answer tokens under the full
// context (rows 0-2) and under the memory-only context (rows 3-5), as a scorer would return.
const lp = (...p: number[]) => p.map(Math.log);
const logp = new Float32Array([
  ...lp(0.8, 0.7, 0.9), ...lp(0.6, 0.5, 0.7), ...lp(0.85, 0.8, 0.9),
  ...lp(0.82, 0.75, 0.9), ...lp(0.3, 0.2, 0.4), ...lp(0.9, 0.85, 0.95),
]);
const { memRewards, pFull, pMem } = memoryRewards(logp, new Uint8Array(18).fill(1), 3, 3);

const mask = new Uint8Array(B * T).fill(1);
for (let b = 0; b < B; b++) mask.fill(0, b * T + 8, b * T + 14); // the observation block
const spans = new Int32Array([0, 14, 17, 1, 14, 17, 2, 14, 17]); // round-2 <mem> spans
const outcome = grpoOutcomeAdvantage(scores, [0, 0, 0, 0], mask, T);
const memory = memoryAdvantage(memRewards, [0, 0, 0], spans, B, T);
const advantages = finalAdvantage(outcome, memory, mask, { alpha: 1 });

const oldLogp = new Float32Array(B * T).fill(-1.2);
const newLogp = oldLogp.map((x, i) => x + 0.05 * Math.sin(i));
const loss = ppoPolicyLoss({ logp: newLogp, oldLogp, advantages, mask, rows: B, cols: T });

const f = (x: number) => (x >= 0 ? ' ' : '') + x.toFixed(3);
console.log(`mempo kernel demo (backend: ${backend()})\n`);
trajectories.forEach((_, b) => {
  const m = b < 3 ? `P_full ${pFull[b]!.toFixed(3)}  P_mem ${pMem[b]!.toFixed(3)}  memory reward ${f(memRewards[b]!)}` : 'no memory snapshot';
  console.log(`trajectory ${b}: score ${scores[b]}  ${m}`);
  console.log(`  advantages: outcome ${f(outcome[b * T]!)}  tokens 14-16 (round-2 <mem>) ${f(advantages[b * T + 14]!)}  observation ${f(advantages[b * T + 9]!)}`);
});
console.log(`\nPPO loss ${loss.loss.toFixed(5)}  clip fraction ${loss.clipFrac.toFixed(3)}  approx KL ${loss.approxKl.toExponential(2)}`);
