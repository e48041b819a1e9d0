/** training/train.py's sample-kind shares (test/python/test_training_mix.py), run by jest so that `npm test` covers them. */
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { describeWithTorch, torchPython } from '../helpers';

const ROOT = resolve(__dirname, '..', '..');

describeWithTorch('training/train.py mix_shares unittest suite', () => {
  it('passes', () => {
    const r = spawnSync(torchPython()!, ['-m', 'unittest', 'discover', '-s', 'test/python', '-p', 'test_training*.py'], {
      cwd: ROOT, encoding: 'utf8', env: { ...process.env, PYTHONPATH: resolve(ROOT, 'training') }, timeout: 120_000,
    });
    if (r.status !== 0) throw new Error(`unittest failed (exit ${r.status}):\n${r.stderr.slice(-6000)}`);
    expect(r.stderr).toMatch(/Ran 4 tests/);
    expect(r.stderr).toMatch(/\nOK\s*$/);
  }, 120_000);
});
