/**
 * What the agent loop needs from a model, behind interfaces so that a scripted fake can drive
 * the state machine in tests and another runtime (vLLM client, a trainer's own model) can
 * replace the embedded one: a `TextCodec` (tokenizer), a `Generator` (batched sampling with
 * stop strings and per-token log-probs) and a `TargetScorer` (SPEC §4 teacher-forced scoring).
 */
import { CausalLM, type LoadOptions } from './causal-lm';
import { EOS_TOKEN_ID, FALLBACK_STOP_TOKEN_IDS, STOP_TOKEN_IDS } from '../../protocol/tags';

export interface TextCodec {
  encode(text: string): number[];
  decode(ids: ArrayLike<number>): string;
  /** Id of a token string that is a single token (protocol tags), else undefined. */
  tokenId(token: string): number | undefined;
  /** Text of one id on its own (for reports); decode([id]) when absent. */
  piece?(id: number): string;
}

/** Which trajectory and round a generation request belongs to. */
export interface RequestTag {
  uid: string;
  sample: number;
  /** 1-based round index. */
  round: number;
}

export interface GenerationRequest {
  ids: readonly number[];
  maxNewTokens: number;
  tag: RequestTag;
}

export type GenerationFinish = 'stop' | 'eos' | 'length' | 'context';

export interface GenerationOutput {
  tokenIds: number[];
  /** Log-prob of each generated id under the sampling distribution; null when unavailable. */
  logprobs: ArrayLike<number> | null;
  finishReason: GenerationFinish;
}

export interface GenerateParams {
  temperature: number;
  topP: number;
  topK: number;
  /** Seed of this call; request i samples from stream i of it. */
  seed: number;
  /** Stop strings (kept in the output): `</search>`, `</answer>`. */
  stop: readonly string[];
  /** Most sequences per forward pass. */
  maxBatchSize?: number;
}

export interface Generator {
  readonly codec: TextCodec;
  /** Most tokens (context + generated) the model can attend to. */
  readonly maxContextTokens: number;
  /** Results in request order. Called with every live trajectory's request at once. */
  generate(requests: readonly GenerationRequest[], params: GenerateParams): Promise<GenerationOutput[]>;
}

/** Which trajectory, round and context a scoring item belongs to (for error messages). */
export interface ScoringTag extends RequestTag {
  /** SPEC §2: the full context or the memory context of the round's snapshot. */
  context: 'full' | 'memory';
}

export interface ScoringItem {
  contextIds: readonly number[];
  targetIds: readonly number[];
  tag?: ScoringTag;
}

/**
 * Thrown by a `Generator` or `TargetScorer` when some requests (or scoring items) of a call failed
 * for good and the others succeeded: `results[i]` is the result of request / item i, undefined
 * where it failed, and `failures` maps each failed index to an error naming the server and the
 * request or item. The rollout records only the trajectories concerned as failed
 * (`doneReason: 'backend-error'`, excluded from advantages) and goes on with the rest; any other
 * error from a generator or scorer stops the run.
 */
export class PartialResultsError<T> extends Error {
  constructor(
    readonly results: ReadonlyArray<T | undefined>,
    readonly failures: ReadonlyMap<number, string>,
    what = 'requests',
  ) {
    const first = failures.values().next().value as string | undefined;
    super(`${failures.size} of ${results.length} ${what} failed${first === undefined ? '' : `; first: ${first}`}`);
    this.name = 'PartialResultsError';
  }
}

export interface TargetScorer {
  /** Per item, log π(target_t | context, target_<t) for every target token; all items in ONE call. */
  score(items: readonly ScoringItem[]): Promise<Float32Array[]>;
}

export interface LocalModelOptions {
  /** Most padded tokens per scorer forward pass (default 8192). */
  scorerMaxBatchTokens?: number;
}

/** The embedded runtime (`CausalLM`) as Generator + TargetScorer. */
export class LocalModel implements Generator, TargetScorer {
  readonly codec: TextCodec;
  readonly maxContextTokens: number;
  /** Number of scorer calls made (SPEC §4: one per batch). */
  scoreCalls = 0;

  /** Loads a model directory (ONNX + tokenizer), e.g. the embedded `models/mempo-tiny`. */
  static async load(dir: string, options: LocalModelOptions & { load?: LoadOptions } = {}): Promise<LocalModel> {
    return new LocalModel(await CausalLM.load(dir, options.load ?? {}), options);
  }

  /** Releases the ONNX session. */
  dispose(): Promise<void> {
    return this.model.dispose();
  }

  constructor(readonly model: CausalLM, private readonly options: LocalModelOptions = {}) {
    const tok = model.tokenizer;
    if (tok === undefined) throw new Error(`The model ${model.dir} was loaded without a tokenizer; the agent loop needs one`);
    this.codec = tok;
    this.maxContextTokens = model.config.maxPositions;
  }

  async generate(requests: readonly GenerationRequest[], params: GenerateParams): Promise<GenerationOutput[]> {
    if (requests.length === 0) return [];
    const results = await this.model.generate(
      requests.map((r) => ({ ids: r.ids as number[], maxNewTokens: r.maxNewTokens })),
      {
        maxNewTokens: 1,
        temperature: params.temperature,
        topP: params.topP,
        topK: params.topK,
        seed: params.seed,
        stop: params.stop,
        stopTokenIds: [...STOP_TOKEN_IDS, ...FALLBACK_STOP_TOKEN_IDS.filter((id) => id !== EOS_TOKEN_ID)],
        maxBatchSize: params.maxBatchSize ?? 64,
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
      { truncate: 'left', maxBatchTokens: this.options.scorerMaxBatchTokens ?? 8192 },
    );
  }
}
