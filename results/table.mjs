// The tables of docs/experiments.md "Does the memory reward help?" from results/eval/*.json (results/evals.sh),
// printed as Markdown so that no figure is copied by hand. `base` is the shipped model, which the
// arms start from; `prev` and `prev-<arm>` are the round from commit a78a8c4's model (the stage 2
// shipped before the repair), `start` and `start-<arm>` the round from commit bcbbbe6's.
//   node results/table.mjs [base grpo mempo prev prev-grpo start start-grpo ...]
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { row } from './batch.mjs';

const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'eval');
const models = process.argv.length > 2 ? process.argv.slice(2) : ['base', 'grpo', 'grpo-s2', 'mempo', 'mempo-s2', 'mempo-qr']; // missing ones are left out
const read = (name) => {
  const file = path.join(dir, `${name}.json`);
  return existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')) : null;
};
const pct = (x) => (x === undefined || x === null ? '—' : (100 * x).toFixed(1));
const num = (x, d = 0) => (x === undefined || x === null ? '—' : x.toFixed(d));
const objectives = ['2', '4', '6', '8', '10'];

const evals = [];
for (const m of models) for (const policy of ['memory', 'full']) {
  const e = read(`${m}-${policy}`);
  if (e) evals.push({ m, policy, e });
}
if (evals.length === 0) {
  console.error(`no results/eval/<model>-<policy>.json for ${models.join(', ')}: run results/evals.sh first`);
  process.exit(2);
}

console.log('EM (%) of single-objective questions by hops, token F1 (%) of bundles by objectives, greedy, test split:\n');
console.log(row(['model', 'policy', '1-hop', '2-hop', '3-hop', ...objectives.map((k) => `F1 ${k} obj.`), 'bundle EM', 'format-valid rounds']));
console.log(row(['---', '---', ...Array(3 + objectives.length + 2).fill('---:')]));
for (const { m, policy, e } of evals) {
  const bundles = Object.entries(e.byObjectives).filter(([k]) => Number(k) > 1).map(([, b]) => b);
  const bundleEm = bundles.reduce((a, b) => a + b.em * b.trajectories, 0) / Math.max(1, bundles.reduce((a, b) => a + b.trajectories, 0));
  console.log(row([m, policy, ...['1', '2', '3'].map((h) => pct(e.byHops[h]?.em)), ...objectives.map((k) => pct(e.byObjectives[k]?.f1)), pct(bundleEm), pct(e.formatValidRoundRate)]));
}

console.log('\nContext tokens per trajectory, total / peak over its rounds, by objectives (1 = the chain questions):\n');
const keys = ['1', ...objectives];
console.log(row(['model', 'policy', ...keys.map((k) => `${k} obj.`), 'mean turns']));
console.log(row(['---', '---', ...Array(keys.length + 1).fill('---:')]));
for (const { m, policy, e } of evals) {
  console.log(row([m, policy, ...keys.map((k) => {
    const b = e.byObjectives[k];
    return b ? `${num(b.contextTokens.meanTotal)} / ${num(b.contextTokens.meanPeak)}` : '—';
  }), num(e.meanTurns, 2)]));
}

const probes = models.map((m) => ({ m, p: read(`${m}-dev-probes`) })).filter((x) => x.p);
if (probes.length) {
  console.log('\nThe memory reward on 100 dev questions (full policy, greedy; rounds ≥ 2):\n');
  console.log(row(['model', 'snapshots', 'mean memory reward', '> 0', '< 0', 'mean P_full', 'P_full = 0', 'mean P_mem', 'P_mem = 0']));
  console.log(row(['---', ...Array(8).fill('---:')]));
  for (const { m, p } of probes) {
    console.log(row([m, String(p.snapshots), num(p.memReward.mean, 3), pct(p.memReward.positiveShare) + ' %', pct(p.memReward.negativeShare) + ' %',
      num(p.pFull.all.mean, 3), pct(p.pFull.all.zeroShare) + ' %', num(p.pMem.all.mean, 3), pct(p.pMem.all.zeroShare) + ' %']));
  }
}

// docs/experiments.md "The embedded agent on unseen questions": the shipped model (base) under both policies, by question kind
const base = { memory: read('base-memory'), full: read('base-full') };
if (base.memory && base.full) {
  const int = (x) => Math.round(x).toLocaleString('en-US');
  const kinds = [
    ...['1', '2', '3'].map((h) => [`${h}-hop`, (e) => e.byHops[h]]),
    ...objectives.map((k) => [`${k} objectives`, (e) => e.byObjectives[k]]),
  ];
  console.log('\nThe shipped model (base) by question kind, greedy, test split:\n');
  console.log(row(['question kind', 'n', 'exact match, `memory` policy', 'exact match, `full` policy',
    'context tokens / question, `memory` (total · peak)', '`full` (total · peak)', 'rounds, `memory` / `full`']));
  console.log(row(['---', ...Array(6).fill('---:')]));
  const cell = (b) => (b ? `${int(b.contextTokens.meanTotal)} · ${int(b.contextTokens.meanPeak)}` : '—');
  for (const [name, pick] of kinds) {
    const [m, f] = [pick(base.memory), pick(base.full)];
    console.log(row([name, String(m?.questions ?? '—'), `${pct(m?.em)} %`, `${pct(f?.em)} %`, cell(m), cell(f),
      `${num(m?.meanTurns, 1)} / ${num(f?.meanTurns, 1)}`]));
  }
  const all = (e) => `${int(e.contextTokens.meanTotalPerQuestion)} · ${int(e.contextTokens.meanPeakPerQuestion)}`;
  console.log(row(['all', String(base.memory.questions), `${pct(base.memory.em)} %`, `${pct(base.full.em)} %`, all(base.memory), all(base.full),
    `${num(base.memory.meanTurns, 1)} / ${num(base.full.meanTurns, 1)}`]));
}
