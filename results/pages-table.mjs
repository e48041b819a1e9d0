// The page world's quality table (training/README.md "Pages") from
// results/eval/*.json, printed as Markdown so that no figure is copied by hand: the shipped model (BASE,
// results/evals.sh: no page tool) against one trained with pages (NAME, results/pages-eval.sh: the embedded
// page world; its run without the page tool when there is one) on the same 400 test questions, then NAME on
// the 200 test page questions.
//   node results/pages-table.mjs [NAME [BASE]]      (default: paged base)
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { fail, row } from './batch.mjs';

const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'eval');
const [name = 'paged', base = 'base'] = process.argv.slice(2);
const read = (file, optional = false) => {
  const p = path.join(dir, `${file}.json`);
  if (!existsSync(p)) {
    if (optional) return null;
    fail(`pages-table: no ${p}: run results/pages-eval.sh ${name} DIR (or results/evals.sh ${base}) first`);
  }
  return JSON.parse(readFileSync(p, 'utf8'));
};
const pct = (x) => (x === undefined || x === null ? '—' : `${(100 * x).toFixed(1)} %`);
const hops = (e) => ['1', '2', '3'].map((h) => pct(e.byHops[h]?.em).replace(' %', '')).join(' / ');

const rows = [
  [`${base}, no page tool`, read(`${base}-memory`), read(`${base}-full`)],
  [`${name}, page tool`, read(`${name}-memory`), read(`${name}-full`)],
  [`${name}, no page tool`, read(`${name}-nopages-memory`, true), null],
].filter(([, m]) => m !== null);
console.log(row(['model, world', 'EM `memory`', 'EM `full`', '1/2/3 hops EM, `memory` (%)', '2 objectives, `memory`', 'format-valid rounds, `memory`', 'access rounds / trajectory, `memory`']));
console.log(row(['---', ...Array(6).fill('---:')]));
for (const [label, m, f] of rows) {
  console.log(row([label, pct(m.em), f ? pct(f.em) : '—', hops(m), pct(m.byObjectives['2']?.em), pct(m.formatValidRoundRate), m.access ? m.access.roundsPerTrajectory.toFixed(2) : '—']));
}
console.log();
console.log(row(['page questions (200), policy', 'EM', 'access rounds / trajectory', 'pages opened', 'chunks shown', 'fact chunk shown', 'gold in mem after shrink', 'EM when it shrank']));
console.log(row(['---', ...Array(7).fill('---:')]));
for (const policy of ['memory', 'full']) {
  const e = read(`${name}-page-questions-${policy}`);
  const a = e.access;
  const g = a.goldInMemAfterShrink;
  console.log(row([`\`${policy}\``, pct(e.em), a.roundsPerTrajectory.toFixed(2), a.pagesOpened, a.chunksShown, `${g.factShown} of ${g.trajectories}`, `${pct(g.rate)} (${g.inMem} of ${g.shrank})`, pct(g.correctRate)]));
}
