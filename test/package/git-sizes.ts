/**
 * Sizes of what a git repository tracks and of what its history adds, read with git itself
 * (`ls-files --stage`, `rev-list --objects`, `cat-file --batch-check`), for the guard on a
 * clone's size (issue 46: a clone was 310 MB of superseded checkpoints).
 */
import { execFileSync } from 'child_process';

export const MiB = 1024 * 1024;

export interface Sized {
  path: string;
  size: number;
}

function git(repo: string, args: string[], input?: string): string {
  return execFileSync('git', ['-C', repo, ...args], { encoding: 'utf8', input, maxBuffer: 256 * MiB, stdio: ['pipe', 'pipe', 'pipe'] });
}

/** type and size of each object named in `lines` ("<hash> <rest>"), rest carried through. */
function batchCheck(repo: string, lines: string[]): { type: string; size: number; rest: string }[] {
  if (lines.length === 0) return [];
  const out = git(repo, ['cat-file', '--batch-check=%(objecttype) %(objectsize) %(rest)'], lines.join('\n') + '\n');
  return out.split('\n').filter((l) => l !== '').map((l) => {
    const m = /^(\S+) (\d+) ?(.*)$/.exec(l);
    if (!m) throw new Error(`git cat-file --batch-check: unexpected line ${JSON.stringify(l)}`);
    return { type: m[1]!, size: Number(m[2]), rest: m[3]! };
  });
}

/** Every file in the index (what a commit would track now) with its blob's size; submodules left out. */
export function trackedSizes(repo: string): Sized[] {
  const entries = git(repo, ['ls-files', '--stage', '-z']).split('\0').filter((e) => e !== '');
  const blobs: string[] = [];
  for (const e of entries) {
    // "<mode> <hash> <stage>\t<path>"; mode 160000 is a submodule's commit, not a file
    const m = /^(\d+) ([0-9a-f]+) \d\t(.*)$/s.exec(e);
    if (!m) throw new Error(`git ls-files --stage: unexpected entry ${JSON.stringify(e)}`);
    if (m[1] !== '160000') blobs.push(`${m[2]} ${m[3]}`);
  }
  return batchCheck(repo, blobs).map((b) => ({ path: b.rest, size: b.size }));
}

/** The entries over `limit` bytes whose path is not in `allow`, largest first. */
export function oversized(files: readonly Sized[], limit: number, allow: ReadonlySet<string>): Sized[] {
  return files.filter((f) => f.size > limit && !allow.has(f.path)).sort((a, b) => b.size - a.size);
}

/** Whether the repository is a shallow clone (its history cut at some depth). */
export function isShallow(repo: string): boolean {
  return git(repo, ['rev-parse', '--is-shallow-repository']).trim() === 'true';
}

/** Whether `rev` names a commit that the repository has. */
export function hasCommit(repo: string, rev: string): boolean {
  try {
    git(repo, ['cat-file', '-e', `${rev}^{commit}`]);
    return true;
  } catch {
    return false;
  }
}

/**
 * Every blob that the commits after `base` up to `head` brought into the history (reachable from
 * head, not from base), at the path where git first meets it, deleted files included.
 */
export function blobsSince(repo: string, base: string, head = 'HEAD'): Sized[] {
  const objects = git(repo, ['rev-list', '--objects', `${base}..${head}`]).split('\n').filter((l) => l !== '');
  return batchCheck(repo, objects).filter((o) => o.type === 'blob').map((o) => ({ path: o.rest, size: o.size }));
}
