#!/usr/bin/env node
// The questions of stage 2's rollout samples (training/README "Stage 2: probes without moving
// the agent"): train-split bundles of 6, 8 and 10 objectives, where the first stage 2 moved the
// greedy agent. Round-robin over the three sizes in file order, so that any prefix is balanced;
// PER (default 80) of each. Deterministic: the same file every run.
//   node training/rollout-questions.mjs [PER] > out/stage2-questions.jsonl
//   node training/rollout-questions.mjs chains N > out/chain-questions.jsonl
import * as fs from 'fs';

// `chains N`: the first N train questions of 3 hops and one objective instead (the pages-repair's `full`
// rollouts, training/train.sh), in file order.
const chains = process.argv[2] === 'chains';
const arg = chains ? process.argv[3] : process.argv[2];
const per = Number(arg ?? 80);
if (!Number.isInteger(per) || per < 1) {
  process.stderr.write(`rollout-questions: ${chains ? 'N' : 'PER'} must be a positive integer, got ${arg}\n`);
  process.exit(2);
}
const lines = fs.readFileSync(new URL('../data/world/train.jsonl', import.meta.url), 'utf8').split('\n');
if (chains) {
  const out = [];
  for (const line of lines) {
    if (!line.trim() || out.length >= per) continue;
    const q = JSON.parse(line);
    if (q.hops === 3 && (q.objectives ?? 1) === 1) out.push(line);
  }
  process.stdout.write(out.map((l) => l + '\n').join(''));
  process.stderr.write(JSON.stringify({ chains: out.length }) + '\n');  // no process.exit: it would cut a piped stdout
} else {
  const bySize = { 6: [], 8: [], 10: [] };
  for (const line of lines) {
    if (!line.trim()) continue;
    const q = JSON.parse(line);
    if (q.objectives in bySize && bySize[q.objectives].length < per) bySize[q.objectives].push(line);
  }
  for (let i = 0; i < per; i++) {
    for (const size of [6, 8, 10]) if (i < bySize[size].length) process.stdout.write(bySize[size][i] + '\n');
  }
  process.stderr.write(JSON.stringify(Object.fromEntries(Object.entries(bySize).map(([k, v]) => [k, v.length]))) + '\n');
}
