// What the benchmark scripts share: the repository root and their command-line flags.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** The script's own arguments (passed on to the child processes it forks). */
export const args = process.argv.slice(2);
/** Whether `--name` was given. */
export const flag = (name) => args.includes(name);
/** The word after `--name`, else `def`. */
export const value = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : def;
};
/** `--name N` as an integer >= 1, else `def`; anything else is an error naming the flag. */
export const int = (name, def) => {
  const v = Number(value(name, String(def)));
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name}: expected a positive integer, got ${JSON.stringify(value(name, ''))}`);
  return v;
};
export const median = (xs) => { const s = xs.slice().sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
/** Median and range of per-round figures, 3 decimals. */
export const spread = (xs) => ({ median: +median(xs).toFixed(3), min: +Math.min(...xs).toFixed(3), max: +Math.max(...xs).toFixed(3) });
