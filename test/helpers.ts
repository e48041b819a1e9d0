/** Shared test utilities: a seeded RNG, closeness checks, running a call on both kernel backends. */
import { execFileSync, spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { backend, setBackend, type Backend } from '../src/kernels/backend';
import { mulberry32 } from '../src/rng';

/** Test inputs: mulberry32 (src/rng.ts), seed 0 read as 1. */
export function rng(seed: number): () => number {
  return mulberry32(seed >>> 0 || 1);
}

/** Index of the first element where |a-b| > atol + rtol*|b| (NaN must match NaN), or -1. */
export function firstMismatch(a: ArrayLike<number>, b: ArrayLike<number>, atol = 1e-5, rtol = 1e-5): number {
  if (a.length !== b.length) return 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (Number.isNaN(x) || Number.isNaN(y)) {
      if (Number.isNaN(x) !== Number.isNaN(y)) return i;
      continue;
    }
    if (x === y) continue;
    if (!(Math.abs(x - y) <= atol + rtol * Math.abs(y))) return i;
  }
  return -1;
}

export function expectClose(a: ArrayLike<number>, b: ArrayLike<number>, atol = 1e-5, rtol = 1e-5): void {
  const i = firstMismatch(a, b, atol, rtol);
  if (i !== -1) throw new Error(`mismatch at ${i}: ${a[i]} vs ${b[i]} (lengths ${a.length}, ${b.length})`);
}

export const EXPECTED_BACKEND = process.env.MEMPO_BACKEND === 'js' ? 'js' : 'native';

/** fn's result on the native backend, then on the JS twin; the backend in force before is restored. */
/**
 * Paths where two JSON values differ, numbers compared within |a − b| ≤ atol + rtol·max(|a|, |b|) and
 * everything else (keys, strings, booleans, nulls, integers' presence) exactly: for files recorded on one
 * CPU and recomputed on another, where float32 reductions run in another order (SIMD width, threads).
 */
export function jsonMismatches(actual: unknown, expected: unknown, atol: number, rtol: number, at = '$'): string[] {
  if (typeof actual === 'number' && typeof expected === 'number') {
    if (Number.isInteger(expected) && Number.isInteger(actual) && Math.abs(expected) > 1 && actual !== expected) return [`${at}: ${actual} ≠ ${expected}`];
    return Math.abs(actual - expected) <= atol + rtol * Math.max(Math.abs(actual), Math.abs(expected)) ? [] : [`${at}: ${actual} ≠ ${expected}`];
  }
  if (Array.isArray(actual) && Array.isArray(expected)) {
    if (actual.length !== expected.length) return [`${at}: length ${actual.length} ≠ ${expected.length}`];
    return actual.flatMap((v, i) => jsonMismatches(v, expected[i], atol, rtol, `${at}[${i}]`));
  }
  if (actual !== null && expected !== null && typeof actual === 'object' && typeof expected === 'object' && !Array.isArray(actual) && !Array.isArray(expected)) {
    const a = actual as Record<string, unknown>, e = expected as Record<string, unknown>;
    const keys = [...new Set([...Object.keys(a), ...Object.keys(e)])];
    return keys.flatMap((k) => (k in a && k in e ? jsonMismatches(a[k], e[k], atol, rtol, `${at}.${k}`) : [`${at}.${k}: ${k in a ? 'unexpected' : 'missing'}`]));
  }
  return Object.is(actual, expected) ? [] : [`${at}: ${JSON.stringify(actual)} ≠ ${JSON.stringify(expected)}`];
}

export function onEachBackend<T>(fn: () => T): { native: T; js: T } {
  const before: Backend = backend();
  try {
    setBackend('native');
    const native = fn();
    setBackend('js');
    return { native, js: fn() };
  } finally {
    setBackend(before);
  }
}

/** What a call did: its value, or the error's class and message (to compare throws across backends). */
export type Outcome<T = unknown> = { value: T } | { threw: string; message: string };

export function outcomeOf<T>(fn: () => T): Outcome<T> {
  try {
    return { value: fn() };
  } catch (err) {
    return { threw: (err as Error).name, message: (err as Error).message };
  }
}

/**
 * Whether a tmpfs of `size` can be mounted at `dir` in a mount namespace of its own (Linux, root,
 * `unshare -m`), so a test can fill a real disk; false also when `needs` (a built file) is missing.
 */
export function canMountTmpfs(dir: string, size: string, needs: string): boolean {
  if (process.platform !== 'linux' || !existsSync(needs)) return false;
  try {
    execFileSync('unshare', ['-m', 'sh', '-c', `mount -t tmpfs -o size=${size} tmpfs ${JSON.stringify(dir)}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

let torchPys: { python: string; torch: string }[] | undefined;
/**
 * Every Python of /usr/bin/python3 (Debian's torch 1.13) and python3 (requirements.txt's torch 2.13) that
 * imports torch, each interpreter once (python3 may be /usr/bin/python3), with its torch version; probed once.
 */
export function torchPythons(): { python: string; torch: string }[] {
  if (torchPys === undefined) {
    const seen = new Set<string>();
    torchPys = [];
    for (const python of ['/usr/bin/python3', 'python3']) {
      const r = spawnSync(python, ['-c', 'import os, sys, torch; print(os.path.realpath(sys.executable)); print(torch.__version__)'], { encoding: 'utf8', timeout: 60_000 });
      const [exe, version] = r.status === 0 ? r.stdout.trim().split('\n') : [];
      if (!exe || !version || seen.has(exe)) continue;
      seen.add(exe);
      torchPys.push({ python, torch: version });
    }
  }
  return torchPys;
}

/** The first of torchPythons() (/usr/bin/python3 where it has torch: the suites' reference), or null. */
export function torchPython(): string | null {
  return torchPythons()[0]?.python ?? null;
}

/**
 * describe() for suites that need torch: skipped with a printed reason on a machine without it,
 * but a failure under CI, which installs it (.ci/run), so that CI can never skip them silently.
 */
export function describeWithTorch(name: string, fn: () => void): void {
  if (torchPython() !== null) return describe(name, fn);
  if (process.env.CI) {
    describe(name, () => it('needs a python3 with torch (.ci/run installs python3-torch)', () => { throw new Error('no python3 with torch under CI'); }));
    return;
  }
  console.warn(`${name}: skipped, no python3 with torch (apt-get install python3-torch libopenblas0-pthread)`);
  describe.skip(name, fn);
}

/** Debian's chromium on PATH (the HTML reports' browser tests), or null. */
export function chromiumBinary(): string | null {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    for (const name of ['chromium', 'chromium-browser']) {
      try {
        accessSync(join(dir, name), constants.X_OK);
        return join(dir, name);
      } catch {
        // not in this directory
      }
    }
  }
  return null;
}
