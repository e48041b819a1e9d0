/**
 * Lazy access to onnxruntime-node, so that importing the package does not load the ORT binary
 * until a model is opened. onnxruntime-node is an optional dependency (288 MB with its binaries):
 * a kernels-only install (`npm install mempo --omit=optional`) leaves it out, and then the local
 * engine says how to add it. The types come from onnxruntime-common (its small, pure-JS API
 * package, a regular dependency), so the published declarations resolve in either install.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type * as OrtModule from 'onnxruntime-common';
import { MempoError } from '../../errors';
import { packageRoot } from '../../paths';

export type Ort = typeof OrtModule;
export type OrtTensor = OrtModule.Tensor;
export type OrtSession = OrtModule.InferenceSession;
export type SessionOptions = OrtModule.InferenceSession.SessionOptions;
export type ExecutionProvider = OrtModule.InferenceSession.ExecutionProviderConfig;

let ort: Ort | undefined;

/** `npm install onnxruntime-node@<the range mempo's package.json asks for>`. */
function installCommand(): string {
  let range: unknown;
  try {
    const pkg = JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { optionalDependencies?: Record<string, unknown> };
    range = pkg.optionalDependencies?.['onnxruntime-node'];
  } catch {
    // the command without a version still installs a working one
  }
  return `npm install onnxruntime-node${typeof range === 'string' ? `@${range}` : ''}`;
}

/** onnxruntime-node, loaded on first use; missing or broken, a MempoError (ERR_MISSING_DEPENDENCY) saying what to run. */
export function getOrt(): Ort {
  if (ort === undefined) {
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      ort = require('onnxruntime-node') as Ort;
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      const missing = e.code === 'MODULE_NOT_FOUND' && /['"]onnxruntime-node['"]/.test(e.message.split('\n')[0]!);
      throw new MempoError(
        'ERR_MISSING_DEPENDENCY',
        missing
          ? `The local engine (LocalModel, CausalLM; mempo serve, and mempo rollout, eval and train without --server) needs onnxruntime-node, an optional dependency of mempo that is not installed (npm install --omit=optional leaves it out). Run: ${installCommand()}`
          : `onnxruntime-node is installed but does not load (${e.message.split('\n')[0]}); the local engine needs it. Reinstall it: ${installCommand()}`,
      );
    }
  }
  return ort;
}
