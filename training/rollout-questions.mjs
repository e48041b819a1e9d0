#!/usr/bin/env node
// The questions of stage 2's rollout samples (training/README "Stage 2: probes without moving
// the agent"): train-split bundles of 6, 8 and 10 objectives, where the first stage 2 moved the
// greedy agent. Round-robin over the three sizes in file order, so that any prefix is balanced;
// PER (default 80) of each. Deterministic: the same file every run.
//   node training/rollout-questions.mjs [PER] > out/stage2-questions.jsonl
import * as fs from 'fs';

const per = Number(process.argv[2] ?? 80);
if (!Number.isInteger(per) || per < 1) {
  process.stderr.write(`rollout-questions: PER must be a positive integer, got ${process.argv[2]}\n`);
  process.exit(2);
}
const bySize = { 6: [], 8: [], 10: [] };
const lines = fs.readFileSync(new URL('../data/world/train.jsonl', import.meta.url), 'utf8').split('\n');
for (const line of lines) {
  if (!line.trim()) continue;
  const q = JSON.parse(line);
  if (q.objectives in bySize && bySize[q.objectives].length < per) bySize[q.objectives].push(line);
}
for (let i = 0; i < per; i++) {
  for (const size of [6, 8, 10]) if (i < bySize[size].length) process.stdout.write(bySize[size][i] + '\n');
}
process.stderr.write(JSON.stringify(Object.fromEntries(Object.entries(bySize).map(([k, v]) => [k, v.length]))) + '\n');
