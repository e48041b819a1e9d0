/** The Python unittest suites (test/python/test_*.py: the torch reference learner, training/train.py's mixes), run by jest so that `npm test` covers them. */
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { describeWithTorch, torchPython } from '../helpers';

const ROOT = resolve(__dirname, '..', '..');

describeWithTorch('Python unittest suites (learner/mempo_learner, training/train.py)', () => {
  it('passes', () => {
    const r = spawnSync(torchPython()!, ['-W', 'error::ResourceWarning', '-m', 'unittest', 'discover', '-s', 'test/python', '-p', 'test_*.py'], {
      cwd: ROOT, encoding: 'utf8', env: { ...process.env, PYTHONPATH: [resolve(ROOT, 'learner'), resolve(ROOT, 'training')].join(':') }, timeout: 600_000,
    });
    if (r.status !== 0) throw new Error(`unittest failed (exit ${r.status}):\n${r.stderr.slice(-6000)}`);
    expect(r.stderr).toMatch(/Ran \d+ tests/);
    expect(r.stderr).toMatch(/\nOK\s*$/);
  }, 600_000);
});
