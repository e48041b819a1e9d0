#!/usr/bin/env node
// The package as a consumer gets it (issue 31, item 4): `npm pack` (its prepack builds dist/ and the
// prebuilds), install the tarball into a scratch project with every compiler and make on PATH failing
// loudly and ONNXRUNTIME_NODE_INSTALL=skip, then, from that project:
//   1. run every file of examples/: *.mjs with node; *.ts compiled by tsc (nodenext, strict, no
//      skipLibCheck) and run. own-engine gets the URL of a `npx mempo serve` started on loopback;
//      examples and snippets that use spawnLearner are skipped, saying so, when no python3 imports torch;
//      search-agent.mjs is an agent module: `mempo rollout --agent` and a 2-step `mempo train --agent` run it;
//   2. run the code blocks of README.md and docs/*.md that claim to run. The convention: the fence's
//      info string says `run` after the language, ```js run (an ES module, run with node) or
//      ```ts run (compiled as the examples are, then run). GitHub highlights them as plain js / ts.
//      Blocks of js / ts without `run` (fragments, code that needs GPU servers) are listed, not run.
//      With `output` too (```js run output) the block's trailing `//` comment lines are the output it
//      documents, compared line by line with what it printed (a note set off by two or more spaces in
//      parentheses at the end of such a line is not part of the output);
//   3. type-check scripts/consumer/consumer.ts (kernels, pipeline, LocalModel, Generator / TargetScorer,
//      training, errors) under each tsconfig of MATRIX below, none with skipLibCheck;
//   4. @arethetypeswrong/cli on the tarball.
// Every failure is printed with its output, and the script exits 1 after all steps ran.
//
// Usage: node scripts/consumer-check.mjs [--tarball FILE] [--keep]
//   --tarball FILE  use this packed tarball instead of packing (when iterating on examples or docs)
//   --keep          leave the scratch directory (printed) in place
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const given = args.includes('--tarball') ? resolve(args[args.indexOf('--tarball') + 1] ?? '') : null;
const keep = args.includes('--keep');
const STEP_TIMEOUT_MS = 240_000;

const work = mkdtempSync(join(tmpdir(), 'mempo-consumer-'));
const app = join(work, 'app');
const failures = [];
const t00 = Date.now();
const secs = (t0) => `${((Date.now() - t0) / 1000).toFixed(1)} s`;

// Compilers and make that fail loudly: an install that tries to compile cannot pass quietly.
const shims = join(work, 'no-compilers');
mkdirSync(shims);
for (const tool of ['g++', 'gcc', 'cc', 'c++', 'clang', 'clang++', 'make', 'cmake']) {
  writeFileSync(join(shims, tool), `#!/bin/sh\necho "COMPILER CALLED: ${tool} $*" >&2\nexit 127\n`, { mode: 0o755 });
}
const env = { ...process.env, PATH: `${shims}:${process.env.PATH}`, ONNXRUNTIME_NODE_INSTALL: 'skip' };
for (const k of ['MEMPO_BACKEND', 'MEMPO_NATIVE_BINDING', 'NODE_OPTIONS']) delete env[k];

