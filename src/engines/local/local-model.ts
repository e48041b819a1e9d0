/** The embedded runtime (ONNX Runtime `CausalLM`) as the pipeline's `Generator` + `TargetScorer`. */
import type { GenerateParams, GenerationOutput, GenerationRequest, Generator, ScoringItem, TargetScorer, TextCodec } from '../../contracts';
import { CausalLM, type LoadOptions, type ReloadResult } from './causal-lm';
import { resolveProtocolIds } from '../../protocol/special-ids';

export interface LocalModelOptions {
  /** Most padded tokens per scorer forward pass (default: the scorer's, see src/options.ts). */
  scorerMaxBatchTokens?: number;
}

/** The embedded runtime (`CausalLM`) as Generator + TargetScorer. */
export class LocalModel implements Generator, TargetScorer {
  readonly codec: TextCodec;
  readonly maxContextTokens: number;
  /** Ids that end a round's generation besides eos: the stop tags that are single tokens, then end-of-turn. */
  readonly stopTokenIds: readonly number[];
  /** Number of scorer calls made (docs/algorithm.md §4: one per batch). */
  scoreCalls = 0;

  /** Loads a model directory (ONNX + tokenizer), e.g. the embedded `models/mempo-tiny`. */
  static async load(dir: string, options: LocalModelOptions & { load?: LoadOptions } = {}): Promise<LocalModel> {
    return new LocalModel(await CausalLM.load(dir, options.load ?? {}), options);
  }

  /**
   * Takes the weights of another model directory with the same architecture and tokenizer (the
   * learner's `saveWeights`): calls in flight finish on the old weights, later ones use the new
   * (`CausalLM.reload`). On error the old weights stay in use.
   */
  reload(dir: string): Promise<ReloadResult> {
    return this.model.reload(dir);
  }

  /** Releases the ONNX session. */
  dispose(): Promise<void> {
    return this.model.dispose();
  }

  constructor(readonly model: CausalLM, private readonly options: LocalModelOptions = {}) {
    const tok = model.tokenizer;
    if (tok === undefined) throw new Error(`The model ${model.dir} was loaded without a tokenizer; the agent loop needs one`);
    // The single-token stop tags and the end-of-turn token (a round that forgets its stop tag), from this model's tokenizer.
    const ids = resolveProtocolIds(tok, { eosTokenIds: model.config.eosTokenIds, padTokenId: model.config.padTokenId });
    this.stopTokenIds = [...ids.stopTokenIds, ...ids.endOfTurnIds];
    this.codec = tok;
    this.maxContextTokens = model.config.maxPositions;
  }

  async generate(requests: readonly GenerationRequest[], params: GenerateParams): Promise<GenerationOutput[]> {
    if (requests.length === 0) return [];
    const results = await this.model.generate(
      requests.map((r) => ({ ids: r.ids as number[], maxNewTokens: r.maxNewTokens, ...(r.seed !== undefined ? { seed: r.seed } : {}) })),
      {
        maxNewTokens: 1,
        temperature: params.temperature,
        topP: params.topP,
        topK: params.topK,
        seed: params.seed,
        stop: params.stop,
        stopTokenIds: this.stopTokenIds,
        maxBatchSize: params.maxBatchSize, // default: see src/options.ts (maxGenerateBatch)
        decode: false,
      },
    );
    return results.map((r) => ({ tokenIds: r.tokenIds, logprobs: r.logprobs, finishReason: r.finishReason }));
  }

  async score(items: readonly ScoringItem[]): Promise<Float32Array[]> {
    this.scoreCalls++;
    if (items.length === 0) return [];
    return this.model.scoreTargets(
      items.map((it) => ({ contextIds: it.contextIds as number[], targetIds: it.targetIds as number[] })),
      // default: see src/options.ts (scorerMaxBatchTokens)
      { truncate: 'left', maxBatchTokens: this.options.scorerMaxBatchTokens },
    );
  }
}
