/**
 * The local engine's shared types. `ForwardModel` is what generation and scoring need from a
 * model, so the free functions in generate.ts and scorer.ts take it rather than the `CausalLM`
 * class (no import cycle); the request, result and statistics types of both live here too.
 */
import type { KVCache } from './kv-cache';
import type { ModelConfig, ModelIO } from './model-dir';
import type { SamplingParams } from './sampler';
import type { Tokenizer } from './tokenizer';

export interface ForwardInput {
  /** `[batch, seqLen]` token ids, row-major. */
  inputIds: BigInt64Array;
  batch: number;
  seqLen: number;
  /** `[batch, past + seqLen]`. */
  attentionMask: BigInt64Array;
  /** `[batch, seqLen]`; ignored when the model does not take position ids. */
  positionIds: BigInt64Array;
  past: KVCache;
  /** Also fetch `present.*` (the next cache). Default true. */
  fetchPresent?: boolean;
  /**
   * Flat positions (`row * seqLen + column`, each in [0, batch × seqLen)) whose logits are
   * wanted, in this order: the output is then `[logitsAt.length, vocab]`. On a graph with
   * selected logits (`io.selectLogits`) only these rows go through the LM head; otherwise they
   * are copied out of the full logits. Default: every position.
   */
  logitsAt?: ArrayLike<number>;
}

export interface ForwardOutput {
  /** `[batch, seqLen, vocab]` row-major (`[logitsAt.length, vocab]` with `logitsAt`), as ORT returned it (not copied). */
  logits: Float32Array;
  present: KVCache | undefined;
}

/** A decoder that generation and target scoring run on (`CausalLM` implements it). */
export interface ForwardModel {
  readonly modelPath: string;
  readonly config: ModelConfig;
  readonly io: ModelIO;
  readonly tokenizer: Tokenizer | undefined;
  /** Id used to fill padding positions (never attended to). */
  readonly padTokenId: number;
  /** Ids that end a generation by default. */
  readonly eosTokenIds: number[];
  /** One forward pass; shapes are the caller's responsibility. */
  forward(input: ForwardInput): Promise<ForwardOutput>;
  /** An empty cache for `batch` rows. */
  emptyCache(batch: number): KVCache;
}

/** A prompt: its token ids, optionally with its own token budget. */
/** A prompt's own `seed` makes it sample from stream 0 of that seed instead of stream `index` of `GenerateOptions.seed`. */
export type PromptInput = ArrayLike<number> | { ids: ArrayLike<number>; maxNewTokens?: number; seed?: number };

export interface GenerateOptions {
  /** Most tokens to generate per sequence (a prompt's own `maxNewTokens` overrides it). */
  maxNewTokens: number;
  /** Default 1; 0 is greedy. */
  temperature?: number;
  /** Default 1 (off). */
  topP?: number;
  /** Default 0 (off). */
  topK?: number;
  /** Seed of the sampling streams; sequence i uses stream i. Default: random. */
  seed?: number;
  /** Stop strings, e.g. `['</search>', '</answer>']`; the stop text stays in the output. */
  stop?: readonly string[];
  /** Extra ids that stop a sequence (kept in the output). */
  stopTokenIds?: readonly number[];
  /** Ids that end a sequence (kept in the output). Default: the model's eos ids. */
  eosTokenIds?: readonly number[];
  /** Log-prob reported per sampled token (see `SamplingParams.logprobs`). Default 'temperature'. */
  logprobs?: SamplingParams['logprobs'];
  /** Most sequences decoded together (default 64); more prompts run in waves of similar length. */
  maxBatchSize?: number;
  /** Bound on the full logits tensor of one prefill call, in bytes (default 256 MiB): it sets the column chunks (with selected logits too, whose last chunk holds one row per prompt). */
  maxLogitsBytes?: number;
  /** Prompts too long for the model: 'error' (default) or keep the last tokens ('left'). */
  truncate?: 'error' | 'left';
  /** Decode the generated ids to `text` (default true when the model has a tokenizer). */
  decode?: boolean;
  /**
   * Called before each sampling with the sequence's last-position logits row (a view into the
   * model output that may be modified in place, e.g. to ban or force tokens), the prompt index
   * and the number of tokens generated so far.
   */
  logitsProcessor?: (row: Float32Array, promptIndex: number, generated: readonly number[]) => void;
  /**
   * Called as soon as a sequence finishes, between decode steps, with its prompt index and
   * result (the same object the returned array holds), so a caller can start tool calls or
   * scoring while the other sequences keep generating.
   */
  onResult?: (promptIndex: number, result: GenerationResult) => void;
  /** Checked before each forward pass (prefill chunk, decode step): once aborted, the call rejects with the signal's reason. */
  signal?: AbortSignal;
  /**
   * Fetch only each row's last prompt position from the prefill (default true; used when the
   * model's graph has selected logits, `io.selectLogits`), in the same column chunks as without.
   * False: today's full prefill logits.
   */
  selectLogits?: boolean;
}

