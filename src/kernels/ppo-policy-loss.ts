import { AGG_MODE_CODES, KL_TYPE_CODES, type AggModeCode, type KlTypeCode } from './addon';
import { nativeAddon } from './backend';
import { checkOptions, checkSize, checkTyped, optEnum, optNumber, rangeError, typeError } from '../validate';
import { newResult } from './result';

export const AGG_MODES = ['token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean'] as const;
export type AggMode = (typeof AGG_MODES)[number];
export const KL_TYPES = ['k1', 'k2', 'k3', 'low_var_kl'] as const;
export type KlType = (typeof KL_TYPES)[number];

export interface PpoPolicyLossInput {
  /** Current policy log-probs, Float32Array[rows*cols]. */
  logp: Float32Array;
  /** Log-probs of the policy that sampled the tokens, Float32Array[rows*cols]. */
  oldLogp: Float32Array;
  /** Final per-token advantages, Float32Array[rows*cols]. */
  advantages: Float32Array;
  /** Response mask (tokens that count), Uint8Array[rows*cols]. */
  mask: Uint8Array;
  rows: number;
  cols: number;
  /** ratio is clipped to [1 − clipLow, 1 + clipHigh] (defaults 0.2 / 0.2). */
  clipLow?: number;
  clipHigh?: number;
  /** Dual clip bound for negative advantages (default 3.0, must be > 1; Infinity turns it off). */
  clipC?: number;
  aggMode?: AggMode;
  /** Reference policy log-probs: adds klCoef · KL(aggregated like the loss). */
  refLogp?: Float32Array;
  /** β (default 0.001, verl's kl_loss_coef). */
  klCoef?: number;
  /** 'k1', 'k2', 'k3' (= 'low_var_kl', the default). */
  klType?: KlType;
  /**
   * token-mean only: the mask tokens of the whole mini-batch this call is a micro-batch of; the
   * loss and grad divide by it instead of this call's tokens (docs/algorithm.md §6).
   */
  globalTokens?: number;
  /** seq-mean modes only: the mini-batch's sequences with at least one mask token (§6). */
  globalSequences?: number;
}

export interface PpoPolicyLossResult {
  /** Aggregated loss, including klCoef · kl when refLogp is given. */
  loss: number;
  /** d(loss)/d(logp), Float32Array[rows*cols]; 0 off the mask. */
  grad: Float32Array;
  /** Fraction of this call's mask tokens where the clipped term was taken (never global). */
  clipFrac: number;
  /** Token mean of oldLogp − logp over this call's mask (verl's ppo_kl; never global). */
  approxKl: number;
  /** Aggregated KL to the reference (present only with refLogp). */
  kl?: number;
}

const KNOWN = ['logp', 'oldLogp', 'advantages', 'mask', 'rows', 'cols', 'clipLow', 'clipHigh', 'clipC', 'aggMode', 'refLogp', 'klCoef', 'klType', 'globalTokens', 'globalSequences'];

/**
 * PPO clipped surrogate with verl's dual clip and loss aggregation modes (docs/algorithm.md §6):
 * loss_t = max(−A·ratio, −A·clip(ratio, 1−clipLow, 1+clipHigh)), and for A < 0 at most −A·clipC;
 * ratio = exp(clamp(logp − oldLogp, −20, 20)). Token mean over the mask, or mean over rows
 * with at least one mask token of the row's token sum / token mean. An all-zero mask gives 0.
 * globalTokens / globalSequences replace this call's count, so micro-batch gradients sum to the
 * mini-batch's (verl's agg_loss with global normalisers).
 */
