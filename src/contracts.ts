/**
 * The types every layer shares, importing nothing: what the pipeline needs from a model
 * (`TextCodec`, `Generator`, `TargetScorer`) and from a search tool (`Retriever`), so that the
 * embedded ONNX runtime, inference servers, a scripted fake or a trainer's own model can stand
 * behind them.
 */

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

export interface RetrievedDoc {
  title: string;
  contents: string;
  score: number;
  id?: string;
}

/** Anything that answers queries with ranked documents: local BM25, an HTTP server, a fake. */
export interface Retriever {
  /** Short description for logs and summaries ("bm25:data/world/corpus.jsonl"). */
  readonly name: string;
  /** The top `topk` documents of every query, in query order. Throws when the tool fails. */
  search(queries: readonly string[], topk: number): Promise<RetrievedDoc[][]>;
}

