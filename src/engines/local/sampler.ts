/**
 * Sampling one token from one row of logits (a view into the model's output, never a copy of
 * the whole tensor): temperature, top-k, top-p (nucleus), greedy when temperature is 0.
 *
 * Top-k and top-p never sort the vocabulary: a first pass keeps the tokens whose weight is at
 * least a threshold, lowered until the kept set provably contains the answer (at least k tokens,
 * or at least top_p of the mass); then a three-way quickselect (by count for top-k, by mass for
 * top-p) finds the kept set in expected linear time. The kept set equals the one a full sort
 * gives, except for which of several exactly tied weights at its edge are kept.
 */
import type { Rng } from '../../rng';

export interface SamplingParams {
  /** 0 means greedy (argmax). Default 1. */
  temperature: number;
  /** Nucleus mass in (0, 1]; 1 disables. Applied after top-k, on the renormalised top-k mass. */
  topP: number;
  /** Keep the k most likely tokens; 0 disables. */
  topK: number;
  /**
   * Which log-prob to report for the sampled token: `'temperature'` (default) is
   * log softmax(logits / T), the full tempered distribution before top-k/top-p truncation, the
   * convention of verl's old log-probs; `'raw'` is log softmax(logits) (temperature 1);
   * `'sampling'` is the log-prob under the truncated, renormalised distribution actually sampled.
   */
  logprobs: 'temperature' | 'raw' | 'sampling';
}

export interface SampleResult {
  token: number;
  logprob: number;
}

/** Scratch buffers reused across calls (one per generation, sized to the vocabulary). */
export class SamplerScratch {
  readonly probs: Float32Array;
  idx: Int32Array;
  constructor(vocab: number) {
    this.probs = new Float32Array(vocab);
    this.idx = new Int32Array(Math.min(vocab, 1024));
  }
}

export function sampleRow(row: Float32Array, params: SamplingParams, rng: Rng, scratch: SamplerScratch): SampleResult {
  const V = row.length;
  const { max, argmax } = rowMax(row);
  const T = params.temperature;
  if (T === 0) {
    return { token: argmax, logprob: params.logprobs === 'sampling' ? 0 : rawLogprob(row, argmax, max) };
  }
  const probs = scratch.probs;
  const invT = 1 / T;
  let sum = 0;
  for (let i = 0; i < V; i++) {
    const e = Math.exp((row[i]! - max) * invT);
    probs[i] = e;
    sum += e;
  }
  // probs holds unnormalised weights w_i = exp((l_i - max)/T), max weight 1, total `sum`.
  const truncate = (params.topK > 0 && params.topK < V) || params.topP < 1;
  let token: number;
  let sampledLogprob: number;
  if (!truncate) {
    token = sampleFull(probs, V, sum, rng, argmax);
    sampledLogprob = (row[token]! - max) * invT - Math.log(sum);
  } else {
    const kept = sampleTruncated(probs, V, sum, params, rng, scratch);
    token = kept.token;
    sampledLogprob = (row[token]! - max) * invT - Math.log(kept.mass);
  }
  let logprob: number;
  if (params.logprobs === 'sampling') logprob = sampledLogprob;
  else if (params.logprobs === 'temperature' || T === 1) logprob = (row[token]! - max) * invT - Math.log(sum);
  else logprob = rawLogprob(row, token, max);
  return { token, logprob };
}

/** The largest logit and its id; a NaN anywhere in the row (`v > max` skips it, so the softmax would be NaN) or a non-finite maximum is an error. */
function rowMax(row: Float32Array): { max: number; argmax: number } {
  let max = -Infinity;
  let argmax = 0;
  for (let i = 0; i < row.length; i++) {
    const v = row[i]!;
    if (v > max) {
      max = v;
      argmax = i;
    } else if (v !== v) {
      throw new Error(`the model returned NaN as the logit of token ${i} (non-finite logits)`);
    }
  }
  if (!Number.isFinite(max)) {
    throw new Error(`the model returned ${max} as the largest logit (non-finite logits)`);
  }
  return { max, argmax };
}

/** Draws from the whole vocabulary by the weights in probs[0, V) (total `sum`). */
function sampleFull(probs: Float32Array, V: number, sum: number, rng: Rng, argmax: number): number {
  const u = rng() * sum;
  let acc = 0;
  let token = V - 1;
  for (let i = 0; i < V; i++) {
    acc += probs[i]!;
    if (acc > u) {
      token = i;
      break;
    }
  }
  // Guard against rounding leaving a zero-weight token selected.
  return probs[token]! === 0 ? argmax : token;
}

/**
 * Writes the candidates {i : w_i >= t} to scratch.idx, t lowered until they hold >= k tokens or
 * >= topP of the mass; returns how many.
 */
