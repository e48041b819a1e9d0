/**
 * What the pipeline needs from a model (`TextCodec`, `Generator`, `TargetScorer`) and from a
 * search tool (`Retriever`), so that the embedded ONNX runtime, inference servers, a scripted
 * fake or a trainer's own model can stand behind them. Imports nothing.
 */

export interface TextCodec {
  encode(text: string): number[];
  decode(ids: ArrayLike<number>): string;
  /** Id of a token string that is a single token (protocol tags), else undefined. */
  tokenId(token: string): number | undefined;
  /** Text of one id on its own (for reports); decode([id]) when absent. */
  piece?(id: number): string;
  /** The tokenizer's own eos and pad ids, when it declares them (src/protocol/special-ids.ts). */
  readonly eosTokenId?: number | undefined;
  readonly padTokenId?: number | undefined;
  /** The tokenizer's own Jinja chat template, when it ships one (docs/algorithm.md §1). */
  readonly chatTemplate?: string | undefined;
  /** `chatTemplate` applied to messages as text (transformers.js `apply_chat_template`, tokenize=false). */
  renderChat?(messages: ReadonlyArray<ChatTurn>, options?: { addGenerationPrompt?: boolean }): string;
}

/** One chat message handed to a model's template; `reasoning_content` is read by templates such as Qwen3's. */
export interface ChatTurn {
  role: string;
  content: string;
  reasoning_content?: string;
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
  /**
   * The request's own sampling seed: it samples from stream 0 of this seed, whatever else is in
   * the call (without it, request i samples from stream i of `GenerateParams.seed`).
   */
  seed?: number;
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
  /** Seed of this call; request i samples from stream i of it, unless the request carries its own `seed`. */
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
  /** docs/algorithm.md §2: the full context or the memory context of the round's snapshot. */
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
  /** The document's address, when the corpus has one. */
  url?: string;
}

/** A web page behind a URL (ASearcher's pages JSONL line: `{ url, title, contents }`). */
export interface Page {
  url: string;
  title: string;
  contents: string;
}

/** Anything that answers queries with ranked documents: local BM25, an HTTP server, a fake. */
export interface Retriever {
  /** Short description for logs and summaries ("bm25:data/world/corpus.jsonl"). */
  readonly name: string;
  /** The top `topk` documents of every query, in query order. Throws when the tool fails. */
  search(queries: readonly string[], topk: number): Promise<RetrievedDoc[][]>;
  /**
   * The page tool (docs/algorithm.md §1, ASearcher's `POST /access`): the page of every URL, in
   * URL order, null where there is none. Absent when the retriever has no pages. Throws when the
   * tool fails.
   */
  access?(urls: readonly string[]): Promise<Array<Page | null>>;
}
