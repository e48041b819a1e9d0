/**
 * scripts/publish-check.js, npm publish's guard: no package reaches the registry without the
 * `repository`, `homepage` and `bugs` its page links to.
 */
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const script = path.resolve(__dirname, '..', 'scripts', 'publish-check.js');

function check(fields: Record<string, unknown>): { status: number | null; stderr: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mempo-publish-'));
  try {
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'mempo', version: '0.1.0', ...fields }));
    const r = spawnSync(process.execPath, [script, path.join(dir, 'package.json')], { encoding: 'utf8' });
    return { status: r.status, stderr: r.stderr };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describe('publish-check', () => {
  it('is npm publish\'s prepublishOnly step', () => {
    const pkg = JSON.parse(fs.readFileSync(path.resolve(__dirname, '..', 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts['prepublishOnly']).toBe('node scripts/publish-check.js');
  });

  it('refuses a package without repository, homepage and bugs, naming each', () => {
    const r = check({});
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/set repository .*; homepage .*; bugs /);
  });

  it('names only what is missing or not a URL', () => {
    const r = check({ repository: { type: 'git', url: 'git+https://example.org/mempo.git' }, homepage: 'mempo home', bugs: { url: 'https://example.org/mempo/issues' } });
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/set homepage \(an https URL\)\n$/);
  });

  it('passes once all three are addresses', () => {
    const r = check({ repository: 'https://example.org/mempo.git', homepage: 'https://example.org/mempo', bugs: { email: 'mempo@example.org' } });
    expect(r).toEqual({ status: 0, stderr: '' });
  });
});
