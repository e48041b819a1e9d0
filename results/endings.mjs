// How the trajectories of an evaluation end, by question kind: why each stopped (its doneReason:
// an answer, the round limit, a round past --max-round-tokens, a round without an action), and how
// many chains were answered before their last hop was searched (fewer searches than hops: such an
// answer can only be a guess or an intermediate entity), where the gold was when a chain was
// answered wrongly (in its last mem; only in its last search result; in neither), and the mean
// length of their mems.
//   node results/endings.mjs DIR/batch.jsonl > results/eval/<model>-<policy>-endings.json
//   node results/endings.mjs --table base grpo mempo ...   (Markdown, from results/eval/*-endings.json)
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { fail, readBatch, row } from './batch.mjs';

const args = process.argv.slice(2);
if (args.length === 0) fail('usage: node results/endings.mjs DIR/batch.jsonl | --table MODEL ...');

const kinds = ['1-hop', '2-hop', '3-hop', 'bundles'];
const kindOf = (r) => (r.objectives > 1 ? 'bundles' : `${r.hops}-hop`);
const last = (text, tag) => {
  const all = [...text.matchAll(new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`, 'g'))];
  return all.length ? all[all.length - 1][1].toLowerCase() : '';
};
// Where the gold was when a chain was answered wrongly (case-insensitive containment).
function goldAt(r) {
  const golds = r.golds.map((g) => g.toLowerCase());
  const holds = (s) => golds.some((g) => s.includes(g));
  if (holds(last(r.text, 'mem'))) return 'inLastMem';
  return holds(last(r.text, 'information')) ? 'onlyInLastSearch' : 'inNeither';
}

function endings(file) {
  const out = {};
  for (const r of readBatch(file)) {
    const k = kindOf(r);
    const o = (out[k] ??= { trajectories: 0, correct: 0, doneReasons: {}, answeredEarly: 0, answeredEarlyCorrect: 0, memRounds: 0, meanMemTokens: 0 });
    if (k !== 'bundles') o.wrongAnswerGold ??= { inLastMem: 0, onlyInLastSearch: 0, inNeither: 0 };
    o.trajectories++;
    if (r.score === 1) o.correct++;
    const reason = r.doneReason ?? 'none';
    o.doneReasons[reason] = (o.doneReasons[reason] ?? 0) + 1;
    for (const d of r.rounds) {
      if (!d.memSpan) continue;
      o.memRounds++; // running mean of the mems' lengths in tokens (tags included)
      o.meanMemTokens += (d.memSpan[1] - d.memSpan[0] - o.meanMemTokens) / o.memRounds;
    }
    const searches = r.rounds.filter((d) => d.action === 'search').length;
    if (k !== 'bundles' && reason === 'answer' && searches < r.hops) {
      o.answeredEarly++;
      if (r.score === 1) o.answeredEarlyCorrect++;
    }
    if (k !== 'bundles' && reason === 'answer' && r.score !== 1) o.wrongAnswerGold[goldAt(r)]++;
  }
  return Object.fromEntries(kinds.filter((k) => out[k]).map((k) => [k, out[k]]));
}

if (args[0] !== '--table') {
  console.log(JSON.stringify(endings(args[0]), null, 2));
} else {
  const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'eval');
  const chainMem = (e) => { // the chains' mean mem length, weighted by their rounds
    const c = kinds.slice(0, 3).map((k) => e[k]).filter(Boolean);
    return c.reduce((a, o) => a + o.meanMemTokens * o.memRounds, 0) / Math.max(1, c.reduce((a, o) => a + o.memRounds, 0));
  };
    console.log(row(['model', 'policy', ...kinds.slice(0, 3).map((k) => `${k}: answered before the last hop`),
    'bundles: ended by an answer', 'the round limit', 'a round too long', 'a round without action',
    'mem tokens, chains / bundles', '3-hop answered wrongly: gold in the last mem / only in the last search / in neither']));
  console.log(row(['---', '---', ...Array(9).fill('---:')]));
  for (const m of args.slice(1)) {
    for (const policy of ['memory', 'full']) {
      const file = path.join(dir, `${m}-${policy}-endings.json`);
      if (!existsSync(file)) continue;
      const e = JSON.parse(readFileSync(file, 'utf8'));
      const b = e.bundles?.doneReasons ?? {};
      const of = (n) => `${n ?? 0} / ${e.bundles?.trajectories ?? 0}`;
      const wrong = e['3-hop']?.wrongAnswerGold; // absent from files written before it was counted
      console.log(row([m, policy, ...kinds.slice(0, 3).map((k) => (e[k] ? `${e[k].answeredEarly} / ${e[k].trajectories}` : '—')),
        of(b.answer), of(b['max-turns']), of(b['round-length']), of(b['no-action']),
        `${chainMem(e).toFixed(1)} / ${(e.bundles?.meanMemTokens ?? 0).toFixed(1)}`,
        wrong ? `${wrong.inLastMem} / ${wrong.onlyInLastSearch} / ${wrong.inNeither}` : '—']));
    }
  }
}
