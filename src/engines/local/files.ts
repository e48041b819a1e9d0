import { existsSync, readFileSync, statSync } from 'node:fs';
import { MempoError } from '../../errors';

/** Throws ERR_MODEL_FILE_MISSING naming `path` when it does not exist. `what` says what it is for. */
export function requireFile(path: string, what: string): void {
  if (!existsSync(path) || !statSync(path).isFile()) {
    throw new MempoError('ERR_MODEL_FILE_MISSING', `Missing ${what}: ${path} does not exist`);
  }
}

export function requireDirectory(path: string, what: string): void {
  if (!existsSync(path) || !statSync(path).isDirectory()) {
    throw new MempoError('ERR_MODEL_FILE_MISSING', `Missing ${what}: directory ${path} does not exist`);
  }
}

/** Reads and parses a JSON file; a missing or malformed file is an error naming the path. */
export function readJson(path: string, what: string): Record<string, unknown> {
  requireFile(path, what);
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new MempoError('ERR_MODEL_CONFIG', `Could not parse ${what} ${path}: ${(err as Error).message}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new MempoError('ERR_MODEL_CONFIG', `Expected a JSON object in ${what} ${path}`);
  }
  return parsed as Record<string, unknown>;
}