export type FinishReason = 'stop' | 'eos' | 'length' | 'context';

export interface GenerationResult {
  /** Generated ids (stop token / eos included). */
  tokenIds: number[];
  /** Log-prob of each generated id (see `GenerateOptions.logprobs`). */
  logprobs: Float32Array;
  /** 'stop': a stop string or stop id; 'eos'; 'length': maxNewTokens; 'context': the model's maximum length. */
  finishReason: FinishReason;
  /** The stop string matched when finishReason is 'stop'. */
  stop?: string;
  /** Decoded `tokenIds` when decoding is on. */
  text?: string;
  /** Prompt tokens the model saw (after truncation). */
  promptLength: number;
}

export interface GenerationStats {
  waves: number;
  prefillTokens: number;
  paddedPrefillTokens: number;
  decodeSteps: number;
  generatedTokens: number;
  compactions: number;
}

/** One `generate` call's results (in prompt order) and the statistics of that call alone. */
export interface GenerationWithStats {
  results: GenerationResult[];
  stats: GenerationStats;
}

export interface ScoreItem {
  contextIds: ArrayLike<number>;
  targetIds: ArrayLike<number>;
}

/** Signature of the log-prob gathering kernel (`gatherLogProbs` in src/kernels). */
export type GatherFn = (logits: Float32Array, targets: Int32Array, rows: number, vocab: number) => Float32Array;

export interface ScoreOptions {
  /**
   * Most padded tokens (rows × longest row) per forward pass. Default 8192. An item longer than
   * the budget runs alone (items are never split).
   */
  maxBatchTokens?: number;
  /**
   * Bound on one forward pass's logits tensor, in bytes. With selected logits (see
   * `selectLogits`) a pass holds only its target rows (targets × vocab × 4 bytes), so this bounds
   * the targets per pass (default 24 MiB: 41 targets at V = 151,936); without, it bounds the
   * padded tokens per pass (default 256 MiB), lowering the token budget for large vocabularies.
   */
  maxLogitsBytes?: number;
  /**
   * Compute logits only at the target positions (default true; used when the model's graph has
   * selected logits, `io.selectLogits`). False: today's full `[rows, len, vocab]` logits.
   */
  selectLogits?: boolean;
  /** Which side padding goes (default 'right'). Models without position_ids allow only 'right'. */
  padding?: 'right' | 'left';
  /** Items longer than the model's maximum: 'error' (default) or drop the context's first tokens ('left'). */
  truncate?: 'error' | 'left';
  /** Replace the log-prob gathering kernel (default: `gatherLogProbs` of the current backend). */
  gather?: GatherFn;
  /**
   * Score an item whose context is a prefix of another item's context from that item's cache
   * (a slice of its keys/values plus a pass over the target only) instead of running its
   * context again. Default true; needs a model that takes position_ids. Costs memory: a
   * micro-batch holding hosts also fetches its `present.*` cache (its padded tokens × layers ×
   * 2 × kv heads × head_dim floats), and each tail pass copies the slices it uses.
   */
  sharePrefixes?: boolean;
  /**
   * With prefix sharing, an item that is not a prefix of another context still joins the host
   * with which it shares the longest prefix when that prefix has at least this many tokens
   * (MemPO memory contexts share the prompt with the full contexts). Default 16; Infinity
   * turns this off.
   */
  minSharedPrefix?: number;
}

export interface ScoreStats {
  items: number;
  microBatches: number;
  /** Real tokens of the items run in full passes (hosts and items without a host). */
  tokens: number;
  /** Tokens of all passes including padding (full and tail passes). */
  paddedTokens: number;
  targetTokens: number;
  /** Items scored from another item's cache (prefix sharing). */
  sharedItems: number;
  /** Tokens run in the tail passes of shared items. */
  tailTokens: number;
}

/** One `scoreTargets` call's log-probs (one array per item, in item order) and its statistics. */
export interface ScoresWithStats {
  results: Float32Array[];
  stats: ScoreStats;
}
