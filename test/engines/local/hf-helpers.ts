/** Shared by the Hugging Face runtime tests: the python3 with transformers, the test zoo (test/python/zoo.py) and the ONNX export. */
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';

export const ROOT = resolve(__dirname, '..', '..', '..');
/** The Python with transformers (requirements.txt); Debian's /usr/bin/python3 has torch only. */
export const PY = process.env['MEMPO_HF_PYTHON'] ?? 'python3';

let missing: string | null | undefined;
/** Why PY cannot build and export the zoo (null: it can); probed once. */
export function transformersMissing(): string | null {
  if (missing === undefined) {
    const r = spawnSync(PY, ['-c', 'import torch, transformers, safetensors, onnx'], { encoding: 'utf8', timeout: 120_000 });
    missing = r.status === 0 ? null : `${PY} cannot import torch, transformers, safetensors and onnx (pip install -r requirements.txt): ${(r.stderr ?? r.error?.message ?? '').trim().split('\n').pop()}`;
  }
  return missing;
}

/** describe() for suites that need transformers: skipped with a printed reason, but a failure under CI (.ci/run installs requirements.txt). */
export function describeWithTransformers(name: string, fn: () => void): void {
  const why = transformersMissing();
  if (why === null) return describe(name, fn);
  if (process.env['CI']) {
    describe(name, () => it('needs python3 with transformers (requirements.txt)', () => { throw new Error(`under CI: ${why}`); }));
    return;
  }
  console.warn(`${name}: skipped, ${why}`);
  describe.skip(name, fn);
}

function run(args: string[], what: string, env: NodeJS.ProcessEnv = process.env): string {
  const r = spawnSync(PY, args, { cwd: ROOT, encoding: 'utf8', env, timeout: 600_000 });
  if (r.status !== 0) throw new Error(`${what} failed (exit ${r.status}):\n${(r.stderr ?? '').slice(-4000)}`);
  return r.stdout;
}

/** Builds the zoo's `arch` (qwen3 | llama3 | qwen2.5) in `dir`; returns dir. */
export function zoo(arch: string, dir: string): string {
  run([resolve(ROOT, 'test', 'python', 'zoo.py'), arch, dir], `zoo.py ${arch}`);
  return dir;
}

/** `python3 -m mempo_learner.export_onnx dir` (the command mempo's error message names); returns what it printed. */
export function exportHf(dir: string, ...flags: string[]): string {
  return run(['-m', 'mempo_learner.export_onnx', dir, ...flags], `export_onnx ${dir}`, { ...process.env, PYTHONPATH: resolve(ROOT, 'learner') });
}
