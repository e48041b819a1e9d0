/**
 * `npm run bench:peer` (bench/peer.mjs + bench/peer.py): says why and exits 0 when no Python with
 * torch is found, and, where torch is installed, runs a small case on both sides and finds the
 * outputs equal (its equality check compares files written by two processes, so a broken
 * exchange shows up as NOT EQUAL or a missing file). Uses dist/ (npm run build:ts).
 */
import { execFileSync } from 'child_process';
import * as path from 'path';
import { EXPECTED_BACKEND } from '../helpers';

const root = path.resolve(__dirname, '..', '..');
const script = path.join(root, 'bench', 'peer.mjs');

function hasTorch(): boolean {
  try {
    execFileSync(process.env.MEMPO_PYTHON ?? '/usr/bin/python3', ['-c', 'import torch, numpy'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const nativeIt = EXPECTED_BACKEND === 'native' ? it : it.skip;

describe('bench:peer', () => {
  nativeIt('is skipped, saying why, without torch', () => {
    const out = execFileSync(process.execPath, [script, '--json'], { env: { ...process.env, MEMPO_PYTHON: '/nonexistent/python3' }, encoding: 'utf8' });
    expect(JSON.parse(out).skipped).toMatch(/^bench:peer skipped: no Python with torch and numpy \(\/nonexistent\/python3: .+\)\. Install torch/);
  });

  (EXPECTED_BACKEND === 'native' && !process.env.MEMPO_ASAN && hasTorch() ? it : it.skip)('finds mempo and torch equal on small cases, with a ratio for each', () => {
    const out = execFileSync(process.execPath, [script, '--json', '--only', '16', '--quick', '--rounds', '1', '--reps', '2', '--threads', '1'], {
      encoding: 'utf8',
      timeout: 120000,
    });
    type Row = { case: string; equal: boolean; ratio: number; errors: Record<string, number>; mempoPath: string; mempoAllocMs?: number; outEqualsAlloc?: boolean };
    const r = JSON.parse(out) as { results: Row[] };
    expect(r.results.map((x) => x.case)).toEqual(['gather R=16 V=151936', 'gather R=16 V=3072', 'grpo B=16 T=64', 'ppo 16x64']);
    for (const x of r.results) {
      expect(x.equal).toBe(true);
      expect(x.ratio).toBeGreaterThan(0);
      expect(Object.keys(x.errors).length).toBeGreaterThan(0);
      // The [B, T] advantages are timed into reused arrays (a trainer's out) and into new ones, same bits.
      const advantage = x.case.startsWith('grpo');
      expect(x.mempoPath).toBe(advantage ? 'out' : 'alloc');
      if (advantage) {
        expect(x.outEqualsAlloc).toBe(true);
        expect(x.mempoAllocMs).toBeGreaterThan(0);
      }
    }
  });
});
