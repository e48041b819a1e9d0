// Issue 46's figures (docs/experiments.md "Where memory matters"): per-question figures of a page arm's
// held-out evaluations (results/page-arms.sh), and MemPO against GRPO with bootstrap confidence intervals
// across questions and seeds, so that no figure is copied by hand. Both modes need the build (dist/, `npm run build`).
//   node results/page-arm-stats.mjs keep NAME         → JSON on stdout, from out/pages-eval/NAME-{pages-memory,memory,dev}/batch.jsonl
//   node results/page-arm-stats.mjs compare GRPO_ARMS MEMPO_ARMS   (comma-separated results/page-arms/<arm>.json, e.g. grpo,grpo-s2 mempo,mempo-s2)
// Per question (greedy: one trajectory each): exact match; generated tokens (sampled, observations excluded)
// and peak context tokens of the trajectory; for page questions whether the page fact's chunk shrank and
// whether `<mem>` held the fact then (docs/rollout.md "Gold in mem after shrink"); on the dev probes the
// mean memory reward, P_full and P_mem over the trajectory's rounds.
// The bootstrap (10,000 draws, fixed seed) resamples questions, the same draw for both arms (the arms
// answered the same questions), and each arm's seeds; a rate is the pooled ratio of its draw's sums.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { fail, readBatch, row } from './batch.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const [mode, ...args] = process.argv.slice(2);
// The bootstraps' draws: mulberry32 (src/rng.ts), seeded, so the intervals are the same on every run.
const { mulberry32: rng } = await import(path.join(root, 'dist/rng.js'));

async function keep(name) {
  const { Tokenizer, extractSolution, emCheck } = await import(path.join(root, 'dist/index.js'));
  const { scoringText } = await import(path.join(root, 'dist/pipeline/outcome-reward.js'));
  const { goldInMemAfterShrink } = await import(path.join(root, 'dist/pipeline/page-figures.js'));
  const tok = await Tokenizer.load(path.join(root, 'models/mempo-tiny'));
  const decode = (ids) => tok.decode(ids);
  const questions = new Map();
  for (const f of ['test-pages', 'test', 'dev', 'dev-pages']) {
    for (const line of readFileSync(path.join(root, 'data/world', `${f}.jsonl`), 'utf8').split('\n')) if (line.trim()) { const q = JSON.parse(line); questions.set(q.id, q); }
  }
  const batch = (part) => readBatch(path.join(root, 'out/pages-eval', `${name}-${part}`, 'batch.jsonl')).filter((r) => !r.excluded);
  const em = (r) => emCheck(extractSolution(scoringText(r.text)), r.golds);
  const cost = (r) => ({ tokens: r.responseMask.reduce((a, m) => a + m, 0), peak: Math.max(0, ...r.rounds.map((rd) => rd.contextTokens)) });
  const perQuestion = (records, f) => {
    const out = {};
    for (const r of records) {
      if (out[r.uid] !== undefined) fail(`${name}: question ${r.uid} has more than one trajectory (a greedy evaluation has one)`);
      out[r.uid] = f(r);
    }
    return out;
  };
  const pages = perQuestion(batch('pages-memory'), (r) => {
    const g = goldInMemAfterShrink([r], questions, decode, em);
    return { em: em(r), ...cost(r), shrank: g?.shrank ?? 0, inMem: g?.inMem ?? 0 };
  });
  const old = perQuestion(batch('memory'), (r) => ({ em: em(r), ...cost(r) }));
  const mean = (xs) => (xs.length === 0 ? null : xs.reduce((a, x) => a + x, 0) / xs.length);
  const probes = perQuestion(batch('dev'), (r) => {
    const rds = r.rounds.filter((rd) => rd.memReward !== null);
    return { rounds: rds.length, memReward: mean(rds.map((rd) => rd.memReward)), pFull: mean(rds.map((rd) => rd.pFull)), pMem: mean(rds.map((rd) => rd.pMem)) };
  });
  console.log(JSON.stringify({ name, pages, old, probes }));
}

