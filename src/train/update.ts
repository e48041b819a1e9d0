/**
 * The policy update of one step (docs/algorithm.md §9, loss §6): old log-probs (learner or
 * sampler), reference log-probs for the KL term, then `ppoEpochs` passes over `miniBatches`
 * shuffled mini-batches; each mini-batch is split into micro-batches that the learner forwards,
 * `ppoPolicyLoss` (native) turns into per-token gradients with the mini-batch's global
 * normaliser, and the learner back-propagates; one optimiser step per mini-batch.
 */
import type { Learner } from '../contracts';
import { ppoPolicyLoss } from '../kernels/ppo-policy-loss';
import { createRng } from '../rng';
import { timed } from '../util';
import { microBatches, padRows, type TrainRow } from './samples';
import type { TrainOptions } from './options';

export interface UpdateStats {
  /** Mean over the step's optimiser updates of the mini-batch loss (KL term included). */
  loss: number;
  clipFrac: number;
  approxKl: number;
  /** KL to the reference (null when klCoef is 0). */
  klRef: number | null;
  gradNorm: number;
  updates: number;
  /** Mask tokens trained on (per epoch). */
  tokens: number;
  ms: { oldLogp: number; refLogp: number; forward: number; backward: number; loss: number; optim: number };
}

interface Row extends TrainRow {
  /** null until known: the first update's rows take theirs from its own forward (the weights have not moved yet). */
  oldLogp: Float32Array | null;
  refLogp: Float32Array | null;
}

/** Log-probs of every row under `policy`, in micro-batches, without a graph. */
async function logpOf(learner: Learner, rows: readonly TrainRow[], policy: 'current' | 'reference', maxTokens: number): Promise<Float32Array[]> {
  const out: Float32Array[] = [];
  for (const mb of microBatches(rows, maxTokens)) out.push(...(await learner.forward(mb.map((r) => r.sample), { policy })));
  return out;
}

/** Seeded Fisher-Yates shuffle, then `k` near-equal consecutive parts. */
function split<T>(rows: readonly T[], k: number, seed: number, epoch: number): T[][] {
  const order = rows.slice();
  const rnd = createRng(seed, epoch);
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  const parts: T[][] = [];
  const n = Math.min(k, order.length);
  for (let p = 0; p < n; p++) parts.push(order.slice(Math.floor((p * order.length) / n), Math.floor(((p + 1) * order.length) / n)));
  return parts;
}

/** Forward, loss and backward of one micro-batch; returns its loss (already globally normalised) and token-weighted stats. */
async function microStep(learner: Learner, mb: readonly Row[], o: TrainOptions, global: { tokens: number; sequences: number }, ms: Record<string, number>) {
  const logp = await timed(ms, 'forward', () => learner.forward(mb.map((r) => r.sample), { grad: true }));
  const cols = Math.max(...mb.map((r) => r.mask.length));
  const f32 = (n: number) => new Float32Array(n);
  const t = performance.now();
  const useKl = o.loss.klCoef > 0;
  mb.forEach((r, i) => { r.oldLogp ??= logp[i]!.slice(); });
  const res = ppoPolicyLoss({
    logp: padRows(logp, cols, f32),
    oldLogp: padRows(mb.map((r) => r.oldLogp!), cols, f32),
    advantages: padRows(mb.map((r) => r.advantages), cols, f32),
    mask: padRows(mb.map((r) => r.mask), cols, (n) => new Uint8Array(n)),
    rows: mb.length,
    cols,
    clipLow: o.loss.clipLow,
    clipHigh: o.loss.clipHigh,
    clipC: o.loss.clipC,
    aggMode: o.loss.aggMode,
    ...(useKl ? { refLogp: padRows(mb.map((r) => r.refLogp!), cols, f32), klCoef: o.loss.klCoef, klType: o.loss.klType } : {}),
    ...(o.loss.aggMode === 'token-mean' ? { globalTokens: global.tokens } : { globalSequences: global.sequences }),
  });
  ms['loss'] = (ms['loss'] ?? 0) + performance.now() - t;
  const grads = mb.map((r, i) => res.grad.slice(i * cols, i * cols + r.mask.length));
  await timed(ms, 'backward', () => learner.backward(grads));
  const tokens = mb.reduce((a, r) => a + r.tokens, 0);
  return { loss: res.loss, kl: res.kl ?? 0, clip: res.clipFrac * tokens, approx: res.approxKl * tokens, tokens };
}

export async function policyUpdate(learner: Learner, trainRows: readonly TrainRow[], o: TrainOptions, seed: number): Promise<UpdateStats> {
  const ms: Record<string, number> = { oldLogp: 0, refLogp: 0, forward: 0, backward: 0, loss: 0, optim: 0 };
  const stats: UpdateStats = { loss: 0, clipFrac: 0, approxKl: 0, klRef: null, gradNorm: 0, updates: 0, tokens: 0, ms: ms as UpdateStats['ms'] };
  if (trainRows.length === 0) return stats;
  const ref = o.loss.klCoef > 0 ? await timed(ms, 'refLogp', () => logpOf(learner, trainRows, 'reference', o.microBatchTokens)) : null;
  // The sampler's log-probs only when every row has them (a generator may return none).
  const sampler = o.oldLogp === 'sampler' && trainRows.every((r) => r.samplerLogp !== null);
  const rows: Row[] = trainRows.map((r, i) => ({ ...r, oldLogp: sampler ? r.samplerLogp : null, refLogp: ref === null ? null : ref[i]! }));
  // Recomputed old log-probs (§9 [decided]): the first update's rows get theirs from their own
  // forward, which runs on the same weights; only the other rows need a forward of their own.
  const epoch0 = split(rows, o.miniBatches, seed, 0);
  const firstUpdate = new Set(epoch0[0]);
  const need = rows.filter((r) => r.oldLogp === null && !firstUpdate.has(r));
  if (need.length > 0) {
    const lp = await timed(ms, 'oldLogp', () => logpOf(learner, need, 'current', o.microBatchTokens));
    need.forEach((r, i) => { r.oldLogp = lp[i]!; });
  }
  let clip = 0;
  let approx = 0;
  let seen = 0;
  let kl = 0;
  for (let epoch = 0; epoch < o.ppoEpochs; epoch++) {
    for (const mini of epoch === 0 ? epoch0 : split(rows, o.miniBatches, seed, epoch)) {
      const global = { tokens: mini.reduce((a, r) => a + r.tokens, 0), sequences: mini.length };
      let loss = 0;
      for (const mb of microBatches(mini, o.microBatchTokens)) {
        const m = await microStep(learner, mb, o, global, ms);
        loss += m.loss;
        kl += m.kl;
        clip += m.clip;
        approx += m.approx;
        seen += m.tokens;
      }
      const { gradNorm } = await timed(ms, 'optim', () => learner.optimStep(o.optim));
      stats.loss += loss;
      stats.gradNorm += gradNorm;
      stats.updates++;
    }
  }
  stats.loss /= stats.updates;
  stats.gradNorm /= stats.updates;
  stats.clipFrac = clip / seen;
  stats.approxKl = approx / seen;
  stats.klRef = ref === null ? null : kl / stats.updates;
  stats.tokens = seen / o.ppoEpochs;
  return stats;
}
