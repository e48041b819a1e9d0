// Two greedy evaluations of the same questions paired question by question (training/README.md, the shipped
// model against the model before RL): each one's exact match, how many questions B gained and lost against A,
// and B − A with a 95 % bootstrap interval (10,000 resamples of the questions, one draw for both, fixed seed).
//   node results/paired-em.mjs A_OUT B_OUT      (each a `mempo eval --out` directory, one trajectory per question,
//                                                or several joined by commas, pooled: dev and test together)
// → one Markdown table row: questions | A EM | B EM | B − A | gained | lost | 95 % CI. Needs the build (dist/).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { fail, readBatch, row } from './batch.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
if (args.length !== 2) fail('usage: node results/paired-em.mjs A_OUT B_OUT (two `mempo eval --out` directories)');
const { extractSolution, emCheck } = await import(path.join(root, 'dist/index.js'));
const { scoringText } = await import(path.join(root, 'dist/pipeline/outcome-reward.js'));
const { mulberry32: rng } = await import(path.join(root, 'dist/rng.js'));

const perQuestion = (dirs) => {
  const out = new Map();
  for (const dir of dirs.split(',')) {
    for (const r of readBatch(path.join(dir, 'batch.jsonl'))) {
      if (r.excluded) continue;
      if (out.has(r.uid)) fail(`${dirs}: question ${r.uid} has more than one trajectory (a greedy evaluation has one)`);
      out.set(r.uid, emCheck(extractSolution(scoringText(r.text)), r.golds) ? 1 : 0);
    }
  }
  return out;
};
const [a, b] = args.map(perQuestion);
const ids = [...a.keys()].sort();
const missing = ids.filter((id) => !b.has(id)).concat([...b.keys()].filter((id) => !a.has(id)));
if (missing.length > 0) fail(`${args[0]} and ${args[1]} answered different questions (${missing.slice(0, 3).join(', ')}${missing.length > 3 ? ', …' : ''} in one only)`);

const pa = ids.map((id) => a.get(id));
const pb = ids.map((id) => b.get(id));
const sum = (xs) => xs.reduce((s, x) => s + x, 0);
const n = ids.length;
const draw = rng(46);
const diffs = [];
for (let k = 0; k < 10000; k++) {
  let d = 0;
  for (let i = 0; i < n; i++) { const j = Math.floor(draw() * n); d += pb[j] - pa[j]; }
  diffs.push(d / n);
}
diffs.sort((x, y) => x - y);
const pct = (x) => `${(100 * x).toFixed(2)} %`;
const pt = (x) => `${x >= 0 ? '+' : ''}${(100 * x).toFixed(2)}`;
console.log(row([String(n), pct(sum(pa) / n), pct(sum(pb) / n), `${pt((sum(pb) - sum(pa)) / n)} pt`,
  String(ids.filter((_, i) => pb[i] > pa[i]).length), String(ids.filter((_, i) => pb[i] < pa[i]).length),
  `[${pt(diffs[250])}, ${pt(diffs[9750])}]`]));