// [label, part, numerator, denominator (null: per-question mean), format]
const METRICS = [
  ['page-question EM', 'pages', (q) => q.em, null, 'pct'],
  ['fact in `<mem>` after the shrink', 'pages', (q) => q.inMem, (q) => q.shrank, 'pct'],
  ['old-kind EM', 'old', (q) => q.em, null, 'pct'],
  ['generated tokens / trajectory (page questions)', 'pages', (q) => q.tokens, null, 'num'],
  ['peak context tokens (page questions)', 'pages', (q) => q.peak, null, 'num'],
  ['generated tokens / trajectory (old kinds)', 'old', (q) => q.tokens, null, 'num'],
  ['peak context tokens (old kinds)', 'old', (q) => q.peak, null, 'num'],
  ['memory reward (dev probes)', 'probes', (q) => q.memReward, null, 'dec'],
  ['P_full (dev probes)', 'probes', (q) => q.pFull, null, 'dec'],
  ['P_mem (dev probes)', 'probes', (q) => q.pMem, null, 'dec'],
];

function compare(grpoArms, mempoArms) {
  const load = (arm) => {
    try {
      return JSON.parse(readFileSync(path.join(root, 'results/page-arms', `${arm}.json`), 'utf8'));
    } catch (e) {
      return fail(`results/page-arms/${arm}.json: cannot read it (${e.code ?? e.message}); run bash results/page-arms.sh ${arm}`);
    }
  };
  const arms = [grpoArms.map(load), mempoArms.map(load)];
  const fmt = { pct: (x) => `${(100 * x).toFixed(1)} %`, num: (x) => x.toFixed(0), dec: (x) => x.toFixed(3) };
  const dfmt = { pct: (x) => `${x >= 0 ? '+' : ''}${(100 * x).toFixed(1)} pt`, num: (x) => `${x >= 0 ? '+' : ''}${x.toFixed(0)}`, dec: (x) => `${x >= 0 ? '+' : ''}${x.toFixed(3)}` };
  console.log(row(['figure', `GRPO (${grpoArms.join(', ')})`, `MemPO (${mempoArms.join(', ')})`, 'MemPO − GRPO', '95 % CI', 'questions']));
  console.log(row(['---', '---:', '---:', '---:', '---:', '---:']));
  for (const [label, part, num, den, kind] of METRICS) {
    // The questions every run answered with a defined value.
    const runs = arms.flat();
    const ids = Object.keys(runs[0][part]).filter((id) => runs.every((r) => r[part][id] !== undefined && num(r[part][id]) !== null)).sort();
    if (ids.length === 0) { console.log(row([label, '—', '—', '—', '—', '0'])); continue; }
    const value = (group, qs, seeds) => {
      let n = 0, d = 0;
      for (const s of seeds) for (const i of qs) { const q = group[s][part][ids[i]]; n += num(q); d += den === null ? 1 : den(q); }
      return d === 0 ? NaN : n / d;
    };
    const all = ids.map((_, i) => i);
    const point = arms.map((g) => value(g, all, g.map((_, s) => s)));
    const draw = rng(46);
    const diffs = [];
    for (let b = 0; b < 10000; b++) {
      const qs = all.map(() => Math.floor(draw() * all.length));
      const v = arms.map((g) => value(g, qs, g.map(() => Math.floor(draw() * g.length))));
      if (Number.isFinite(v[1] - v[0])) diffs.push(v[1] - v[0]);
    }
    diffs.sort((a, b) => a - b);
    const q = (p) => diffs[Math.min(diffs.length - 1, Math.floor(p * diffs.length))];
    console.log(row([label, fmt[kind](point[0]), fmt[kind](point[1]), dfmt[kind](point[1] - point[0]), `[${dfmt[kind](q(0.025))}, ${dfmt[kind](q(0.975))}]`, String(ids.length)]));
  }
}

if (mode === 'keep' && args.length === 1) await keep(args[0]);
else if (mode === 'compare' && args.length === 2) compare(args[0].split(','), args[1].split(','));
else fail('usage: node results/page-arm-stats.mjs keep NAME | compare GRPO_ARMS MEMPO_ARMS (comma-separated)');
