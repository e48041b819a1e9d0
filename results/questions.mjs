#!/usr/bin/env node
// The training questions of the MemPO-vs-GRPO arms (docs/experiments.md "Does the memory reward help?"):
// from the embedded train split, every 2- and 4-objective bundle and as many 1–3-hop chain
// questions (the first 400 / 500 / 400 of each hop count in file order), in file order;
// `mempo train --shuffle` orders them. Deterministic: the same file every run.
//   node results/questions.mjs > results/train-questions.jsonl
import * as fs from 'fs';

const want = { '1:1': 400, '2:1': 500, '3:1': 400, '1:2': Infinity, '1:4': Infinity };
const taken = {};
const lines = fs.readFileSync(new URL('../data/world/train.jsonl', import.meta.url), 'utf8').split('\n');
for (const line of lines) {
  if (!line.trim()) continue;
  const q = JSON.parse(line);
  const key = `${q.hops}:${q.objectives}`;
  if (!(key in want) || (taken[key] ?? 0) >= want[key]) continue;
  taken[key] = (taken[key] ?? 0) + 1;
  process.stdout.write(line + '\n');
}
process.stderr.write(JSON.stringify(taken) + '\n');
