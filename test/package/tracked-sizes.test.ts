/**
 * A lean repository (issue 46 item 3): no tracked file over 4 MiB but what the package ships and
 * needs, and no commit since the lean-tree commit that brought a larger file into the history
 * (history is never rewritten, so every such blob is in every full clone for good). The checks
 * are first shown to catch a big file, in the tree and in the history, in a written-out repository.
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { MiB, blobsSince, hasCommit, isShallow, oversized, trackedSizes } from './git-sizes';

const root = path.resolve(__dirname, '..', '..');
const LIMIT = 4 * MiB;

/** The files allowed past LIMIT, each with why a reader of the package needs it in the tree. */
const ALLOW: Record<string, string> = {
  'models/mempo-tiny/model.onnx': 'the shipped model: `npm start`, `mempo eval` and `mempo train` run it by default',
  'data/world/pages.jsonl': "the embedded world's pages, shipped: `<access>URL</access>` reads them in `npm start`",
  'data/world/train.jsonl': "the embedded world's training questions, shipped: `mempo train`'s default split and the recipe's",
};

/**
 * The commit that took the intermediate checkpoints of training/carry out of the tree
 * (a8c52b7, 2026-12-05): the history check starts after it.
 */
const LEAN_COMMIT = 'a8c52b766df8339f06939f0112a2d3fbddca0395';

/** Whether package.json's `files` takes `file` into the package (exact names, folders, one `*` per segment, `!` exclusions). */
function ships(files: readonly string[], file: string): boolean {
  const matches = (pattern: string): boolean => {
    if (pattern.endsWith('/')) return file.startsWith(pattern);
    const re = new RegExp(`^${pattern.split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('[^/]*')}$`);
    return re.test(file);
  };
  let taken = false;
  for (const p of files) {
    if (p.startsWith('!')) {
      if (matches(p.slice(1))) taken = false;
    } else if (matches(p)) taken = true;
  }
  return taken;
}

const mb = (n: number): string => `${(n / MiB).toFixed(2)} MiB`;
const list = (xs: readonly { path: string; size: number }[]): string[] => xs.map((x) => `${x.path} (${mb(x.size)})`);

describe('the size checks on a written-out repository', () => {
  let dir = '';
  const run = (cwd: string, ...args: string[]): string =>
    execFileSync('git', args, {
      cwd,
      encoding: 'utf8',
      env: { ...process.env, GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@example.invalid', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@example.invalid' },
    });
  const put = (name: string, bytes: number): void => {
    fs.mkdirSync(path.dirname(path.join(dir, 'repo', name)), { recursive: true });
    fs.writeFileSync(path.join(dir, 'repo', name), Buffer.alloc(bytes, 7));
  };
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mempo-sizes-'));
    fs.mkdirSync(path.join(dir, 'repo'));
    run(path.join(dir, 'repo'), 'init', '-q');
  });
  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('flags a tracked file one byte past the limit, not one at it, not an allowlisted one, and a staged one too', () => {
    const repo = path.join(dir, 'repo');
    put('small.txt', 10);
    put('at-limit.bin', LIMIT);
    put('over/by-one.bin', LIMIT + 1);
    put('allowed.bin', LIMIT + 5);
    run(repo, 'add', '.');
    run(repo, 'commit', '-qm', 'one');
    const sizes = trackedSizes(repo);
    expect(sizes.map((s) => s.path).sort()).toEqual(['allowed.bin', 'at-limit.bin', 'over/by-one.bin', 'small.txt']);
    expect(sizes.find((s) => s.path === 'at-limit.bin')!.size).toBe(LIMIT);
    expect(oversized(sizes, LIMIT, new Set(['allowed.bin']))).toEqual([{ path: 'over/by-one.bin', size: LIMIT + 1 }]);
    // staged but not committed: already tracked
    put('staged.bin', LIMIT + 2);
    run(repo, 'add', 'staged.bin');
    expect(oversized(trackedSizes(repo), LIMIT, new Set(['allowed.bin'])).map((s) => s.path)).toEqual(['staged.bin', 'over/by-one.bin']);
  });

  it("finds a big file that a later commit deleted in the history after a base, and not what the base had; a shallow clone says it is shallow", () => {
    const repo = path.join(dir, 'repo');
    put('old-big.bin', LIMIT + 1);
    run(repo, 'add', '.');
    run(repo, 'commit', '-qm', 'base');
    const base = run(repo, 'rev-parse', 'HEAD').trim();
    put('checkpoint/model.onnx', LIMIT + 3);
    put('notes.txt', 5);
    run(repo, 'add', '.');
    run(repo, 'commit', '-qm', 'a checkpoint');
    run(repo, 'rm', '-q', 'checkpoint/model.onnx');
    run(repo, 'commit', '-qm', 'gone from the tree');
    expect(trackedSizes(repo).map((s) => s.path).sort()).toEqual(['notes.txt', 'old-big.bin']);
    expect(oversized(blobsSince(repo, base), LIMIT, new Set())).toEqual([{ path: 'checkpoint/model.onnx', size: LIMIT + 3 }]);
    expect(isShallow(repo)).toBe(false);
    expect(hasCommit(repo, base)).toBe(true);

    const shallow = path.join(dir, 'shallow');
    run(dir, 'clone', '-q', '--depth', '1', `file://${repo}`, shallow);
    expect(isShallow(shallow)).toBe(true);
    expect(hasCommit(shallow, base)).toBe(false);
  });
});

describe('this repository', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { files: string[] };

  it('tracks no file over 4 MiB but the allowlisted ones, each of which is tracked and ships in the package', () => {
    const sizes = trackedSizes(root);
    expect(sizes.length).toBeGreaterThan(100);
    expect(list(oversized(sizes, LIMIT, new Set(Object.keys(ALLOW))))).toEqual([]);
    const tracked = new Set(sizes.map((s) => s.path));
    for (const file of Object.keys(ALLOW)) {
      expect([file, tracked.has(file)]).toEqual([file, true]);
      expect([file, ships(pkg.files, file)]).toEqual([file, true]);
    }
    // the matcher itself: an excluded doc and an unlisted result do not ship
    expect(ships(pkg.files, 'docs/experiments.md')).toBe(false);
    expect(ships(pkg.files, 'results/arms/mempo/metrics.jsonl')).toBe(false);
    expect(ships(pkg.files, 'docs/algorithm.md')).toBe(true);
  });

  // A shallow clone (`git clone --depth 1`, the fast way, README) has not the history to check.
  const shallow = isShallow(root);
  if (shallow) console.warn(`tracked-sizes: the history check is skipped: ${root} is a shallow clone, its history before the newest commits is not here`);
  (shallow ? it.skip : it)('no commit after the lean-tree commit brought a file over 4 MiB into the history but the allowlisted ones', () => {
    if (!hasCommit(root, LEAN_COMMIT)) throw new Error(`${root}: the lean-tree commit ${LEAN_COMMIT} is not in this full clone's history, so the history check has no start`);
    expect(list(oversized(blobsSince(root, LEAN_COMMIT), LIMIT, new Set(Object.keys(ALLOW))))).toEqual([]);
  });
});
