// Reads a `mempo rollout` / `mempo eval` batch (one trajectory per JSON line), or any other JSON
// Lines file (a run's metrics.jsonl), for the scripts in results/; a file that cannot be read or a
// line that is not JSON ends the script with exit 2 and names the file and line. Also the one
// Markdown table row the scripts print.
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
