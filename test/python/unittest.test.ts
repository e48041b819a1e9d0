/**
 * The Python unittest suites (test/python/test_*.py: the torch reference learner, training/train.py's mixes), run by jest
 * so that `npm test` covers them, under every Python with torch here: Debian's /usr/bin/python3 (torch 1.13) and the
 * pinned python3 (torch 2.13, requirements.txt); the learner supports both (docs/learner.md). The peers'
 * suites (test_peer_*.py: verl, TRL) run once, in peers.test.ts.
 */
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { describeWithTorch, torchPythons } from '../helpers';

const ROOT = resolve(__dirname, '..', '..');

describeWithTorch('Python unittest suites (learner/mempo_learner, training/train.py)', () => {
  if (process.env.CI) {
    // CI installs both (.ci/run): a missing one would otherwise drop its half of the suites silently
    it('finds both Pythons under CI', () => expect(torchPythons().map((p) => p.python)).toEqual(['/usr/bin/python3', 'python3']));
  }
  for (const { python, torch } of torchPythons()) {
    it(`passes under ${python} (torch ${torch})`, () => {
      const r = spawnSync(python, ['-W', 'error::ResourceWarning', '-m', 'unittest', 'discover', '-s', 'test/python', '-p', 'test_[!p]*.py'], {
        cwd: ROOT, encoding: 'utf8', env: { ...process.env, PYTHONPATH: [resolve(ROOT, 'learner'), resolve(ROOT, 'training')].join(':') }, timeout: 1_500_000,
      });
      if (r.status !== 0) throw new Error(`unittest under ${python} (torch ${torch}) failed (exit ${r.status}):\n${r.stderr.slice(-6000)}`);
      expect(r.stderr).toMatch(/Ran \d+ tests/);
      expect(r.stderr).toMatch(/\nOK( \(skipped=\d+\))?\s*$/);
    }, 1_500_000);
  }
});
