/**
 * scripts/install.js, the package's `npm install` step, on a machine with neither a prebuild for
 * its platform nor a toolchain: the install succeeds, says why on stderr and in
 * build/install-status.txt, and the kernels load the pure-JS twin, whose load errors quote it.
 * Run in a scratch package root (the script, binding.gyp, the built dist/, this repository's
 * node_modules) with python3, make and the compilers shadowed by failing shims on PATH.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(__dirname, '..');

test('without a prebuild or a toolchain, install exits 0 and the JS twin runs, saying why', () => {
  if (!existsSync(join(ROOT, 'dist', 'index.js'))) throw new Error('dist/ is missing: run npm run build:ts first');
  const pkg = mkdtempSync(join(tmpdir(), 'mempo-install-'));
  mkdirSync(join(pkg, 'scripts'));
  copyFileSync(join(ROOT, 'scripts', 'install.js'), join(pkg, 'scripts', 'install.js'));
  copyFileSync(join(ROOT, 'binding.gyp'), join(pkg, 'binding.gyp'));
  cpSync(join(ROOT, 'dist'), join(pkg, 'dist'), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(pkg, 'node_modules'));
  writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name: 'mempo', version: '0.0.0', main: './dist/index.js' }));
  const shims = join(pkg, 'no-toolchain');
  mkdirSync(shims);
  for (const tool of ['python3', 'python', 'make', 'g++', 'gcc', 'cc', 'c++', 'clang', 'clang++']) {
    writeFileSync(join(shims, tool), `#!/bin/sh\necho "${tool}: not installed" >&2\nexit 127\n`, { mode: 0o755 });
  }
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${shims}:${process.env.PATH}` };
  for (const k of ['MEMPO_NATIVE_BINDING', 'MEMPO_BACKEND', 'npm_config_node_gyp', 'npm_config_build_from_source']) delete env[k];

  const install = spawnSync(process.execPath, [join(pkg, 'scripts', 'install.js')], { cwd: pkg, env, encoding: 'utf8', timeout: 120_000 });
  expect(install.status).toBe(0);
  const why = /^mempo: no prebuilt addon for \S+ and the source build failed \(Could not find any Python installation to use\); the kernels run on the pure-JS twin\. .*npm rebuild mempo\n$/;
  expect(install.stderr).toMatch(why);
  expect(readFileSync(join(pkg, 'build', 'install-status.txt'), 'utf8')).toBe(install.stderr.replace(/^mempo: /, ''));

  const check = `const m = require(${JSON.stringify(pkg)});
    const a = m.gatherLogProbs(new Float32Array([0, Math.log(3)]), new Int32Array([1]), 1, 2);
    console.log(JSON.stringify({ backend: m.backend(), errors: m.nativeLoadErrors(), p: Math.exp(a[0]) }));`;
  const run = spawnSync(process.execPath, ['-e', check], { cwd: pkg, env, encoding: 'utf8' });
  expect(run.stderr).toBe('');
  const got = JSON.parse(run.stdout) as { backend: string; errors: string[]; p: number };
  expect(got.backend).toBe('js');
  expect(got.p).toBeCloseTo(0.75, 6);
  expect(got.errors.at(-1)).toBe(`npm install: ${install.stderr.replace(/^mempo: /, '').trim()}`);
});

test('when npm skipped the install script (npm >= 11 without approval), the load errors say so and how to approve it', () => {
  if (!existsSync(join(ROOT, 'dist', 'index.js'))) throw new Error('dist/ is missing: run npm run build:ts first');
  const pkg = mkdtempSync(join(tmpdir(), 'mempo-noscript-'));
  cpSync(join(ROOT, 'dist'), join(pkg, 'dist'), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(pkg, 'node_modules'));
  writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name: 'mempo', version: '0.0.0', main: './dist/index.js' }));
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of ['MEMPO_NATIVE_BINDING', 'MEMPO_BACKEND']) delete env[k];
  const check = `const m = require(${JSON.stringify(pkg)}); console.log(JSON.stringify({ backend: m.backend(), errors: m.nativeLoadErrors() }));`;
  const run = spawnSync(process.execPath, ['-e', check], { cwd: pkg, env, encoding: 'utf8' });
  expect(run.stderr).toBe('');
  const got = JSON.parse(run.stdout) as { backend: string; errors: string[] };
  expect(got.backend).toBe('js');
  expect(got.errors.at(-1)).toMatch(/^no addon loads on \S+ and mempo's install script did not run .*npm install-scripts approve mempo && npm rebuild mempo$/);
});
