/** The torch reference learner's own unittest suite (test/python/test_learner.py), run by jest so that `npm test` covers it. */
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { describeWithTorch, torchPython } from '../helpers';

const ROOT = resolve(__dirname, '..', '..');

describeWithTorch('learner/mempo_learner unittest suite', () => {
  it('passes', () => {
    const r = spawnSync(torchPython()!, ['-W', 'error::ResourceWarning', '-m', 'unittest', 'discover', '-s', 'test/python', '-p', 'test_learner*.py'], {
      cwd: ROOT, encoding: 'utf8', env: { ...process.env, PYTHONPATH: resolve(ROOT, 'learner') }, timeout: 600_000,
    });
    if (r.status !== 0) throw new Error(`unittest failed (exit ${r.status}):\n${r.stderr.slice(-6000)}`);
    expect(r.stderr).toMatch(/Ran \d+ tests/);
    expect(r.stderr).toMatch(/\nOK\s*$/);
  }, 600_000);
});
