/**
 * The memory reward's two probes on a rollout (docs/algorithm.md §4), from a `batch.jsonl`:
 * how often P_full and P_mem are 0, split by whether the probe's context holds the gold (every
 * part of it, as text), and their histograms. It tells whether the model makes the
 * "minus P_full" half of the reward informative.
 *
 *   node dist-tools/tools/world/cli.js probes --batch out/rollout/batch.jsonl [--model models/mempo-tiny]
 */
import * as fs from 'fs';
import { holdsGold, loadTokenizer } from './samples';

interface BatchRound { start: number; memSpan: [number, number] | null; pFull: number | null; pMem: number | null; memReward: number | null }
interface BatchLine { golds: string[]; promptIds: number[]; responseIds: number[]; rounds: BatchRound[]; excluded: boolean }

export interface ProbeGroup { n: number; zero: number; zeroShare: number; mean: number }
export interface ProbeStats {
  snapshots: number;
  pFull: { all: ProbeGroup; goldInContext: ProbeGroup; goldAbsent: ProbeGroup; histogram: number[] };
  pMem: { all: ProbeGroup; goldInContext: ProbeGroup; goldAbsent: ProbeGroup; histogram: number[] };
  memReward: { mean: number; zeroShare: number; negativeShare: number; positiveShare: number };
}

const BINS = 10;

function group(xs: readonly number[]): ProbeGroup {
  const zero = xs.filter((x) => x === 0).length;
  const mean = xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;
  return { n: xs.length, zero, zeroShare: xs.length ? zero / xs.length : 0, mean };
}

/** Counts per bin of [0, 0.1), …, [0.9, 1]; a P of exactly 0 lands in the first. */
function histogram(xs: readonly number[]): number[] {
  const h = new Array<number>(BINS).fill(0);
  for (const x of xs) h[Math.min(BINS - 1, Math.floor(x * BINS))]!++;
  return h;
}

function probe(values: readonly number[], holds: readonly boolean[]) {
  return {
    all: group(values),
    goldInContext: group(values.filter((_, i) => holds[i])),
    goldAbsent: group(values.filter((_, i) => !holds[i])),
    histogram: histogram(values),
  };
}

export async function probeStats(batchPath: string, modelDir: string): Promise<ProbeStats> {
  const tok = await loadTokenizer(modelDir);
  const decode = (ids: number[]) => tok.decode(ids, { skip_special_tokens: false });
  const pFull: number[] = [];
  const pMem: number[] = [];
  const fullHolds: boolean[] = [];
  const memHolds: boolean[] = [];
  const rewards: number[] = [];
  for (const line of fs.readFileSync(batchPath, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    const t = JSON.parse(line) as BatchLine;
    if (t.excluded) continue;
    const gold = t.golds[0]!;
    for (const r of t.rounds) {
      if (r.pFull === null || r.pMem === null || r.memReward === null || r.memSpan === null) continue;
      pFull.push(r.pFull);
      pMem.push(r.pMem);
      rewards.push(r.memReward);
      fullHolds.push(holdsGold(decode([...t.promptIds, ...t.responseIds.slice(0, r.start)]), gold));
      memHolds.push(holdsGold(decode(t.responseIds.slice(r.start, r.memSpan[1])), gold));
    }
  }
  const n = rewards.length;
  const share = (f: (x: number) => boolean) => (n ? rewards.filter(f).length / n : 0);
  return {
    snapshots: n,
    pFull: probe(pFull, fullHolds),
    pMem: probe(pMem, memHolds),
    memReward: {
      mean: n ? rewards.reduce((a, b) => a + b, 0) / n : 0,
      zeroShare: share((x) => x === 0), negativeShare: share((x) => x < 0), positiveShare: share((x) => x > 0),
    },
  };
}
