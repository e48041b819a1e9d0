// The two quality figures of stage 2's bar (training/README.md) on larger samples, from
// results/quality.sh's JSON plus the 400-question and seed-2 runs they extend: format-valid
// rounds over the whole test split (greedy, `memory`) and mixed groups at T = 1 pooled over seeds.
// Fisher's exact test compares the two models' counts (two-sided: the sum of the tables no more
// likely than the observed one, margins fixed).
//   node results/quality.mjs [stage1 prev base ...]   (stage1 first: the others are tested against it)
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { row } from './batch.mjs';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const read = (file) => {
  const p = path.join(root, file);
  if (!existsSync(p)) {
    console.error(`${file} is missing: run results/quality.sh (and results/evals.sh base) first`);
    process.exit(2);
  }
  return JSON.parse(readFileSync(p, 'utf8'));
};
const seeds = (process.env.SEEDS ?? '3 4').split(/\s+/).filter(Boolean);
// Each model's greedy reports (test 0-399, 400-999) and T = 1 reports (seed 2, then SEEDS). stage1's
// first two are training/eval's; a model's seed-2 report is <model>-mixed.json (evals.sh's name)
// or <model>-mixed-s2.json (stage2-check.sh's).
const files = (m) => (m === 'stage1'
  ? { greedy: ['training/eval/test-memory.json', 'results/eval/stage1-memory-rest.json'],
    mixed: ['training/eval/test-t1.json', ...seeds.map((s) => `results/eval/stage1-mixed-s${s}.json`)] }
  : { greedy: [`results/eval/${m}-memory.json`, `results/eval/${m}-memory-rest.json`],
    mixed: [existsSync(path.join(root, `results/eval/${m}-mixed.json`)) ? `results/eval/${m}-mixed.json` : `results/eval/${m}-mixed-s2.json`,
      ...seeds.map((s) => `results/eval/${m}-mixed-s${s}.json`)] });
const names = process.argv.length > 2 ? process.argv.slice(2) : ['stage1', 'prev', 'base'];
if (names[0] !== 'stage1') names.unshift('stage1'); // every model is tested against stage 1 alone
const models = Object.fromEntries(names.map((m) => [m, files(m)]));

// Rounds and invalid rounds of one eval report; a report written before mempo eval counted them
// (training/eval/test-memory.json) gives them back from its rate: rounds = turns summed.
const rounds = (e) => {
  if (e.rounds !== undefined) return { n: e.rounds, bad: e.invalidRounds };
  const n = Math.round(e.meanTurns * e.trajectories);
  return { n, bad: Math.round((1 - e.formatValidRoundRate) * n) };
};
const mixed = (e) => ({ n: e.questions, k: Math.round(e.mixedGroupFraction * e.questions) });

const logFact = (() => {
  const t = [0];
  return (n) => {
    for (let i = t.length; i <= n; i++) t.push(t[i - 1] + Math.log(i));
    return t[n];
  };
})();
// Two-sided Fisher exact p for successes a of n1 against b of n2.
const fisher = (a, n1, b, n2) => {
  const k = a + b, n = n1 + n2;
  const logP = (x) => logFact(k) + logFact(n - k) + logFact(n1) + logFact(n2)
    - logFact(x) - logFact(k - x) - logFact(n1 - x) - logFact(n2 - k + x) - logFact(n);
  const observed = logP(a);
  let p = 0;
  for (let x = Math.max(0, k - n2); x <= Math.min(k, n1); x++) if (logP(x) <= observed + 1e-9) p += Math.exp(logP(x));
  return Math.min(1, p);
};
const pct = (k, n) => (100 * k / n).toFixed(2);
const pv = (p) => (p < 0.001 ? p.toExponential(1) : p.toFixed(3));

const f = {};
for (const [m, files] of Object.entries(models)) {
  const g = files.greedy.map((x) => rounds(read(x)));
  const reports = files.mixed.map(read);
  const t = reports.map(mixed);
  const tf = reports.map(rounds);
  f[m] = { g, t, tf,
    G: { n: g.reduce((a, x) => a + x.n, 0), bad: g.reduce((a, x) => a + x.bad, 0) },
    T: { n: t.reduce((a, x) => a + x.n, 0), k: t.reduce((a, x) => a + x.k, 0) },
    TF: { n: tf.reduce((a, x) => a + x.n, 0), bad: tf.reduce((a, x) => a + x.bad, 0) } };
}

console.log('Format-valid rounds, `memory` policy (invalid / rounds):\n');
console.log(row(['model', 'greedy, test 0–399', 'greedy, test 400–999', 'greedy, whole test split', `T = 1, seeds ${['2', ...seeds].join(', ')}`]));
console.log(row(['---', '---:', '---:', '---:', '---:']));
for (const [m, x] of Object.entries(f)) {
  console.log(row([m, ...x.g.map((r) => `${pct(r.n - r.bad, r.n)} % (${r.bad} / ${r.n})`),
    `${pct(x.G.n - x.G.bad, x.G.n)} % (${x.G.bad} / ${x.G.n})`, `${pct(x.TF.n - x.TF.bad, x.TF.n)} % (${x.TF.bad} / ${x.TF.n})`]));
}
const s = f.stage1;
const others = names.slice(1);
console.log('\nFisher two-sided p against stage1:');
for (const m of others) {
  const b = f[m];
  console.log(`- ${m}: greedy whole split ${pv(fisher(b.G.bad, b.G.n, s.G.bad, s.G.n))}, T = 1 ${pv(fisher(b.TF.bad, b.TF.n, s.TF.bad, s.TF.n))}`);
}

console.log('\nInvalid rounds by objectives, greedy, `memory`, test 400–999 (invalid / rounds):\n');
const rest = Object.fromEntries(Object.keys(models).map((m) => [m, read(`results/eval/${m}-memory-rest.json`).byObjectives]));
const keys = [...new Set(Object.values(rest).flatMap((b) => Object.keys(b)))].sort((x, y) => Number(x) - Number(y));
console.log(row(['model', ...keys.map((k) => `${k} obj.`)]));
console.log(row(['---', ...keys.map(() => '---:')]));
for (const [m, b] of Object.entries(rest)) console.log(row([m, ...keys.map((k) => (b[k]?.rounds === undefined ? '—' : `${b[k].invalidRounds} / ${b[k].rounds}`))]));

console.log('\nMixed groups at T = 1 × 16 samples, `memory` policy, 80 test questions per seed (mixed / questions):\n');
console.log(row(['model', ...['2', ...seeds].map((x) => `seed ${x}`), 'pooled']));
console.log(row(['---', ...Array(seeds.length + 2).fill('---:')]));
for (const [m, x] of Object.entries(f)) {
  console.log(row([m, ...x.t.map((r) => `${pct(r.k, r.n)} % (${r.k})`), `${pct(x.T.k, x.T.n)} % (${x.T.k} / ${x.T.n})`]));
}
console.log('\nFisher two-sided p against stage1, pooled:');
for (const m of others) console.log(`- ${m}: ${pv(fisher(f[m].T.k, f[m].T.n, s.T.k, s.T.n))}`);
