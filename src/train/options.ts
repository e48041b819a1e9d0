/**
 * Options of the training loop (docs/algorithm.md §9) and of its policy update (§6), typed and
 * validated like the pipeline's (src/options.ts); the rollout, reward and advantage options stay
 * the pipeline's.
 */
import { z } from 'zod';
import { AGG_MODES, KL_TYPES } from '../kernels/ppo-policy-loss';
import { parseOptions } from '../options';

const posInt = () => z.number().int().positive();
const nonNegInt = () => z.number().int().nonnegative();
const nonNeg = () => z.number().nonnegative().finite();

export const lossSchema = z.object({
  clipLow: z.number().min(0).max(1).default(0.2),
  clipHigh: nonNeg().default(0.2),
  /** Dual clip for negative advantages (verl's clip_ratio_c). */
  clipC: z.number().gt(1).default(3),
  aggMode: z.enum(AGG_MODES).default('token-mean'),
  /** KL to the reference policy (the starting weights): coefficient β, 0 turns it off (§9: verl's GRPO example). */
  klCoef: nonNeg().default(0.001),
  klType: z.enum(KL_TYPES).default('low_var_kl'),
}).strict();

export const optimSchema = z.object({
  /** AdamW learning rate: for the 3.4M-parameter embedded model (a 7B model wants ~1e-6, verl's default). */
  lr: z.number().positive().finite().default(1e-4),
  weightDecay: nonNeg().default(0.01),
  /** Gradient clipping by global norm (verl's grad_clip); 0 = none. */
  maxGradNorm: nonNeg().default(1),
  betas: z.tuple([z.number().min(0).lt(1), z.number().min(0).lt(1)]).default([0.9, 0.999]),
  eps: z.number().positive().finite().default(1e-8),
}).strict();

export const trainSchema = z.object({
  /** Optimiser steps of the run. */
  steps: posInt().default(10),
  /** Questions sampled per step (each × the pipeline's groupSize trajectories). */
  questionsPerStep: posInt().default(8),
  /** Passes over a step's batch (§9, default 1). */
  ppoEpochs: posInt().default(1),
  /** Updates per epoch (§9, default 1: one update per step, on-policy). */
  miniBatches: posInt().default(1),
  /** Most padded tokens (rows × longest row) per learner forward/backward. */
  microBatchTokens: posInt().default(8192),
  /** [decided] old log-probs: recomputed by the learner on the current weights (default) or the sampler's (verl's rollout_log_probs). */
  oldLogp: z.enum(['learner', 'sampler']).default('learner'),
  /** Evaluation every N steps on a fixed dev slice under the memory policy; 0 = never. */
  evalEvery: nonNegInt().default(5),
  /** Questions of that dev slice. */
  evalQuestions: posInt().default(50),
  /** Checkpoint every N steps (the last step always); resume continues from the newest. */
  checkpointEvery: posInt().default(1),
  /** Checkpoints kept (older ones are deleted). */
  keepCheckpoints: posInt().default(2),
  /** Seed of the question order, the mini-batch shuffles and the learner; step k samples with mixSeed(seed, k). */
  seed: nonNegInt().default(0),
  /**
   * Overlapped steps (src/train/overlap.ts): step k samples with the weights of step k − 1 − asyncLevel
   * while the learner updates on earlier steps; 0 = one step after another. Above 0 the old
   * log-probs must be the sampler's (the weights that sampled a row are no longer the learner's).
   */
  asyncLevel: nonNegInt().default(0),
  loss: lossSchema.prefault({}),
  optim: optimSchema.prefault({}),
}).strict().refine((o) => o.asyncLevel === 0 || o.oldLogp === 'sampler', {
  path: ['oldLogp'],
  message: "asyncLevel above 0 needs oldLogp 'sampler': the PPO ratio must be taken against the weights that sampled each row, which the learner no longer holds",
});

export type LossOptions = z.output<typeof lossSchema>;
export type OptimOptions = z.output<typeof optimSchema>;
export type TrainOptions = z.output<typeof trainSchema>;
export type TrainOptionsInput = z.input<typeof trainSchema>;

/** Validates training options and fills in defaults; an invalid one is an error naming it. */
export function resolveTrainOptions(input: unknown = {}): TrainOptions {
  return parseOptions(trainSchema, input, 'train', 'training option');
}
