/**
 * Loads the native addon and decides which backend the kernels run on.
 *
 * Order: MEMPO_NATIVE_BINDING (an explicit path, for bundlers and relocated installs), then
 * node-gyp-build (prebuilds/ first, then build/Release, build/Debug). Every failure is kept so
 * that asking for the native backend when it is missing says exactly why, with commands to fix
 * it. If loading fails and nobody insisted on `native` (MEMPO_BACKEND=native, or an explicit
 * MEMPO_NATIVE_BINDING that does not load: an error, never a fallback), the pure-JS twin runs.
 *
 * CUDA: an addon built with scripts/build-cuda.sh (CMakeLists.txt, MEMPO_CUDA=ON; load it with
 * MEMPO_NATIVE_BINDING=build-cuda/Release/mempo.node) runs its kernels on the GPU when a device
 * is usable and env MEMPO_DEVICE is not 'cpu'; backend() then says 'native-cuda'. 'native' is
 * always the C++ CPU kernels, 'js' the pure-JS twin. MEMPO_DEVICE=cuda demands the GPU (an
 * error, with the CUDA error text, when there is none).
 */
import { existsSync, readFileSync } from 'fs';
import * as path from 'path';
import { typeError } from '../validate';
import type { NativeAddon, NativeDeviceBuffer, NativeInfo } from './addon';

export type Backend = 'native' | 'native-cuda' | 'js';
export type { NativeDeviceBuffer, NativeInfo } from './addon';

const packageRoot = path.resolve(__dirname, '..', '..');

interface LoadResult {
  addon: NativeAddon | null;
  errors: string[];
  /** MEMPO_NATIVE_BINDING was set and did not load. */
  explicit?: boolean;
}

let loaded: LoadResult | null = null;

