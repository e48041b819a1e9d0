// The arms' cost and movement table of docs/experiments.md "Does the memory reward help?" from their
// metrics.jsonl (results/arms.sh), so that no figure is copied by hand: the wall time (the sum
// of the steps' wall time), the median step and what it spends, the generated tokens, the KL to
// the starting model at the last step, the median gradient norm and the batches' share of
// format-valid trajectories over the last six steps.
//   node results/arm-stats.mjs results/arms/{grpo,mempo}/metrics.jsonl
import path from 'node:path';
import { fail, readJsonLines, row } from './batch.mjs';

const files = process.argv.slice(2);
if (files.length === 0) fail('usage: node results/arm-stats.mjs ARM/metrics.jsonl ...');
const median = (xs) => {
  const s = xs.filter((x) => typeof x === 'number').sort((a, b) => a - b);
  if (s.length === 0) return null;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const sec = (ms) => (ms === null ? '—' : `${(ms / 1000).toFixed(1)} s`);

const arms = files.map((file) => {
  const steps = readJsonLines(file, 'metrics').filter((m) => m.step > 0);
  if (steps.length === 0) fail(`${file}: no training step`);
  return { file, steps };
});

console.log(row(['arm', 'steps', 'wall time', 'median step', 'rollout', 'learner forward', 'backward', 'scoring (2N pass)',
  'generated tokens', 'KL at the last step', 'median gradient norm', 'format-valid trajectories, last 6 steps']));
console.log(row(['---', ...Array(11).fill('---:')]));
for (const { file, steps } of arms) {
  const wall = (k) => steps.map((m) => m.wallMs?.[k]);
  const last = steps[steps.length - 1];
  const tail = steps.slice(-6).map((m) => m.formatValidRate).filter((x) => typeof x === 'number');
  const memoryReward = steps.some((m) => typeof m.memoryReward?.mean === 'number'); // GRPO arms have no 2N pass
  console.log(row([
    path.basename(path.dirname(file)),
    String(last.step),
    `${(steps.reduce((a, m) => a + (m.wallMs?.total ?? 0), 0) / 60000).toFixed(1)} min`,
    sec(median(wall('total'))),
    sec(median(wall('rollout'))),
    sec(median(wall('learnerForward'))),
    sec(median(wall('learnerBackward'))),
    memoryReward ? sec(median(wall('scoring'))) : '—',
    `${Math.round(steps.reduce((a, m) => a + (m.tokens?.generated ?? 0), 0) / 1000)} k`,
    last.klRef === null || last.klRef === undefined ? '—' : last.klRef.toFixed(3),
    median(steps.map((m) => m.gradNorm))?.toFixed(3) ?? '—',
    tail.length ? `${(100 * tail.reduce((a, b) => a + b, 0) / tail.length).toFixed(1)} %` : '—',
  ]));
}
