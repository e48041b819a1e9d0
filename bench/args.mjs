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
