/** Shared helpers of the runtime tests: the embedded model and a teacher-forcing reference. */
import { mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { CausalLM } from '../../../src/engines/local/causal-lm';

export const MODEL_DIR = resolve(__dirname, '..', '..', '..', 'models', 'mempo-tiny');

/** The embedded model's config.json (tests derive sizes from it, so a re-export keeps them valid). */
export const MODEL_CONFIG = JSON.parse(readFileSync(join(MODEL_DIR, 'config.json'), 'utf8')) as {
  vocab_size: number;
  max_position_embeddings: number;
  num_hidden_layers: number;
  num_key_value_heads: number;
  head_dim: number;
};
export const VOCAB = MODEL_CONFIG.vocab_size;
export const MAX_POS = MODEL_CONFIG.max_position_embeddings;

/**
 * log π(target_t | context, target_<t) by teacher forcing the unpadded sequence alone, with a
 * float64 log-softmax in JS: the reference for the batched scorer and for generation log-probs;
 * with `temperature`, of logits / temperature (the sampler's default 'temperature' log-probs).
 */
export async function referenceLogprobs(model: CausalLM, context: ArrayLike<number>, target: ArrayLike<number>, temperature = 1): Promise<Float64Array> {
  const ids = [...Array.from(context), ...Array.from(target)];
  const logits = await model.logitsOf(ids);
  const V = model.config.vocabSize;
  const out = new Float64Array(target.length);
  for (let t = 0; t < target.length; t++) {
    const row = (context.length - 1 + t) * V;
    let max = -Infinity;
    for (let v = 0; v < V; v++) max = Math.max(max, logits[row + v]!);
    let sum = 0;
    for (let v = 0; v < V; v++) sum += Math.exp((logits[row + v]! - max) / temperature);
    out[t] = (logits[row + target[t]!]! - max) / temperature - Math.log(sum);
  }
  return out;
}

export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) return Infinity;
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i]! - b[i]!));
  return m;
}

/**
 * A copy of the embedded model directory in a temp folder, with `edit` applied to config.json
 * and the files in `omit` left out.
 */
export function modelCopy(options: { editConfig?: (c: Record<string, unknown>) => void; omit?: string[] } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'mempo-rt-'));
  for (const f of ['config.json', 'generation_config.json', 'model.onnx', 'tokenizer.json', 'tokenizer_config.json']) {
    if (options.omit?.includes(f)) continue;
    if (f === 'config.json' && options.editConfig) {
      const c = JSON.parse(readFileSync(join(MODEL_DIR, f), 'utf8')) as Record<string, unknown>;
      options.editConfig(c);
      writeFileSync(join(dir, f), JSON.stringify(c));
    } else {
      symlinkSync(join(MODEL_DIR, f), join(dir, f));
    }
  }
  return dir;
}

/** Deterministic pseudo-random token ids in [lo, hi). */
export function randomIds(n: number, seed: number, lo = 13, hi = VOCAB): number[] {
  let s = seed >>> 0 || 1;
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out.push(lo + (s % (hi - lo)));
  }
  return out;
}
