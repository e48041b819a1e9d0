/**
 * verl and TRL themselves on mempo's exports (test/python/test_peer_verl.py, test_peer_trl.py), run
 * under `python3`, the interpreter .ci/run installs requirements.txt and requirements-peers.txt
 * into. Without verl / TRL the Python tests skip, printing why; under CI=true they fail instead,
 * and this file also refuses a skip there.
 */
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';

const ROOT = resolve(__dirname, '..', '..');

describe.each(['test_peer_verl.py', 'test_peer_trl.py'])('%s (python3)', (file) => {
  it('passes', () => {
    const r = spawnSync('python3', ['-m', 'unittest', 'discover', '-s', 'test/python', '-p', file], {
      cwd: ROOT, encoding: 'utf8', timeout: 600_000, env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
    });
    if (r.error) throw new Error(`python3 did not run: ${r.error.message}`);
    if (r.status !== 0) throw new Error(`${file} failed (exit ${r.status}):\n${r.stderr.slice(-6000)}`);
    const skipped = /OK \(skipped=\d+\)/.test(r.stderr);
    if (skipped) console.warn(r.stderr.split('\n').find((l) => l.includes(': skipped, ')) ?? `${file}: skipped`);
    if (process.env.CI) expect(skipped).toBe(false);
    if (!skipped) expect(r.stderr).toMatch(/Ran [1-9]\d* tests? .*\n\s*OK\s*$/s);
  }, 600_000);
});
