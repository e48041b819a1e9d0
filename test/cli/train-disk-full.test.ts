/**
 * `mempo train` (the built command, dist/cli/main.js, with the spawned torch learner) whose
 * checkpoint does not fit on the disk: a 24 MiB tmpfs in a mount namespace holds the model but not
 * the learner's optimiser state (skipped where `unshare -m` cannot mount one: root on Linux). The
 * run fails with "No space left on device" naming the checkpoint (exit 1), not a C++ stack from
 * the learner, and leaves no temp directory of the save behind.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { canMountTmpfs, describeWithTorch } from '../helpers';

const BIN = resolve(__dirname, '..', '..', 'dist', 'cli', 'main.js');
const dir = mkdtempSync(join(tmpdir(), 'mempo-train-disk-'));
const maybe = canMountTmpfs(dir, '24m', BIN) ? test : test.skip;

describeWithTorch('mempo train on a full disk', () => {
  maybe('a learner save that runs out of space: exit 1 saying "No space left on device" and naming the checkpoint', () => {
    const mnt = mkdtempSync(join(tmpdir(), 'mempo-train-disk-mnt-'));
    const out = join(mnt, 'run');
    const args = [BIN, 'train', '--out', out, '--steps', '1', '--limit', '4', '--questions-per-step', '1', '-n', '2', '--eval-every', '0', '--max-turns', '2', '--threads', '1', '--quiet'];
    // Inside the namespace: the run, then what it left on the tmpfs.
    const script = 'mount -t tmpfs -o size=24m tmpfs "$MNT" && "$NODE" "$@"; echo "rc=$?" >&2; ls -A "$OUT" "$OUT/checkpoints"';
    const r = spawnSync('unshare', ['-m', 'sh', '-c', script, 'sh', ...args], { encoding: 'utf8', env: { ...process.env, MNT: mnt, OUT: out, NODE: process.execPath }, timeout: 120_000 });
    const ck = join(out, 'checkpoints', 'step-1').replace(/[.\\/]/g, '\\$&');
    expect(r.stderr).toMatch(new RegExp(`^error: No space left on device: the learner could not write ${ck} \\(.*\\); free some space and rerun with --resume: ${out.replace(/[.\\/]/g, '\\$&')} keeps its complete checkpoints\\nrc=1\\n$`));
    // Nothing of the failed save is left: no step-1, no step-1.tmp-PID; no metrics line for the step.
    expect(r.stdout).toBe(`${out}:\ncheckpoints\n\n${out}/checkpoints:\n`);
  }, 150_000);
});