function tryLoad(): LoadResult {
  const errors: string[] = [];
  const explicit = process.env.MEMPO_NATIVE_BINDING;
  if (explicit) {
    // An explicit path is a demand: when it does not load, nothing else is tried (no silent prebuild).
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- a native addon loads only through require
      return { addon: require(path.resolve(explicit)) as NativeAddon, errors };
    } catch (err) {
      errors.push(`MEMPO_NATIVE_BINDING=${explicit}: ${(err as Error).message}`);
      return { addon: null, errors, explicit: true };
    }
  }
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded lazily: a JS-only run never needs it
    const load = require('node-gyp-build') as (dir: string) => unknown;
    return { addon: load(packageRoot) as NativeAddon, errors };
  } catch (err) {
    errors.push(`node-gyp-build(${packageRoot}): ${(err as Error).message.split('\n')[0]}`);
  }
  // What `npm install` chose when neither a prebuild nor a source build worked (scripts/install.js).
  const status = path.join(packageRoot, 'build', 'install-status.txt');
  if (existsSync(status)) errors.push(`npm install: ${readFileSync(status, 'utf8').trim()}`);
  else if (!existsSync(path.join(packageRoot, 'build'))) {
    // No prebuild here and scripts/install.js never ran: npm >= 11 skips a dependency's install script until it is approved.
    errors.push(
      `no addon loads on ${process.platform}-${process.arch} and mempo's install script did not run (npm >= 11 runs a dependency's ` +
        'install script only once approved); the kernels run on the pure-JS twin. For the native ones: npm install-scripts approve mempo && npm rebuild mempo',
    );
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

/** Why the loaded addon cannot run on CUDA, or null when it can. */
function cudaUnavailable(addon: NativeAddon): string | null {
  if (typeof addon.setDevice !== 'function') {
    return 'the loaded mempo.node predates CUDA support; rebuild it (scripts/build-cuda.sh)';
  }
  const info = addon.info();
  if (!info.cudaBuilt) {
    return (
      'the loaded mempo.node was built without CUDA. Build the CUDA addon with scripts/build-cuda.sh ' +
      '(needs nvcc) and load it with MEMPO_NATIVE_BINDING=build-cuda/Release/mempo.node'
    );
  }
  if (!info.cuda) return `no usable CUDA device: ${info.cudaError ?? 'unknown reason'}`;
  return null;
}

function cudaFailure(reason: string): Error {
  return new Error(`Cannot use the 'native-cuda' backend: ${reason}`);
}

function requestedDevice(): 'cpu' | 'cuda' | undefined {
  const device = process.env.MEMPO_DEVICE;
  if (device === undefined || device === '') return undefined;
  if (device !== 'cpu' && device !== 'cuda') {
    throw new RangeError(`Expected 'cpu' or 'cuda' for MEMPO_DEVICE but received ${JSON.stringify(device)}`);
  }
  return device;
}

let current: Backend | null = null;

function initialBackend(): Backend {
  const requested = process.env.MEMPO_BACKEND;
  if (requested !== undefined && requested !== '' && requested !== 'native' && requested !== 'js') {
    throw new RangeError(`Expected 'native' or 'js' for MEMPO_BACKEND but received ${JSON.stringify(requested)}`);
  }
  const device = requestedDevice();
  if (requested === 'js') return 'js';
  const { addon, explicit } = ensureLoaded();
  if (explicit === true) throw loadFailure();
  if (addon) {
    if (device === 'cpu') return 'native';
    const why = cudaUnavailable(addon);
    if (why === null) return 'native-cuda';
    if (device === 'cuda') throw cudaFailure(why);
    return 'native';
  }
  if (requested === 'native' || device === 'cuda') throw loadFailure();
  return 'js';
}

/**
 * The backend the kernels run on now: 'native' (C++ addon, CPU kernels), 'native-cuda' (the
 * CUDA build of the addon, kernels on the GPU) or 'js' (the pure-JS twin).
 */
export function backend(): Backend {
  if (current === null) current = initialBackend();
  return current;
}

/**
 * Choose the backend; 'native' throws, with the load errors, when the addon cannot load;
 * 'native-cuda' throws, saying why, unless a CUDA build of the addon is loaded and a device is
 * usable (an explicit choice; MEMPO_DEVICE only decides the initial backend).
 */
export function setBackend(name: Backend): void {
  if (name !== 'native' && name !== 'js' && name !== 'native-cuda') {
    throw new RangeError(`Expected 'native' or 'js' for backend but received ${JSON.stringify(name)}`);
  }
  if (name === 'native' && !ensureLoaded().addon) throw loadFailure();
  if (name === 'native-cuda') {
    const addon = ensureLoaded().addon;
    if (!addon) throw cudaFailure(loadFailure().message);
    const why = cudaUnavailable(addon);
    if (why !== null) throw cudaFailure(why);
  }
  current = name;
}

/** Why the addon did not load (empty when it did). */
export function nativeLoadErrors(): string[] {
  return ensureLoaded().addon ? [] : [...ensureLoaded().errors];
}

/**
 * The addon when a native backend ('native' or 'native-cuda') is selected, else null (callers
 * then run the JS twin). Points the addon at the matching device first (a flag store; the addon
 * holds one setting per process, so it is re-asserted on every call).
 */
export function nativeAddon(): NativeAddon | null {
  const b = backend();
  if (b === 'js') return null;
  const addon = ensureLoaded().addon;
  if (addon && typeof addon.setDevice === 'function') addon.setDevice(b === 'native-cuda' ? 'cuda' : 'cpu');
  return addon;
}

/** The addon's report ({ simd, threads, cuda, cudaBuilt, device, deviceName?, cudaError? }), or null when it did not load. */
export function nativeInfo(): NativeInfo | null {
  const addon = ensureLoaded().addon;
  return addon ? addon.info() : null;
}

/** Throws, saying why, unless the 'native-cuda' backend is selected (a CUDA build and a usable device). */
function requireCudaBackend(): NativeAddon {
  if (backend() === 'native-cuda') return nativeAddon()!;
  const addon = ensureLoaded().addon;
  const why = !addon
    ? loadFailure().message
    : (cudaUnavailable(addon) ?? `the current backend is '${backend()}'; call setBackend('native-cuda') first`);
  throw cudaFailure(why);
}

/**
 * Upload logits once and keep them in GPU memory: the returned DeviceBuffer can be passed to
 * gatherLogProbsOnDevice (or the addon's gatherLogProbs) in place of the Float32Array (see
 * native/cuda/README.md). Needs the 'native-cuda' backend, else throws "Cannot use the
 * 'native-cuda' backend: <why>"; call free() when done (garbage collection frees it too, but late).
 */
export function uploadToDevice(data: Float32Array): NativeDeviceBuffer {
  if (Object.prototype.toString.call(data) !== '[object Float32Array]') throw typeError('Float32Array', 'data', data);
  return new (requireCudaBackend().DeviceBuffer!)(data);
}

/**
 * log_softmax(logits[r])[targets[r]] with logits already on the GPU (uploadToDevice); same result
 * as gatherLogProbs on the same values. Needs the 'native-cuda' backend (throws, saying why,
 * like uploadToDevice); shapes and token ids are checked by the addon, with gatherLogProbs' wording.
 */
export function gatherLogProbsOnDevice(
  logits: NativeDeviceBuffer,
  targets: Int32Array,
  rows: number,
  vocab: number,
): Float32Array {
  return requireCudaBackend().gatherLogProbs(logits, targets, rows, vocab);
}
