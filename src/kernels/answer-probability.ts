import { nativeAddon } from './backend';
import { checkOptions, checkSize, checkTyped, optNumber, rangeError, Shown, typeError } from '../validate';
import { newResult } from './result';

export interface AnswerProbabilityOptions {
  /** τ: answer tokens with logp ≤ τ are dropped (default ln 0.5; −Infinity keeps all finite ones). */
  threshold?: number;
}

function readThreshold(opts: unknown): number {
  const o = checkOptions(opts, 'opts', ['threshold']);
  return optNumber(o, 'threshold', 'opts', Math.log(0.5), (v) => v < Infinity, 'a number below Infinity (−Infinity allowed)');
}

/**
 * docs/algorithm.md §4: P = exp(mean of logp[t] over answer tokens with logp[t] > τ); 0 when none is kept.
 * logp Float32Array[R*A], ansMask Uint8Array[R*A] → Float32Array[R]. NaN log-probs are never kept.
 */
export function answerProbability(
  logp: Float32Array,
  ansMask: Uint8Array,
  rows: number,
  cols: number,
  opts?: AnswerProbabilityOptions,
): Float32Array {
  const R = checkSize(rows, 'rows', true);
  const A = checkSize(cols, 'cols');
  checkTyped(logp, Float32Array, 'logp', R * A, `rows*cols = ${R * A}`);
  checkTyped(ansMask, Uint8Array, 'ansMask', R * A, `rows*cols = ${R * A}`);
  const tau = readThreshold(opts);
  const addon = nativeAddon();
  const out = addon ? addon.answerProbability(logp, ansMask, R, A, tau) : answerProbabilityJs(logp, ansMask, R, A, tau);
  for (let r = 0; r < R; r++) if (out[r] === Infinity) throw infiniteP(logp, ansMask, r, A, tau);
  return out;
}

/**
 * Why P of row r came out infinite (docs/algorithm.md §4: P is a probability): a kept +Infinity
 * log-prob, or kept log-probs whose mean overflows float32 under exp. Both backends check their
 * result the same way.
 */
function infiniteP(logp: Float32Array, ansMask: Uint8Array, r: number, A: number, tau: number): RangeError {
  let sum = 0;
  let kept = 0;
  for (let a = r * A; a < (r + 1) * A; a++) {
    if (ansMask[a] === 0 || !(logp[a]! > tau)) continue;
    if (logp[a] === Infinity) return rangeError('a log-probability below +Infinity', `logp[${a}]`, Infinity);
    sum += logp[a]!;
    kept++;
  }
  return rangeError(
    'answer log-probabilities whose mean keeps P = exp(mean) within float32 (a mean of at most about 88.7)',
    `logp (row ${r})`,
    new Shown(`a mean of ${kept === 0 ? 0 : sum / kept} over ${kept} kept tokens`),
  );
}

function answerProbabilityJs(logp: Float32Array, ansMask: Uint8Array, R: number, A: number, tau: number): Float32Array {
  const out = newResult(R);
  for (let r = 0; r < R; r++) {
    let sum = 0;
    let kept = 0;
    for (let a = r * A; a < (r + 1) * A; a++) {
      const v = logp[a]!;
      if (ansMask[a] !== 0 && v > tau) {
        sum += v;
        kept++;
      }
    }
    out[r] = kept === 0 ? 0 : Math.exp(sum / kept);
  }
  return out;
}

export interface MemoryRewards {
  /** P_mem − P_full per snapshot, Float32Array[M]. */
  memRewards: Float32Array;
  pFull: Float32Array;
  pMem: Float32Array;
}

/**
 * Memory rewards of M snapshots from one 2M-row scoring result laid out as docs/algorithm.md §4 says: rows
 * 0..M−1 are the full-context items, rows M..2M−1 the memory-context items, same order.
 */
export function memoryRewards(
  logp: Float32Array,
  ansMask: Uint8Array,
  snapshots: number,
  cols: number,
  opts?: AnswerProbabilityOptions,
): MemoryRewards {
  const M = checkSize(snapshots, 'snapshots', true);
  // 2*snapshots rows must stay a valid row count: name the argument the caller passed.
  if (2 * M > 2 ** 31 - 1) throw rangeError('a non-negative integer below 2^30 (2*snapshots rows)', 'snapshots', snapshots);
  if (!(logp instanceof Float32Array)) throw typeError(`Float32Array of length 2*snapshots*cols`, 'logp', logp);
  const p = answerProbability(logp, ansMask, 2 * M, cols, opts);
  const pFull = p.slice(0, M);
  const pMem = p.slice(M);
  const memRewards = new Float32Array(M);
  for (let m = 0; m < M; m++) memRewards[m] = pMem[m]! - pFull[m]!;
  return { memRewards, pFull, pMem };
}

