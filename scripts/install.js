#!/usr/bin/env node
/**
 * `npm install`'s step for the native addon (package.json "install"): the prebuild for this
 * platform when one loads, else a source build with node-gyp, else nothing — the kernels then run
 * on the pure-JS twin (same results, slower). An install never fails for want of a compiler.
 * What was chosen, and why, goes to build/install-status.txt (the kernels' load errors,
 * `nativeLoadErrors()`, quote it) and to stderr (npm shows it with --foreground-scripts).
 */
'use strict';
const { spawnSync } = require('child_process');
const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..');
const statusFile = path.join(root, 'build', 'install-status.txt');
const fromSource = process.env.npm_config_build_from_source === 'true';

function loads() {
  try {
    require('node-gyp-build')(root);
    return true;
  } catch {
    return false;
  }
}

/** node-gyp: npm's own (npm_config_node_gyp), else a dependency's, else the one on PATH. */
function nodeGyp() {
  if (process.env.npm_config_node_gyp) return [process.execPath, [process.env.npm_config_node_gyp, 'rebuild']];
  try {
    const pkg = require.resolve('node-gyp/package.json', { paths: [root] });
    const bin = require(pkg).bin;
    return [process.execPath, [path.join(path.dirname(pkg), typeof bin === 'string' ? bin : bin['node-gyp']), 'rebuild']];
  } catch {
    return [process.platform === 'win32' ? 'node-gyp.cmd' : 'node-gyp', ['rebuild']];
  }
}

fs.rmSync(statusFile, { force: true });
if (!fromSource && loads()) process.exit(0);
const [cmd, args] = nodeGyp();
const r = spawnSync(cmd, args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], windowsHide: true, shell: process.platform === 'win32' });
if (r.status === 0 && loads()) process.exit(0);
const output = `${r.stdout ?? ''}\n${r.stderr ?? ''}`;
// gyp's own summary ("Could not find any Python installation to use", "`make` failed ..."), else the compiler's first error.
const found = /gyp ERR! stack Error: (.*)/.exec(output) ?? /^.*error: .*$/m.exec(output);
const cause = r.error ? r.error.message : found ? (found[1] ?? found[0]).trim() : `node-gyp exit ${r.status}`;
const line = `no prebuilt addon for ${process.platform}-${process.arch} and the source build failed (${cause}); the kernels run on the pure-JS twin. For the native ones install python3, make and a C++17 compiler, then run: npm rebuild mempo`;
fs.mkdirSync(path.dirname(statusFile), { recursive: true });
fs.writeFileSync(statusFile, `${line}\n`);
process.stderr.write(`mempo: ${line}\n`);
