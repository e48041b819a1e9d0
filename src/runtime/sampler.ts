/**
 * Sampling one token from one row of logits (a view into the model's output, never a copy of
 * the whole tensor): temperature, top-k, top-p (nucleus), greedy when temperature is 0.
 *
 * Top-k and top-p avoid sorting the whole vocabulary: they keep the tokens whose probability is at
 * least a threshold that is lowered until the kept set provably contains the answer (at least k
 * tokens, or at least top_p of the mass), then sort only those. The result equals sorting the
 * whole vocabulary (ties broken by the lower id).
 */
import type { Rng } from './rng';

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
  let max = -Infinity;
  let argmax = 0;
  for (let i = 0; i < V; i++) {
    const v = row[i]!;
    if (v > max) {
      max = v;
      argmax = i;
    }
  }
  if (!Number.isFinite(max)) {
    throw new Error(`the model returned ${max} as the largest logit (non-finite logits)`);
  }
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
    const u = rng() * sum;
    let acc = 0;
    token = V - 1;
    for (let i = 0; i < V; i++) {
      acc += probs[i]!;
      if (acc > u) {
        token = i;
        break;
      }
    }
    // Guard against rounding leaving a zero-weight token selected.
    if (probs[token]! === 0) token = argmax;
    sampledLogprob = (row[token]! - max) * invT - Math.log(sum);
  } else {
    const k = params.topK > 0 ? Math.min(params.topK, V) : V;
    const needMass = params.topP * sum;
    // Candidate set {i : w_i >= t}; lower t until it holds >= k tokens or >= topP of the mass.
    let t = 1 / 64;
    let count = 0;
    let mass = 0;
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
      if (count >= k || (params.topP < 1 && mass >= needMass) || t === 0) break;
      t = t < 1e-30 ? 0 : t / 256;
    }
    if (scratch.idx.length < count) scratch.idx = new Int32Array(Math.max(count, scratch.idx.length * 2));
    const idx = scratch.idx;
    let n = 0;
    for (let i = 0; i < V; i++) if (probs[i]! >= t) idx[n++] = i;
    const cand = idx.subarray(0, n);
    cand.sort((a, b) => probs[b]! - probs[a]! || a - b);
    let keep = Math.min(k, n);
    let keptMass = 0;
    for (let j = 0; j < keep; j++) keptMass += probs[cand[j]!]!;
    if (params.topP < 1) {
      const limit = params.topP * keptMass;
      let acc = 0;
      for (let j = 0; j < keep; j++) {
        acc += probs[cand[j]!]!;
        if (acc >= limit) {
          keep = j + 1;
          break;
        }
      }
      keptMass = 0;
      for (let j = 0; j < keep; j++) keptMass += probs[cand[j]!]!;
    }
    const u = rng() * keptMass;
    let acc = 0;
    token = cand[keep - 1]!;
    for (let j = 0; j < keep; j++) {
      acc += probs[cand[j]!]!;
      if (acc > u) {
        token = cand[j]!;
        break;
      }
    }
    sampledLogprob = (row[token]! - max) * invT - Math.log(keptMass);
  }
  let logprob: number;
  if (params.logprobs === 'sampling') logprob = sampledLogprob;
  else if (params.logprobs === 'temperature' || T === 1) logprob = (row[token]! - max) * invT - Math.log(sum);
  else logprob = rawLogprob(row, token, max);
  return { token, logprob };
}

/** log softmax(row)[token] with the row maximum already known. */
export function rawLogprob(row: Float32Array, token: number, max: number): number {
  let sum = 0;
  for (let i = 0; i < row.length; i++) sum += Math.exp(row[i]! - max);
  return row[token]! - max - Math.log(sum);
}
