/**
 * Batched sampling with a KV cache: the prompts are checked (generate-options.ts), sorted longest
 * first and run in waves of up to `maxBatchSize` sequences (generate-wave.ts). The statistics
 * are this call's own, returned with the results.
 */
import { invalidArgument } from './errors';
import { preparePrompt, resolveGenerateOptions, type Seq } from './generate-options';
import { runWave, type WaveContext } from './generate-wave';
import { SamplerScratch } from './sampler';
import type {
  FinishReason,
  ForwardModel,
  GenerateOptions,
  GenerationResult,
  GenerationStats,
  GenerationWithStats,
  PromptInput,
} from './types';

export type { FinishReason, GenerateOptions, GenerationResult, GenerationStats, GenerationWithStats, PromptInput } from './types';

/** Samples continuations of `prompts`; results in prompt order, with this call's statistics. */
export async function generate(model: ForwardModel, prompts: readonly PromptInput[], options: GenerateOptions): Promise<GenerationWithStats> {
  if (!Array.isArray(prompts)) throw invalidArgument('an array of prompts', 'prompts', prompts);
  const opts = resolveGenerateOptions(model, options);
  const seqs = prompts.map((p, index) => preparePrompt(model, p, index, opts));

  const results: GenerationResult[] = new Array(seqs.length);
  const stats: GenerationStats = { waves: 0, prefillTokens: 0, paddedPrefillTokens: 0, decodeSteps: 0, generatedTokens: 0, compactions: 0 };
  const finish = (s: Seq, reason: FinishReason, stop?: string) => {
    const r: GenerationResult = { tokenIds: s.out, logprobs: Float32Array.from(s.lps), finishReason: reason, promptLength: s.prompt.length };
    if (stop !== undefined) r.stop = stop;
    if (opts.decode) r.text = model.tokenizer!.decode(s.out);
    results[s.index] = r;
    stats.generatedTokens += s.out.length;
    if (opts.onResult !== undefined) opts.onResult(s.index, r);
  };

  const pending: Seq[] = [];
  for (const s of seqs) {
    if (s.maxNew === 0) finish(s, 'length');
    else pending.push(s);
  }
  const ctx: WaveContext = {
    model,
    params: opts.params,
    matcher: opts.matcher,
    scratch: new SamplerScratch(model.config.vocabSize),
    maxLogitsBytes: opts.maxLogitsBytes,
    select: opts.select,
    stats,
    finish,
    processor: opts.processor,
    signal: opts.signal,
  };
  for (const wave of waves(model, pending, opts.maxBatch)) {
    stats.waves++;
    await runWave(ctx, wave);
  }
  return { results, stats };
}

/**
 * Longest first, at most `maxBatch` per wave; without position_ids a wave holds only equal
 * lengths (left padding would shift the positions).
 */
function waves(model: ForwardModel, pending: Seq[], maxBatch: number): Seq[][] {
  pending.sort((a, b) => b.prompt.length - a.prompt.length || a.index - b.index);
  const out: Seq[][] = [];
  let i = 0;
  while (i < pending.length) {
    let j = i + 1;
    const firstLen = pending[i]!.prompt.length;
    while (j < pending.length && j - i < maxBatch && (model.io.hasPositionIds || pending[j]!.prompt.length === firstLen)) j++;
    out.push(pending.slice(i, j));
    i = j;
  }
  return out;
}