export function ppoPolicyLoss(input: PpoPolicyLossInput): PpoPolicyLossResult {
  if (typeof input !== 'object' || input === null) throw typeError('an object { logp, oldLogp, advantages, mask, rows, cols, … }', 'input', input);
  const o = checkOptions(input, 'input', KNOWN);
  const R = checkSize(o.rows, 'rows', true);
  const C = checkSize(o.cols, 'cols');
  const n = R * C;
  const shape = `rows*cols = ${n}`;
  const logp = checkTyped(o.logp, Float32Array, 'logp', n, shape);
  const oldLogp = checkTyped(o.oldLogp, Float32Array, 'oldLogp', n, shape);
  const adv = checkTyped(o.advantages, Float32Array, 'advantages', n, shape);
  const mask = checkTyped(o.mask, Uint8Array, 'mask', n, shape);
  const clipLow = optNumber(o, 'clipLow', 'input', 0.2, (v) => v >= 0 && v <= 1, 'a number in [0, 1]');
  const clipHigh = optNumber(o, 'clipHigh', 'input', 0.2, (v) => v >= 0 && v < Infinity, 'a finite number >= 0');
  const clipC = optNumber(o, 'clipC', 'input', 3, (v) => v > 1, 'a number > 1 (Infinity disables the dual clip)');
  const aggMode = optEnum(o, 'aggMode', 'input', AGG_MODES, 'token-mean');
  const ref = o.refLogp === undefined ? null : checkTyped(o.refLogp, Float32Array, 'refLogp', n, shape);
  const klCoef = optNumber(o, 'klCoef', 'input', 0.001, (v) => Number.isFinite(v) && v >= 0, 'a finite number >= 0');
  const klName = optEnum(o, 'klType', 'input', KL_TYPES, 'low_var_kl');
  const klType = ref === null ? KL_TYPE_CODES.none : KL_TYPE_CODES[klName];
  const agg = AGG_MODE_CODES[aggMode];
  const norm = globalNorm(o, aggMode, mask, R, C);

  const addon = nativeAddon();
  const r = addon
    ? addon.ppoPolicyLoss(logp, oldLogp, adv, mask, R, C, clipLow, clipHigh, clipC, agg, ref, klCoef, klType, norm)
    : ppoPolicyLossJs(logp, oldLogp, adv, mask, R, C, clipLow, clipHigh, clipC, agg, ref, klCoef, klType, norm);
  const result: PpoPolicyLossResult = { loss: r.loss, grad: r.grad, clipFrac: r.clipFrac, approxKl: r.approxKl };
  if (ref !== null) result.kl = r.kl;
  return result;
}

/**
 * The validated global normaliser for aggMode (0: none given). The field of the other mode is a
 * user bug, not ignored; a count below this call's own cannot hold a micro-batch (§6).
 */
function globalNorm(o: Record<string, unknown>, aggMode: AggMode, mask: Uint8Array, R: number, C: number): number {
  const what = 'a positive integer';
  const check = (v: number): boolean => Number.isSafeInteger(v) && v > 0;
  const tokens = optNumber(o, 'globalTokens', 'input', 0, check, what);
  const sequences = optNumber(o, 'globalSequences', 'input', 0, check, what);
  const tokenMean = aggMode === 'token-mean';
  if (tokenMean ? sequences > 0 : tokens > 0) {
    const [given, wanted] = tokenMean ? ['globalSequences', 'globalTokens'] : ['globalTokens', 'globalSequences'];
    throw new RangeError(`input.${given} does not apply to aggMode '${aggMode}'; it takes input.${wanted}`);
  }
  const norm = tokenMean ? tokens : sequences;
  if (norm === 0) return 0;
  let own = 0;
  for (let r = 0; r < R; r++) {
    let c = 0;
    for (let i = r * C; i < (r + 1) * C; i++) if (mask[i] !== 0) c++;
    own += tokenMean ? c : c > 0 ? 1 : 0;
  }
  if (norm < own) {
    const key = tokenMean ? 'globalTokens' : 'globalSequences';
    throw rangeError(`${what} >= this call's own count (${own})`, `input.${key}`, norm);
  }
  return norm;
}