/** Runs a command to completion; a non-zero exit (or a timeout) is recorded as a failure of `what`. */
function run(what, cmd, argv, options = {}) {
  const t0 = Date.now();
  const r = spawnSync(cmd, argv, { cwd: app, env, encoding: 'utf8', timeout: STEP_TIMEOUT_MS, maxBuffer: 64 << 20, ...options });
  const out = `${r.stdout ?? ''}${r.stderr ?? ''}`;
  const ok = r.status === 0;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what} (${secs(t0)})`);
  if (!ok) {
    const why = r.error ? r.error.message : r.signal ? `killed by ${r.signal}` : `exit ${r.status}`;
    failures.push(what);
    console.log(`---- ${what}: ${why}\n${out.trimEnd()}\n----`);
  } else if (options.show !== false) {
    for (const line of out.trimEnd().split('\n').slice(-6)) if (line) console.log(`       ${line}`);
  }
  return { ok, out, stdout: r.stdout ?? '' };
}

function fatal(message) {
  console.error(`consumer-check: ${message}`);
  process.exit(1);
}

function versionOf(pkg) {
  return JSON.parse(readFileSync(join(root, 'node_modules', pkg, 'package.json'), 'utf8')).version;
}

// ---- pack and install
let tarball = given;
if (tarball === null) {
  const t0 = Date.now();
  const r = spawnSync('npm', ['pack', '--json', '--pack-destination', work], { cwd: root, encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) fatal(`npm pack failed (exit ${r.status}):\n${r.stderr.split('\n').slice(-40).join('\n')}`);
  tarball = join(work, JSON.parse(r.stdout.slice(r.stdout.indexOf('[')))[0].filename);
  console.log(`ok   npm pack: ${basename(tarball)} (${secs(t0)})`);
}
if (!existsSync(tarball)) fatal(`no tarball at ${tarball}`);
mkdirSync(app);
writeFileSync(join(app, 'package.json'), `${JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, type: 'module' }, null, 2)}\n`);
// TypeScript and @types/node at the versions this repository builds with (from npm's cache when there).
// openai: the client examples/search-agent.mjs is written with (an agent's own dependency, not mempo's).
const install = run('npm install (the tarball, typescript, @types/node, openai; no compiler on PATH)', 'npm', [
  'install', '--no-audit', '--no-fund', '--prefer-offline', tarball, `typescript@${versionOf('typescript')}`, `@types/node@${versionOf('@types/node')}`,
  `openai@${versionOf('openai')}`,
], { show: false });
if (!install.ok) fatal('the tarball did not install');
if (/COMPILER CALLED/.test(install.out)) fatal(`the install tried to compile:\n${install.out}`);
const tsc = join(app, 'node_modules', 'typescript', 'bin', 'tsc');
const pkg = join(app, 'node_modules', 'mempo');

// As spawnLearner's findPython: MEMPO_PYTHON when set (so MEMPO_PYTHON=/none shows the skips), else python3, /usr/bin/python3.
const pythons = process.env.MEMPO_PYTHON ? [process.env.MEMPO_PYTHON] : ['python3', '/usr/bin/python3'];
const torchPython = pythons.find((py) => spawnSync(py, ['-c', 'import torch'], { stdio: 'ignore' }).status === 0);
const needsTorch = (source) => /\bspawnLearner\b/.test(source);
function skipForTorch(what) {
  console.log(`SKIP ${what}: it starts the torch learner and none of ${pythons.join(', ')} imports torch (Debian: apt-get install python3-torch)`);
}

/** Compiles .ts files as an ES module project would (nodenext, strict, no skipLibCheck) into outDir. */
function compileTs(what, files, outDir) {
  return run(`tsc ${what}`, process.execPath, [tsc, '--module', 'nodenext', '--moduleResolution', 'nodenext', '--target', 'es2022', '--strict',
    '--skipLibCheck', 'false', '--types', 'node', '--outDir', outDir, '--rootDir', dirname(files[0]), ...files], { show: false }).ok;
}

// ---- 1. examples
/**
 * `npx mempo serve` on a free loopback port; resolves with its URL and a stop function. The installed bin is
 * started itself, as npx would find it: a SIGTERM to npx does not reach the server it started, which then
 * outlived the check.
 */
function startServe() {
  return new Promise((res, rej) => {
    const child = spawn(join(app, 'node_modules', '.bin', 'mempo'), ['serve', '--port', '0'], { cwd: app, env, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    const timer = setTimeout(() => { child.kill('SIGTERM'); rej(new Error(`mempo serve did not listen within 60 s:\n${err}`)); }, 60_000);
    child.on('exit', (code) => { clearTimeout(timer); rej(new Error(`mempo serve exited (${code}):\n${err}`)); });
    child.stderr.on('data', (d) => {
      err += d;
      const m = /listening on (http:\/\/\S+)/.exec(err);
      if (!m) return;
      clearTimeout(timer);
      child.removeAllListeners('exit');
      const exited = new Promise((r) => child.on('exit', r));
      res({ url: m[1], stop: () => { child.kill('SIGTERM'); return exited; } });
    });
  });
}

const examples = readdirSync(join(root, 'examples')).filter((f) => /\.(mjs|ts)$/.test(f)).sort();
if (examples.length < 4) fatal(`examples/ holds ${examples.length} runnable files; expected at least 4`);
cpSync(join(root, 'examples'), join(app, 'examples'), { recursive: true });
const tsExamples = examples.filter((f) => f.endsWith('.ts')).map((f) => join(app, 'examples', f));
const compiled = tsExamples.length === 0 || compileTs('examples/*.ts', tsExamples, join(app, 'build', 'examples'));
for (const f of examples) {
  const what = `examples/${f}`;
  if (needsTorch(readFileSync(join(root, 'examples', f), 'utf8')) && !torchPython) { skipForTorch(what); continue; }
  if (f.endsWith('.ts') && !compiled) continue;
  const file = f.endsWith('.ts') ? join('build', 'examples', f.replace(/\.ts$/, '.js')) : join('examples', f);
  if (f === 'own-engine.ts') {
    let serve;
    try {
      serve = await startServe();
    } catch (err) {
      failures.push(`${what} (npx mempo serve)`);
      console.log(`FAIL ${what}: ${err.message}`);
      continue;
    }
    try {
      run(`${what} against npx mempo serve at ${serve.url}`, process.execPath, [file, serve.url]);
    } finally {
      await serve.stop();
    }
  } else if (f === 'search-agent.mjs') {
    // An agent module: rolled out and trained for 2 steps by the installed mempo command (docs/agents.md), small sizes.
    const mempoBin = join(app, 'node_modules', 'mempo', 'dist', 'cli', 'main.js');
    run(`${what} via npx mempo rollout --agent`, process.execPath, [mempoBin, 'rollout', '--agent', file, '--out', join(work, 'agent-rollout'), '-n', '2', '--limit', '2', '--threads', '1']);
    if (!torchPython) skipForTorch(`${what} via npx mempo train --agent`);
    else run(`${what} via npx mempo train --agent (2 steps)`, process.execPath, [mempoBin, 'train', '--agent', file, '--out', join(work, 'agent-train'), '-n', '2', '--steps', '2', '--questions-per-step', '1', '--threads', '1', '--python', torchPython]);
  } else {
    run(what, process.execPath, [file, ...(f === 'train.ts' ? [join(work, 'train-example')] : [])]);
  }
}

// ---- 2. the code blocks of README.md and docs/*.md that claim to run
const docs = ['README.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`)];
const snippets = [];
/** A block's trailing `//` comment lines without the `// ` and a note set off by 2+ spaces in parentheses. */
function documentedOutput(code) {
  const lines = code.trimEnd().split('\n');
  let k = lines.length;
  while (k > 0 && /^\/\/( |$)/.test(lines[k - 1])) k--;
  return lines.slice(k).map((l) => l.replace(/^\/\/ ?/, '').replace(/\s{2,}\(.*\)\s*$/, '').trimEnd());
}
const unmarked = [];
for (const doc of docs) {
  const lines = readFileSync(join(root, doc), 'utf8').split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w+)\s*(.*)$/.exec(lines[i]);
    if (!open) continue;
    const end = lines.indexOf('```', i + 1);
    if (end < 0) fatal(`${doc}:${i + 1}: a code block that never closes`);
    const [lang, info] = [open[1], open[2].split(/\s+/)];
    if (['js', 'ts', 'javascript', 'typescript'].includes(lang)) {
      const where = `${doc}:${i + 1}`;
      if (info.includes('run')) snippets.push({ where, ts: lang.startsWith('t'), output: info.includes('output'), code: lines.slice(i + 1, end).join('\n') });
      else unmarked.push(where);
    }
    i = end;
  }
}
if (snippets.filter((s) => s.where.startsWith('README.md')).length < 3) fatal('fewer than 3 runnable (```js run) blocks in README.md: the convention changed?');
mkdirSync(join(app, 'snippets'));
const snippetFile = (s, ext) => join(app, 'snippets', `${s.where.replace(/[/.:]/g, '-')}${ext}`);
const tsSnippets = snippets.filter((s) => s.ts);
for (const s of tsSnippets) writeFileSync(snippetFile(s, '.ts'), s.code);
const snippetsCompiled = tsSnippets.length === 0 || compileTs('the ```ts run blocks', tsSnippets.map((s) => snippetFile(s, '.ts')), join(app, 'build', 'snippets'));
for (const s of snippets) {
  const what = `${s.where} (\`\`\`${s.ts ? 'ts' : 'js'} run)`;
  if (needsTorch(s.code) && !torchPython) { skipForTorch(what); continue; }
  if (s.ts && !snippetsCompiled) continue;
  if (!s.ts) writeFileSync(snippetFile(s, '.mjs'), s.code);
  const r = run(what, process.execPath, [s.ts ? join(app, 'build', 'snippets', basename(snippetFile(s, '.js'))) : snippetFile(s, '.mjs')]);
  if (!r.ok || !s.output) continue;
  const want = documentedOutput(s.code);
  const got = r.stdout.trimEnd().split('\n').map((l) => l.trimEnd());
  if (want.length === 0) fatal(`${s.where}: \`output\` in the fence but no trailing // comment lines to compare with`);
  if (JSON.stringify(got) === JSON.stringify(want)) console.log(`ok   ${s.where}: its output is the one its last comment lines show`);
  else {
    failures.push(`${s.where} (output)`);
    console.log(`FAIL ${s.where}: the output differs from its last comment lines\n---- documented:\n${want.join('\n')}\n---- printed:\n${got.join('\n')}\n----`);
  }
}
console.log(`     not run (no \`run\` in the fence): ${unmarked.join(', ') || 'none'}`);

