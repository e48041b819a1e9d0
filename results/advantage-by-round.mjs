// Where the memory advantage lands in a batch: its mean over the snapshots of rounds that search
// (the gold may not be found yet) and of rounds that answer, by the trajectory's number of rounds,
// by its score and by the mem's length in tokens, under both groupings (docs/algorithm.md §5),
// recomputed from the batch's memory rewards with mempo's own memoryAdvantage. Also the sum over
// a trajectory's mem tokens (what the memory advantage adds to its policy-gradient weight) beside
// the sum of its outcome advantage over its trained tokens, by question kind (chain or bundle) and
// rounds, and how many groups of each kind are mixed (the outcome advantage is zero elsewhere).
//   node results/advantage-by-round.mjs DIR/batch.jsonl [--json]      (a `mempo rollout` batch)
import { createRequire } from 'node:module';
import { fail, readBatch } from './batch.mjs';

const require = createRequire(import.meta.url);
const { evalReport, memoryAdvantage } = require('../dist/index.js');

const file = process.argv[2];
if (!file) fail('usage: node results/advantage-by-round.mjs DIR/batch.jsonl [--json]');
const records = readBatch(file);

// One snapshot per round with a memory reward; each gets its own column so that the kernel's
// output can be read back per snapshot (spans must not overlap within a row).
const kindOf = (r) => (r.objectives > 1 ? 'bundle' : 'chain');
const snaps = [];
records.forEach((r, row) => {
  for (const rd of r.rounds) {
    if (rd.memReward === null || !rd.memSpan) continue;
    snaps.push({ row, uid: r.uid, round: rd.index, reward: rd.memReward, action: rd.action,
      tokens: rd.memSpan[1] - rd.memSpan[0], rounds: r.rounds.length, score: r.score, kind: kindOf(r) });
  }
});
if (snaps.length === 0) fail(`${file}: no round carries a memory reward (a run with --no-memory-reward?)`);
const M = snaps.length;
const spans = new Int32Array(3 * M);
snaps.forEach((s, m) => spans.set([s.row, m, m + 1], 3 * m));
const rounds = Int32Array.from(snaps.map((s) => s.round));

const memLength = (n) => (n <= 16 ? '1-16' : n <= 32 ? '17-32' : n <= 64 ? '33-64' : '65+');
const mean = (v) => v.reduce((a, b) => a + b, 0) / v.length;
const roundsKey = (n) => `${Math.min(n, 6)}${n >= 6 ? '+' : ''}`;
// The outcome advantage summed over each trajectory's trained tokens, from the batch itself.
const outcomeSum = records.map((r) => r.outcomeAdvantage.reduce((a, x, t) => a + (r.responseMask[t] ? x : 0), 0));
// Groups of each kind and how many are mixed, by mempo's own evaluation table (evalReport).
const groups = {};
for (const kind of ['chain', 'bundle']) {
  const rs = records.filter((r) => kindOf(r) === kind);
  if (rs.length === 0) continue;
  const e = evalReport(rs);
  groups[kind] = { groups: e.questions, mixed: Math.round(e.mixedGroupFraction * e.questions),
    trajectories: e.trajectories, scored: rs.filter((r) => r.score > 0).length };
}
const out = { snapshots: M, trajectories: records.length, groups, groupings: {} };
for (const grouping of ['question', 'question-round']) {
  const adv = memoryAdvantage(snaps.map((s) => s.reward), snaps.map((s) => s.uid), spans, records.length, M,
    { memGrouping: grouping, rounds });
  const buckets = {};
  const perTrajectory = new Map(); // row → { rounds, sum of advantage × mem tokens }
  snaps.forEach((s, m) => {
    const a = adv[s.row * M + m];
    for (const key of [`${s.action ?? 'actionless'} rounds`, `trajectory of ${roundsKey(s.rounds)} rounds`, `trajectory scored ${s.score}`, `mem of ${memLength(s.tokens)} tokens`]) {
      (buckets[key] ??= []).push(a);
    }
    const t = perTrajectory.get(s.row) ?? { key: `${s.kind}, ${roundsKey(s.rounds)} rounds`, sum: 0 };
    t.sum += a * s.tokens;
    perTrajectory.set(s.row, t);
  });
  const byLength = {};
  for (const [row, t] of perTrajectory) (byLength[t.key] ??= []).push([t.sum, outcomeSum[row]]);
  out.groupings[grouping] = {
    meanAdvantage: Object.fromEntries(Object.entries(buckets).sort().map(([k, v]) => [k, { n: v.length, mean: mean(v) }])),
    memTokenSum: Object.fromEntries(Object.entries(byLength).sort().map(([k, v]) => [k,
      { n: v.length, mean: mean(v.map((x) => x[0])), outcomeMean: mean(v.map((x) => x[1])) }])),
  };
}
const rewards = {};
for (const s of snaps) (rewards[`${s.action ?? 'actionless'} rounds`] ??= []).push(s.reward);
out.meanReward = Object.fromEntries(Object.entries(rewards).map(([k, v]) => [k, { n: v.length, mean: mean(v) }]));

if (process.argv.includes('--json')) {
  console.log(JSON.stringify(out, null, 2));
} else {
  const signed = (x, digits) => `${x >= 0 ? ' ' : ''}${x.toFixed(digits)}`;
  console.log(`${file}: ${M} snapshots in ${records.length} trajectories`);
  for (const [k, g] of Object.entries(groups)) {
    console.log(`  ${k} groups: ${g.groups}, mixed ${g.mixed}; trajectories ${g.trajectories}, scored above 0: ${g.scored}`);
  }
  for (const [k, v] of Object.entries(out.meanReward)) console.log(`  memory reward, ${k}: ${v.mean.toFixed(3)} (n ${v.n})`);
  for (const [g, o] of Object.entries(out.groupings)) {
    console.log(`memory advantage, grouping '${g}':`);
    for (const [k, v] of Object.entries(o.meanAdvantage)) console.log(`  ${k.padEnd(28)} ${signed(v.mean, 3)}  (n ${v.n})`);
    console.log('  sum over a trajectory\'s mem tokens (beside: its outcome advantage summed over its trained tokens):');
    for (const [k, v] of Object.entries(o.memTokenSum)) {
      console.log(`    ${k.padEnd(18)} ${signed(v.mean, 2).padEnd(9)} outcome ${signed(v.outcomeMean, 2)}  (n ${v.n})`);
    }
  }
}
