/**
 * The published package: `npm pack` (whose prepack builds dist/ and prebuilds/), then install the
 * tarball into a fresh project where every compiler and make fail loudly, and check that the
 * prebuilt addon loads (backend 'native') and agrees with the JS path, from CommonJS and ESM.
 * Runs once, in the native project.
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { EXPECTED_BACKEND } from './helpers';

const root = path.resolve(__dirname, '..');
const run = EXPECTED_BACKEND === 'native' ? describe : describe.skip;

run('npm package (pack, install without a compiler, load the prebuild)', () => {
  let work = '';
  beforeAll(() => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'mempo-pack-'));
  });
  afterAll(() => {
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  it('installs from the tarball and loads the native prebuild with no compiler on PATH', () => {
    const packed = execFileSync('npm', ['pack', '--json', '--pack-destination', work], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    const info = JSON.parse(packed.slice(packed.indexOf('['))) as { filename: string; files: { path: string }[] }[];
    const files = info[0]!.files.map((f) => f.path);
    // Exactly the prebuilds the README claims: linux-x64 and linux-arm64 (glibc); every other platform builds or uses the JS twin.
    expect(files.filter((f) => f.startsWith('prebuilds/')).sort()).toEqual(['prebuilds/linux-arm64/mempo.node', 'prebuilds/linux-x64/mempo.node']);
    expect(files).toContain('dist/index.mjs');
    expect(files).toContain('dist/index.d.ts');
    expect(files).toContain('learner/mempo_learner/__main__.py'); // the torch learner `mempo train` spawns
    expect(files.some((f) => f.startsWith('test/') || f.startsWith('src/'))).toBe(false);
    for (const f of ['LICENSE', 'CHANGELOG.md', 'README.md', 'scripts/install.js']) expect(files).toContain(f);
    // Every docs/*.md that --help or an error message of the shipped code cites is in the package.
    const cited = new Set<string>();
    for (const f of files.filter((x) => x.startsWith('dist/') && x.endsWith('.js'))) {
      for (const m of fs.readFileSync(path.join(root, f), 'utf8').matchAll(/docs\/[a-z-]+\.md/g)) cited.add(m[0]);
    }
    expect(cited.size).toBeGreaterThan(3);
    expect([...cited].filter((d) => !files.includes(d))).toEqual([]);

    // Compilers and make that fail loudly: an install that tries to compile cannot pass quietly.
    const shims = path.join(work, 'no-compilers');
    fs.mkdirSync(shims);
    for (const tool of ['g++', 'gcc', 'cc', 'c++', 'clang', 'clang++', 'make', 'cmake']) {
      fs.writeFileSync(path.join(shims, tool), `#!/bin/sh\necho "COMPILER CALLED: ${tool} $*" >&2\nexit 127\n`, { mode: 0o755 });
    }
    const app = path.join(work, 'app');
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }));
    const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${shims}:${process.env.PATH}`, ONNXRUNTIME_NODE_INSTALL: 'skip', MEMPO_BACKEND: '' };
    delete env.MEMPO_NATIVE_BINDING;
    const log = execFileSync('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', path.join(work, info[0]!.filename)], {
      cwd: app,
      env,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    expect(log).not.toMatch(/COMPILER CALLED/);
    expect(fs.existsSync(path.join(app, 'node_modules', 'mempo', 'build'))).toBe(false);

    const check = `
      const assert = require('assert');
      const m = require('mempo');
      assert.strictEqual(m.backend(), 'native');
      const V = 1000, R = 3;
      const logits = new Float32Array(R * V).map((_, i) => Math.sin(i) * 20);
      const t = new Int32Array([0, 500, 999]);
      const a = m.gatherLogProbs(logits, t, R, V);
      m.setBackend('js');
      const b = m.gatherLogProbs(logits, t, R, V);
      for (let i = 0; i < R; i++) assert.ok(Math.abs(a[i] - b[i]) <= 1e-5 + 1e-5 * Math.abs(b[i]), a[i] + ' vs ' + b[i]);
      console.log('cjs ok', require.resolve('mempo'));`;
    expect(execFileSync('node', ['-e', check], { cwd: app, env, encoding: 'utf8' })).toMatch(/^cjs ok/);
    const esm = `
      import { backend, emCheck } from 'mempo';
      import mempo from 'mempo';
      if (backend() !== 'native' || emCheck('The Paris', ['paris']) !== 1 || mempo.backend !== backend) process.exit(3);
      console.log('esm ok');`;
    expect(execFileSync('node', ['--input-type=module', '-e', esm], { cwd: app, env, encoding: 'utf8' })).toMatch(/^esm ok/);
  });
});
