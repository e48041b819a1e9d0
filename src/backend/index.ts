/**
 * Loads the native addon and decides which backend the kernels run on.
 *
 * Order: MEMPO_NATIVE_BINDING (an explicit path, for bundlers and relocated installs), then
 * node-gyp-build (prebuilds/ first, then build/Release, build/Debug). Every failure is kept so
 * that asking for the native backend when it is missing says exactly why, with commands to fix
 * it. If loading fails and nobody insisted on `native`, the pure-JS twin runs.
 */
import * as path from 'path';
import type { NativeAddon } from './addon';

export type Backend = 'native' | 'js';

const packageRoot = path.resolve(__dirname, '..', '..');

interface LoadResult {
  addon: NativeAddon | null;
  errors: string[];
}

let loaded: LoadResult | null = null;

function tryLoad(): LoadResult {
  const errors: string[] = [];
  const explicit = process.env.MEMPO_NATIVE_BINDING;
  if (explicit) {
    try {
      return { addon: require(path.resolve(explicit)) as NativeAddon, errors };
    } catch (err) {
      errors.push(`MEMPO_NATIVE_BINDING=${explicit}: ${(err as Error).message}`);
    }
  }
  try {
    // eslint-disable-next-line @typescript-eslint/no-var-requires
    const load = require('node-gyp-build') as (dir: string) => unknown;
    return { addon: load(packageRoot) as NativeAddon, errors };
  } catch (err) {
    errors.push(`node-gyp-build(${packageRoot}): ${(err as Error).message.split('\n')[0]}`);
  }
  return { addon: null, errors };
}

function ensureLoaded(): LoadResult {
  if (!loaded) loaded = tryLoad();
  return loaded;
}

function loadFailure(): Error {
  const { errors } = ensureLoaded();
  return new Error(
    [
      `Could not load the mempo native addon for ${process.platform}-${process.arch} (Node ${process.versions.node}, N-API ${process.versions.napi}).`,
      ...errors.map((e) => `- ${e}`),
      'Possible solutions:',
      '- Build it from source: npm rebuild mempo (needs python3, make and a C++17 compiler), or in this repository: npm run build:native',
      '- Point MEMPO_NATIVE_BINDING at a mempo.node you built elsewhere',
      '- Use the pure-JS backend instead: MEMPO_BACKEND=js, or setBackend(\'js\')',
    ].join('\n'),
  );
}

let current: Backend | null = null;

function initialBackend(): Backend {
  const requested = process.env.MEMPO_BACKEND;
  if (requested !== undefined && requested !== '' && requested !== 'native' && requested !== 'js') {
    throw new RangeError(`Expected 'native' or 'js' for MEMPO_BACKEND but received ${JSON.stringify(requested)}`);
  }
  if (requested === 'js') return 'js';
  if (ensureLoaded().addon) return 'native';
  if (requested === 'native') throw loadFailure();
  return 'js';
}

/** The backend the kernels run on now: 'native' (C++ addon) or 'js' (the pure-JS twin). */
export function backend(): Backend {
  if (current === null) current = initialBackend();
  return current;
}

/** Choose the backend; 'native' throws, with the load errors, when the addon cannot load. */
export function setBackend(name: Backend): void {
  if (name !== 'native' && name !== 'js') {
    throw new RangeError(`Expected 'native' or 'js' for backend but received ${JSON.stringify(name)}`);
  }
  if (name === 'native' && !ensureLoaded().addon) throw loadFailure();
  current = name;
}

/** Why the addon did not load (empty when it did). */
export function nativeLoadErrors(): string[] {
  return ensureLoaded().addon ? [] : [...ensureLoaded().errors];
}

/** The addon when the native backend is selected, else null (callers then run the JS twin). */
export function nativeAddon(): NativeAddon | null {
  return backend() === 'native' ? ensureLoaded().addon : null;
}