/** Per-token aggregation weights: loss = Σ w_t · loss_t over mask tokens; norm > 0 replaces the count. */
function aggWeights(mask: Uint8Array, R: number, C: number, agg: AggModeCode, norm: number): { rowWeight: Float64Array; tokens: number } {
  const rowWeight = new Float64Array(R);
  let tokens = 0;
  let liveRows = 0;
  const perRow = new Float64Array(R);
  for (let r = 0; r < R; r++) {
    let c = 0;
    for (let i = r * C; i < (r + 1) * C; i++) if (mask[i] !== 0) c++;
    perRow[r] = c;
    tokens += c;
    if (c > 0) liveRows++;
  }
  const tokenMean = agg === AGG_MODE_CODES['token-mean'];
  const n = norm > 0 ? norm : tokenMean ? tokens : liveRows;
  for (let r = 0; r < R; r++) {
    if (perRow[r] === 0) continue;
    rowWeight[r] = agg === AGG_MODE_CODES['seq-mean-token-mean'] ? 1 / (n * perRow[r]!) : 1 / n;
  }
  return { rowWeight, tokens };
}

/** KL to the reference for one token, `diff = logp - refLogp`: [value, d value / d logp] (k3 clamped like verl). */
function klTerm(diff: number, klType: KlTypeCode): [number, number] {
  if (klType === KL_TYPE_CODES.k1) return [diff, 1];
  if (klType === KL_TYPE_CODES.k2) return [0.5 * diff * diff, diff];
  const kRaw = -diff;
  const k = kRaw < -20 ? -20 : kRaw > 20 ? 20 : kRaw;
  const e = Math.exp(k);
  const v = e - k - 1;
  return [v > 10 ? 10 : v, v > 10 || k !== kRaw ? 0 : 1 - e];
}

function ppoPolicyLossJs(
  logp: Float32Array,
  oldLogp: Float32Array,
  adv: Float32Array,
  mask: Uint8Array,
  R: number,
  C: number,
  clipLow: number,
  clipHigh: number,
  clipC: number,
  agg: AggModeCode,
  ref: Float32Array | null,
  klCoef: number,
  klType: KlTypeCode,
  norm: number,
): { loss: number; grad: Float32Array; clipFrac: number; approxKl: number; kl: number } {
  const { rowWeight, tokens } = aggWeights(mask, R, C, agg, norm);
  const grad = newResult(R * C);
  let pgLoss = 0;
  let klLoss = 0;
  let clipped = 0;
  let negKlSum = 0;
  const lo = 1 - clipLow;
  const hi = 1 + clipHigh;
  for (let r = 0; r < R; r++) {
    const w = rowWeight[r]!;
    for (let i = r * C; i < (r + 1) * C; i++) {
      if (mask[i] === 0) continue;
      const A = adv[i]!;
      const raw = logp[i]! - oldLogp[i]!;
      const d = raw < -20 ? -20 : raw > 20 ? 20 : raw;
      const ratio = Math.exp(d);
      const dRatio = raw === d ? ratio : 0;
      negKlSum += d;
      const pg1 = -A * ratio;
      const inside = ratio >= lo && ratio <= hi;
      const pg2 = -A * (ratio < lo ? lo : ratio > hi ? hi : ratio);
      let l = pg1;
      let g = -A * dRatio;
      if (pg2 > pg1) {
        clipped++;
        l = pg2;
        g = inside ? g : 0;
      }
      if (A < 0) {
        const pg3 = -A * clipC;
        if (l > pg3) {
          l = pg3;
          g = 0;
        }
      }
      pgLoss += w * l;
      let gk = 0;
      if (klType !== KL_TYPE_CODES.none) {
        const [kld, dk] = klTerm(logp[i]! - ref![i]!, klType);
        klLoss += w * kld;
        gk = dk;
      }
      grad[i] = w * (g + klCoef * gk);
    }
  }
  return {
    loss: pgLoss + klCoef * klLoss,
    grad,
    clipFrac: tokens === 0 ? 0 : clipped / tokens,
    approxKl: tokens === 0 ? 0 : (0 - negKlSum) / tokens,
    kl: klLoss,
  };
}
