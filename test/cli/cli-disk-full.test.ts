/**
 * `mempo rollout` (the built command, dist/cli/main.js) on a full disk: a 48 KiB tmpfs in a mount
 * namespace (skipped where `unshare -m` cannot mount one: root on Linux). The run fails naming
 * the file it could not write (exit 1); no output file is short: report.html is absent rather
 * than truncated, no temp file is left, batch.jsonl holds whole lines, summary.json parses.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { canMountTmpfs } from '../helpers';

const BIN = resolve(__dirname, '..', '..', 'dist', 'cli', 'main.js');
const dir = mkdtempSync(join(tmpdir(), 'mempo-disk-'));

const maybe = canMountTmpfs(dir, '48k', BIN) ? test : test.skip;

maybe('a full disk: exit 1 naming the file, and no short output file', () => {
  const q = join(dir, 'q.jsonl');
  writeFileSync(q, [
    { id: 'a', question: 'In which country is Mamek?', golds: ['Thersekle'] },
    { id: 'b', question: 'Who published The Hollow Winter?', golds: ['Faithhe Works'] },
  ].map((x) => JSON.stringify(x)).join('\n') + '\n');
  const mnt = mkdtempSync(join(tmpdir(), 'mempo-disk-mnt-'));
  const out = join(mnt, 'run');
  const args = [BIN, 'rollout', '--out', out, '--questions', q, '-n', '2', '--max-round-tokens', '24', '--max-turns', '2', '--threads', '1', '--questions-per-batch', '1', '--quiet'];
  // Inside the namespace: the run, then what it left on the tmpfs (JSON on stdout).
  const check = `const fs = require('fs'); const o = ${JSON.stringify(out)}; const files = fs.readdirSync(o).sort();
    const lines = fs.readFileSync(o + '/batch.jsonl', 'utf8'); let summary = null; try { summary = JSON.parse(fs.readFileSync(o + '/summary.json', 'utf8')).trajectories; } catch {}
    console.log(JSON.stringify({ files, whole: lines.endsWith('\\n') && lines.split('\\n').filter(Boolean).every((l) => { try { JSON.parse(l); return true; } catch { return false; } }), summary }));`;
  const script = 'mount -t tmpfs -o size=48k tmpfs "$MNT" && "$NODE" "$@"; echo "rc=$?" >&2; exec "$NODE" -e "$CHECK"';
  const r = spawnSync('unshare', ['-m', 'sh', '-c', script, 'sh', ...args], { encoding: 'utf8', env: { ...process.env, MNT: mnt, NODE: process.execPath, CHECK: check } });
  expect(r.stderr).toMatch(new RegExp(`^error: \\[ENOSPC\\] Cannot write ${out.replace(/[.\\/]/g, '\\$&')}/report\\.html: ENOSPC: no space left on device, write \\(\\d+ of \\d+ bytes written\\)\\nrc=1\\n$`));
  const left = JSON.parse(r.stdout);
  expect(left).toEqual({ files: ['batch.jsonl', 'run.json', 'summary.json'], whole: true, summary: 4 });
});
