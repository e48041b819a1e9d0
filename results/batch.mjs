// Reads a `mempo rollout` / `mempo eval` batch (one trajectory per JSON line), or any other JSON
// Lines file (a run's metrics.jsonl), for the scripts in results/; a file that cannot be read or a
// line that is not JSON ends the script with exit 2 and names the file and line. Also the one
// Markdown table row the scripts print, and their seeded random numbers (the bootstraps).
import { readFileSync } from 'node:fs';

export function fail(msg) {
  console.error(msg);
  process.exit(2);
}

export function readJsonLines(file, what) {
  let text;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    fail(`${file}: cannot read it (${e.code ?? e.message})`);
  }
  const records = [];
  text.split('\n').forEach((line, i) => {
    if (!line.trim()) return;
    try {
      records.push(JSON.parse(line));
    } catch (e) {
      fail(`${file}:${i + 1}: not JSON (${e.message})`);
    }
  });
  if (records.length === 0) fail(`${file}: no ${what}`);
  return records;
}

export const readBatch = (file) => readJsonLines(file, 'trajectories');

/** One Markdown table row. */
export const row = (cells) => `| ${cells.join(' | ')} |`;

// A small seeded generator (mulberry32): the intervals are the same on every run.
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
