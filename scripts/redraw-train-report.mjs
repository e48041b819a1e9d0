#!/usr/bin/env node
// Redraws the train-report.html of finished `mempo train` runs from their metrics.jsonl with today's
// trainReportHtml, its title naming the run directory as typed (relative) where an older `mempo train`
// wrote the machine's absolute path (issue 46: results/arms/*/train-report.html, docs/train-report.png).
//
//   node scripts/redraw-train-report.mjs [--root DIR] RUN_DIR ...      (after `npm run build:ts`)
//
// The title's directory comes from the report's own <h1> ("mempo train — DIR"): an absolute DIR under
// --root (the directory the run was started from, e.g. the clone where arms.sh typed `--out out/arms/grpo`) becomes
// relative to it; a relative one is kept; an absolute one outside --root is refused. MemPO or GRPO (the
// memory-reward chart) is read from the metrics (a GRPO run has no memory reward at any step) and must agree
// with the old report. Every run is checked before any report is written; each is written to a temporary
// file and renamed, so a failure leaves every report as it was. Exit 2 on bad input, naming it.
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TITLE = 'mempo train — ';
// what trainReportHtml writes in place of the memory chart for a --no-memory-reward run
const GRPO_MARK = 'memory rewards off (--no-memory-reward';

function fail(msg) {
  process.stderr.write(`redraw-train-report: ${msg}\n`);
  process.exit(2);
}

const unescapeHtml = (s) => s.replace(/&(amp|lt|gt|quot|#39);/g, (_, e) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'" })[e]);

function readMetrics(file) {
  if (!existsSync(file)) fail(`${file}: no such file (a run directory holds metrics.jsonl)`);
  const out = [];
  readFileSync(file, 'utf8').split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    let m;
    try {
      m = JSON.parse(line);
    } catch {
      fail(`${file}:${i + 1}: not JSON`);
    }
    if (m === null || typeof m !== 'object' || !Number.isInteger(m.step) || m.step < 0) fail(`${file}:${i + 1}: not a metrics line (no whole step number)`);
    out.push(m);
  });
  if (out.length === 0) fail(`${file}: no metrics lines`);
  return out;
}

function plan(dir, root) {
  const reportFile = path.join(dir, 'train-report.html');
  const metrics = readMetrics(path.join(dir, 'metrics.jsonl'));
  if (!existsSync(reportFile)) fail(`${reportFile}: no such file (the report whose title is redrawn)`);
  const old = readFileSync(reportFile, 'utf8');
  const h1 = /<h1>([^<]*)<\/h1>/.exec(old);
  if (!h1 || !unescapeHtml(h1[1]).startsWith(TITLE)) fail(`${reportFile}: no <h1>${TITLE}DIR</h1> title`);
  let runDir = unescapeHtml(h1[1]).slice(TITLE.length).trim();
  if (runDir === '') fail(`${reportFile}: the title names no directory`);
  if (path.isAbsolute(runDir)) {
    const rel = root === null ? null : path.relative(root, runDir);
    if (rel === null || rel === '' || rel.startsWith('..') || path.isAbsolute(rel)) {
      fail(`${reportFile}: the title names ${runDir}, an absolute path ${root === null ? '(give --root, the directory the run was started from)' : `outside --root ${root}`}`);
    }
    runDir = rel;
  }
  const memoryReward = metrics.some((m) => m.step >= 1 && m.memoryReward != null && m.memoryReward.mean !== null);
  if (memoryReward === old.includes(GRPO_MARK)) {
    fail(`${reportFile}: the metrics say ${memoryReward ? 'MemPO (memory rewards)' : 'GRPO (no memory reward)'} but the report says otherwise`);
  }
  return { reportFile, metrics, title: `${TITLE}${runDir}`, memoryReward };
}

const args = process.argv.slice(2);
let root = null;
const dirs = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--root') {
    if (i + 1 >= args.length) fail('--root needs a directory');
    root = path.resolve(args[++i]);
  } else if (args[i].startsWith('-')) fail(`unknown option ${args[i]}`);
  else dirs.push(args[i]);
}
if (dirs.length === 0) fail('usage: node scripts/redraw-train-report.mjs [--root DIR] RUN_DIR ...');
const dist = path.join(repo, 'dist', 'index.js');
if (!existsSync(dist)) fail(`${dist}: missing, run npm run build:ts first`);
const { trainReportHtml } = await import(dist);

const plans = dirs.map((d) => plan(d, root));
for (const p of plans) {
  const tmp = `${p.reportFile}.tmp.${process.pid}`;
  try {
    writeFileSync(tmp, trainReportHtml(p.metrics, { title: p.title, memoryReward: p.memoryReward }));
    renameSync(tmp, p.reportFile);
  } catch (e) {
    rmSync(tmp, { force: true });
    fail(`${p.reportFile}: ${e.message}`);
  }
  process.stdout.write(`${p.reportFile}: ${p.title} (${p.memoryReward ? 'MemPO' : 'GRPO'}, ${p.metrics.length} lines)\n`);
}
