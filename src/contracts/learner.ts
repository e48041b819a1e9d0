/**
 * The learner behind `mempo train` (docs/learner.md, docs/algorithm.md §9): it owns the weights
 * and the backward pass; mempo owns rollouts, rewards, advantages and the loss (§6).
 */

/** A token sequence whose targets are `ids[targetStart..]`, each predicted from the tokens before it. */
export interface LearnerSample {
  ids: ArrayLike<number>;
  /** Index of the first target token, ≥ 1 (a full trajectory: its prompt length). */
  targetStart: number;
}

export interface LearnerForwardOptions {
  /** `current`: the trained weights; `reference`: the frozen starting weights (the KL reference). Default current. */
  policy?: 'current' | 'reference';
  /** Keep what `backward` needs (default false: no graph is kept). */
  grad?: boolean;
}

export interface OptimParams {
  lr: number;
  weightDecay: number;
  /** Gradient clipping by global norm; 0 = none. */
  maxGradNorm: number;
  betas: readonly [number, number];
  eps: number;
}

export interface LearnerInfo {
  protocol: number;
  learner: string;
  model: string;
  parameters: number;
  device: string;
  dtype: string;
  step: number;
  torch?: string;
  /** The longest sample `forward` accepts (the model's context), when the learner reports one. */
  maxContext?: number;
}

export interface Learner {
  /** Where it runs (a URL or a description): named in every error. */
  readonly name: string;
  info(): Promise<LearnerInfo>;
  /** One Float32Array per sample, of length `ids.length − targetStart`. */
  forward(samples: readonly LearnerSample[], options?: LearnerForwardOptions): Promise<Float32Array[]>;
  /** Back-propagates Σ grad·logp for the last `forward({ grad: true })` (same lengths), accumulating. */
  backward(grads: readonly Float32Array[]): Promise<void>;
  /** Clips, steps and zeroes the gradients; the norm is the one before clipping. */
  optimStep(params: OptimParams): Promise<{ gradNorm: number; step: number }>;
  /** Writes a model directory the rollout engines load. */
  saveWeights(dir: string): Promise<void>;
  /** Weights + optimiser + RNG + step. */
  saveCheckpoint(dir: string): Promise<{ step: number }>;
  loadCheckpoint(dir: string): Promise<{ step: number }>;
  /** Stops the learner (a spawned one exits) and releases its resources. */
  close(): Promise<void>;
}