// ---- 3. the consumer file under each tsconfig, without skipLibCheck
// `type` is the scratch folder's package.json "type", `file` the consumer's name there (.cts / .mts force the format).
// TypeScript's own defaults (no options: target ES5, module CommonJS, node10 resolution, not strict)
// fail in zod's declarations unless esModuleInterop (or allowSyntheticDefaultImports) is on: zod 4's
// locales/index.d.cts default-imports `export =` modules (colinhacks/zod#5160, "set esModuleInterop"),
// and mempo's option types come from its zod schemas. That row is expected to fail there and only
// there; both generations of `tsc --init` config turn esModuleInterop on (5.9's through nodenext).
const ZOD_ONLY = /^(?:\.\.\/)+node_modules\/zod\/v4\/locales\/index\.d\.cts\(\d+,\d+\): error TS1259: /;
const MATRIX = [
  { name: 'TypeScript defaults (no options: ES5, CommonJS, node10), non-strict, esModuleInterop', type: 'commonjs', file: 'consumer.ts', options: { esModuleInterop: true } },
  { name: 'TypeScript defaults without esModuleInterop: fails in zod\'s declarations only', type: 'commonjs', file: 'consumer.ts', options: {}, zodOnly: true },
  // No tsconfig at all: `tsc --noEmit consumer.ts` (ES5's lib unless mempo's declarations name theirs).
  { name: 'plain `tsc --noEmit consumer.ts`, no tsconfig: fails in zod\'s declarations only', type: 'commonjs', file: 'consumer.ts', cli: true, zodOnly: true },
  { name: 'tsc --init of TypeScript <= 5.8 (commonjs, es2016, esModuleInterop, strict)', type: 'commonjs', file: 'consumer.ts', options: { target: 'es2016', module: 'commonjs', esModuleInterop: true, forceConsistentCasingInFileNames: true, strict: true } },
  { name: 'strictest CommonJS (node10, noUncheckedIndexedAccess, exactOptionalPropertyTypes)', type: 'commonjs', file: 'consumer.ts', options: { target: 'es2022', module: 'commonjs', esModuleInterop: true, strict: true, noUncheckedIndexedAccess: true, exactOptionalPropertyTypes: true } },
  { name: 'node16, CommonJS consumer, strict', type: 'commonjs', file: 'consumer.ts', options: { target: 'es2022', module: 'node16', moduleResolution: 'node16', strict: true } },
  { name: 'node16, ESM consumer, strict', type: 'module', file: 'consumer.ts', options: { target: 'es2022', module: 'node16', moduleResolution: 'node16', strict: true } },
  { name: 'nodenext, .cts and .mts consumers, non-strict', type: 'module', file: ['consumer.cts', 'consumer.mts'], options: { target: 'es2022', module: 'nodenext', moduleResolution: 'nodenext' } },
  { name: 'bundler (module esnext), strict', type: 'module', file: 'consumer.ts', options: { target: 'es2022', module: 'esnext', moduleResolution: 'bundler', strict: true } },
  { name: 'bundler (module preserve), non-strict', type: 'module', file: 'consumer.ts', options: { target: 'es2022', module: 'preserve', moduleResolution: 'bundler' } },
  { name: 'tsc --init of this TypeScript (nodenext, types [], exactOptionalPropertyTypes, ...), skipLibCheck false', type: 'module', file: 'consumer.ts', init: true },
];
const consumerSource = join(root, 'scripts', 'consumer', 'consumer.ts');
MATRIX.forEach((m, k) => {
  const dir = join(app, 'types', String(k));
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ type: m.type })}\n`);
  const files = Array.isArray(m.file) ? m.file : [m.file];
  for (const f of files) copyFileSync(consumerSource, join(dir, f));
  if (m.init) {
    // The generated tsconfig as a user gets it, then only skipLibCheck turned off (and the consumer file named).
    if (!run(`tsc --init (${m.name})`, process.execPath, [tsc, '--init'], { cwd: dir, show: false }).ok) return;
    const text = readFileSync(join(dir, 'tsconfig.json'), 'utf8');
    if (!/"skipLibCheck": true/.test(text)) fatal(`tsc --init wrote no "skipLibCheck": true to turn off:\n${text}`);
    writeFileSync(join(dir, 'tsconfig.json'), text.replace(/"skipLibCheck": true/, '"skipLibCheck": false').replace(/^\{/, `{\n  "files": ${JSON.stringify(files)},`));
  } else if (!m.cli) {
    writeFileSync(join(dir, 'tsconfig.json'), `${JSON.stringify({ compilerOptions: { ...m.options, noEmit: true, skipLibCheck: false }, files }, null, 2)}\n`);
  }
  const args = m.cli ? [tsc, '--noEmit', ...files] : [tsc, '-p', join(dir, 'tsconfig.json'), '--noEmit'];
  if (!m.zodOnly) {
    run(`types: ${m.name}`, process.execPath, args, { cwd: dir });
    return;
  }
  const r = spawnSync(process.execPath, args, { cwd: dir, encoding: 'utf8' });
  const errors = r.stdout.split('\n').filter((l) => /error TS\d+/.test(l));
  if (r.status === 0) console.log(`note types: ${m.name}: now passes (zod fixed its declarations, or mempo's no longer load them): make it a plain row`);
  else if (errors.length > 0 && errors.every((l) => ZOD_ONLY.test(l))) console.log(`ok   types: ${m.name} (${errors.length} TS1259 errors, all in zod/v4/locales/index.d.cts)`);
  else {
    failures.push(`types: ${m.name}`);
    console.log(`FAIL types: ${m.name}: errors besides zod's\n${errors.filter((l) => !ZOD_ONLY.test(l)).join('\n') || r.stdout + r.stderr}`);
  }
});

// ---- 4. @arethetypeswrong/cli on the tarball
run('attw (@arethetypeswrong/cli) on the tarball', process.execPath, [join(root, 'node_modules', '@arethetypeswrong', 'cli', 'dist', 'index.js'), tarball, '--format', 'table-flipped'],
  { cwd: work, env: { ...env, FORCE_COLOR: '0' } });

console.log(`consumer-check: ${failures.length === 0 ? 'all passed' : `${failures.length} failed: ${failures.join('; ')}`} (${secs(t00)}; package ${pkg})`);
if (keep) console.log(`consumer-check: scratch project kept in ${app}`);
else rmSync(work, { recursive: true, force: true });
process.exit(failures.length === 0 ? 0 : 1);