function candidates(probs: Float32Array, V: number, k: number, needMass: number, topP: number, scratch: SamplerScratch): number {
  let t = 1 / 64;
  let count: number;
  let mass: number;
  for (;;) {
    count = 0;
    mass = 0;
    for (let i = 0; i < V; i++) {
      const w = probs[i]!;
      if (w >= t) {
        count++;
        mass += w;
      }
    }
    if (count >= k || (topP < 1 && mass >= needMass) || t === 0) break;
    t = t < 1e-30 ? 0 : t / 256;
  }
  if (scratch.idx.length < count) scratch.idx = new Int32Array(Math.max(count, scratch.idx.length * 2));
  const idx = scratch.idx;
  let n = 0;
  for (let i = 0; i < V; i++) if (probs[i]! >= t) idx[n++] = i;
  return n;
}

/** Top-k then top-p: draws from the kept tokens; returns the token and the kept mass. */
function sampleTruncated(
  probs: Float32Array,
  V: number,
  sum: number,
  params: SamplingParams,
  rng: Rng,
  scratch: SamplerScratch,
): { token: number; mass: number } {
  const k = params.topK > 0 ? Math.min(params.topK, V) : V;
  const n = candidates(probs, V, k, params.topP * sum, params.topP, scratch);
  const idx = scratch.idx;
  // Quickselect instead of sorting: the kept tokens end up (unordered) in idx[0, keep).
  let keep = k < n ? selectTopCount(idx, n, k, probs) : n;
  let keptMass = 0;
  for (let j = 0; j < keep; j++) keptMass += probs[idx[j]!]!;
  if (params.topP < 1) {
    keep = selectTopMass(idx, keep, params.topP * keptMass, probs);
    keptMass = 0;
    for (let j = 0; j < keep; j++) keptMass += probs[idx[j]!]!;
  }
  const u = rng() * keptMass;
  let acc = 0;
  let token = idx[keep - 1]!;
  for (let j = 0; j < keep; j++) {
    acc += probs[idx[j]!]!;
    if (acc > u) {
      token = idx[j]!;
      break;
    }
  }
  return { token, mass: keptMass };
}

/** log softmax(row)[token] with the row maximum already known. */
export function rawLogprob(row: Float32Array, token: number, max: number): number {
  let sum = 0;
  for (let i = 0; i < row.length; i++) sum += Math.exp(row[i]! - max);
  return row[token]! - max - Math.log(sum);
}

/**
 * Pivot: the median of the weights at three pseudo-random positions of idx[lo, hi). The positions
 * come from a generator reset at every selection, so the arrangement (and hence which token a
 * given random draw picks) depends only on the row.
 */
let pivotState = 1;
function pivotValue(idx: Int32Array, lo: number, hi: number, w: Float32Array): number {
  const n = hi - lo;
  const pick = (): number => {
    pivotState = (Math.imul(pivotState, 1664525) + 1013904223) >>> 0;
    return w[idx[lo + (pivotState % n)]!]!;
  };
  const x = pick();
  const y = pick();
  const z = pick();
  return x < y ? (y < z ? y : x < z ? z : x) : x < z ? x : y < z ? z : y;
}

/**
 * Three-way partition of idx[lo, hi) by weight around `p`: [> p][== p][< p]. Returns the ends
 * of the first two parts and their masses.
 */
function partition(idx: Int32Array, lo: number, hi: number, p: number, w: Float32Array): [number, number, number, number] {
  let gt = lo;
  let i = lo;
  let lt = hi;
  let massGt = 0;
  let massEq = 0;
  while (i < lt) {
    const id = idx[i]!;
    const v = w[id]!;
    if (v > p) {
      idx[i] = idx[gt]!;
      idx[gt] = id;
      gt++;
      i++;
      massGt += v;
    } else if (v < p) {
      lt--;
      idx[i] = idx[lt]!;
      idx[lt] = id;
    } else {
      i++;
      massEq += v;
    }
  }
  return [gt, lt, massGt, massEq];
}

/** Rearranges idx[0, n) so that idx[0, k) hold k largest weights (ties kept in a deterministic order). */
export function selectTopCount(idx: Int32Array, n: number, k: number, w: Float32Array): number {
  pivotState = 1;
  let lo = 0;
  let hi = n;
  while (hi - lo > 1) {
    const [gt, eq] = partition(idx, lo, hi, pivotValue(idx, lo, hi, w), w);
    if (k <= gt) hi = gt;
    else if (k <= eq) return k;
    else lo = eq;
  }
  return k;
}

/**
 * Rearranges idx[0, n) so that idx[0, c) is the smallest set of largest weights whose mass is at
 * least `mass` (the top-p nucleus), and returns c (at least 1).
 */
export function selectTopMass(idx: Int32Array, n: number, mass: number, w: Float32Array): number {
  pivotState = 1;
  let lo = 0;
  let hi = n;
  let acc = 0;
  while (hi > lo) {
    const p = pivotValue(idx, lo, hi, w);
    const [gt, eq, massGt, massEq] = partition(idx, lo, hi, p, w);
    if (gt > lo && acc + massGt >= mass) {
      hi = gt;
    } else if (acc + massGt + massEq >= mass || eq === hi) {
      const need = p > 0 ? Math.ceil((mass - acc - massGt) / p) : eq - gt;
      return Math.max(1, gt + Math.min(eq - gt, Math.max(1, need)));
    } else {
      acc += massGt + massEq;
      lo = eq;
    }
  }
  return Math.max(1, lo);
}
