/**
 * Memory reward of each snapshot (docs/algorithm.md §4): P_mem − P_full, the answer
 * probabilities under the memory and the full context, through the `memoryRewards` kernel, with
 * the [decided] `memory.emptyKept` rule for rows where no answer token passes the threshold τ.
 */
import { memoryRewards } from '../kernels/answer-probability';
import type { RoundRewards, Snapshot } from '../contracts';
import type { MemoryOptions } from '../options';

/** Per snapshot, its memory reward and the two probabilities, from its full- and memory-context log-probs. */
export function snapshotMemoryRewards(
  snapshots: ReadonlyArray<Pick<Snapshot, 'targetIds' | 'ansMask'>>,
  full: readonly Float32Array[],
  memory: readonly Float32Array[],
  options: MemoryOptions,
): RoundRewards[] {
  const M = snapshots.length;
  if (M === 0) return [];
  // 2M × A rows: the M full contexts, then the M memory contexts, padded to the longest target.
  const A = snapshots.reduce((mx, s) => Math.max(mx, s.targetIds.length), 0);
  const logp = new Float32Array(2 * M * A);
  const mask = new Uint8Array(2 * M * A);
  for (let j = 0; j < 2 * M; j++) {
    logp.set(j < M ? full[j]! : memory[j - M]!, j * A);
    mask.set(snapshots[j % M]!.ansMask, j * A);
  }
  const res = memoryRewards(logp, mask, M, A, { threshold: options.threshold });
  if (options.emptyKept === 'all-tokens') {
    // [decided] alternative: rows where no answer token passes τ use the plain geometric mean.
    const tau = options.threshold;
    const plain = memoryRewards(logp, mask, M, A, { threshold: -Infinity });
    const noneKept = (row: number) => {
      for (let a = row * A; a < (row + 1) * A; a++) if (mask[a] !== 0 && logp[a]! > tau) return false;
      return true;
    };
    for (let i = 0; i < M; i++) {
      if (noneKept(i)) res.pFull[i] = plain.pFull[i]!;
      if (noneKept(M + i)) res.pMem[i] = plain.pMem[i]!;
      res.memRewards[i] = res.pMem[i]! - res.pFull[i]!;
    }
  }
  return snapshots.map((_, i) => ({ memReward: res.memRewards[i]!, pFull: res.pFull[i]!, pMem: res.pMem[i]! }));
}
