/**
 * `CausalLM`: a decoder in optimum's `text-generation-with-past` layout run with ONNX Runtime.
 * Batched sampling with a KV cache (`generate`) and teacher-forced target scoring
 * (`scoreTargets`, docs/algorithm.md §4); both run on the `ForwardModel` this class implements.
 */
import { MempoError } from '../../errors';
import { invalidArgument } from './errors';
import { locateModelFiles, readModelConfig, type ModelConfig, type ModelFiles, type ModelIO } from './model-dir';
import { getOrt, type ExecutionProvider, type OrtSession, type SessionOptions } from './ort';
import { runForward } from './forward-run';
import { checkReloadable, openSession, probeLogits, SessionSlot, tokenizerHashes } from './reload';
import { hasWeightMap, needsExport, writeExportFrom } from './hf-weights';
import { KVCache } from './kv-cache';
import { Tokenizer } from './tokenizer';
import { generate } from './generate';
import { scoreTargets } from './scorer';
import type {
  ForwardInput,
  ForwardModel,
  ForwardOutput,
  GenerateOptions,
  GenerationResult,
  GenerationStats,
  GenerationWithStats,
  PromptInput,
  ScoreItem,
  ScoreOptions,
  ScoreStats,
  ScoresWithStats,
} from './types';

export type { ForwardInput, ForwardOutput } from './types';

export interface LoadOptions {
  /** ORT execution providers, passed through (default `['cpu']`), e.g. `['cuda', 'cpu']`. */
  executionProviders?: ExecutionProvider[];
  /** Extra ORT session options (threads, graph optimisation level, ...). */
  sessionOptions?: SessionOptions;
  /** The ONNX file, relative to the directory (default `model.onnx`, else `onnx/model.onnx`). */
  modelFile?: string;
  /** Load the tokenizer from the same directory (default true), or pass one, or false for none. */
  tokenizer?: boolean | Tokenizer;
  /**
   * Rewrite the graph in memory so that the LM head runs only at the positions a pass reads
   * (onnx-select.ts; default true). The model falls back to full logits, with `io.selectReason`
   * saying why, when the graph is not one the rewrite knows; false forces full logits.
   */
  selectLogits?: boolean;
}

/** What `reload` reports: the ONNX file now in use and how long the swap took. */
export interface ReloadResult {
  modelPath: string;
  ms: number;
}

export class CausalLM implements ForwardModel {
  private slot: SessionSlot | undefined;
  private files: ModelFiles;
  /** Reloads run one after another, in call order. */
  private reloads: Promise<unknown> = Promise.resolve();

  private constructor(
    files: ModelFiles,
    readonly config: ModelConfig,
    io: ModelIO,
    session: OrtSession,
    readonly tokenizer: Tokenizer | undefined,
    private readonly options: LoadOptions,
    /** sha256 of the tokenizer files the model was loaded with (none without a tokenizer). */
    private readonly tokenizerFiles: Map<string, string> | undefined,
  ) {
    this.files = files;
    this.slot = new SessionSlot(session, files.modelPath, io);
    this.lastIO = io;
  }

  private lastIO: ModelIO;

  /** The inputs and outputs of the graph new calls run on (see `ModelIO.selectLogits`). */
  get io(): ModelIO {
    return this.slot?.io ?? this.lastIO;
  }

  /** The model directory (the last one reloaded from). */
  get dir(): string {
    return this.files.dir;
  }

  /** The ONNX file new calls run on. */
  get modelPath(): string {
    return this.files.modelPath;
  }

  /**
   * Opens a model directory. Checks config.json, the ONNX file and its inputs/outputs before
   * returning; every problem is an error naming the file or tensor.
   */
  static async load(dir: string, options: LoadOptions = {}): Promise<CausalLM> {
    if (typeof dir !== 'string' || dir.length === 0) throw invalidArgument('a model directory path', 'dir', dir);
    getOrt(); // without onnxruntime-node (an optional dependency), say so before reading the model
    const files = locateModelFiles(dir, options.modelFile);
    const config = readModelConfig(files);
    let tokenizer: Tokenizer | undefined;
    if (options.tokenizer instanceof Tokenizer) tokenizer = options.tokenizer;
    else if (options.tokenizer !== false) tokenizer = await Tokenizer.load(files.dir);
    // Before the session: a tokenizer of other weights is named without reading the model.
    if (tokenizer !== undefined && tokenizer.size > config.vocabSize) {
      throw new MempoError(
        'ERR_MODEL_CONFIG',
        `The tokenizer in ${tokenizer.dir} has ${tokenizer.size} ids but the model's vocab_size is ${config.vocabSize} (${files.configPath}): the tokenizer does not belong to these weights`,
      );
    }
    const { session, io } = await openSession(files.modelPath, config, options);
    const hashes = tokenizer === undefined ? undefined : tokenizerHashes(tokenizer.dir);
    return new CausalLM(files, config, io, session, tokenizer, options, hashes);
  }

  /**
   * Takes the weights of another model directory with the same architecture and tokenizer (the
   * learner's `saveWeights`, docs/learner.md): a new ORT session of its ONNX file serves every
   * call that starts after this resolves; calls in flight finish on the old session, which is
   * released after the last of them. A Hugging Face directory without an ONNX export (the
   * learner's save of an HF model) gets one first, the loaded export's graph with its safetensors
   * weights (hf-weights.ts), when the loaded model is such an export. On any error (missing file, another architecture or
   * tokenizer, a graph ORT refuses, weights whose probe pass gives a NaN or infinite logit) the
   * old weights stay in use.
   */
  reload(dir: string): Promise<ReloadResult> {
    const run = this.reloads.then(() => this.swap(dir));
    this.reloads = run.catch(() => undefined);
    return run;
  }

  private async swap(dir: string): Promise<ReloadResult> {
    const t0 = performance.now();
    if (typeof dir !== 'string' || dir.length === 0) throw invalidArgument('a model directory path', 'dir', dir);
    if (this.slot === undefined) throw new MempoError('ERR_DISPOSED', `The model ${this.modelPath} has been disposed`);
    // A Hugging Face directory the learner saved (safetensors, no ONNX): its export is the loaded one with its weights.
    if (this.options.modelFile === undefined && needsExport(dir) && hasWeightMap(this.files.dir)) await writeExportFrom(this.files.dir, dir);
    const files = locateModelFiles(dir, this.options.modelFile);
    const config = readModelConfig(files);
    const loaded = { config: this.config, io: this.io, tokenizer: this.tokenizerFiles };
    checkReloadable(files.dir, loaded, { config, io: this.io });
    const { session, io } = await openSession(files.modelPath, this.config, this.options);
    try {
      checkReloadable(files.dir, loaded, { config, io });
      await probeLogits(session, files.modelPath, this.config, io);
    } catch (err) {
      await session.release();
      throw err;
    }
    const old = this.slot;
    if (old === undefined) {
      await session.release();
      throw new MempoError('ERR_DISPOSED', `The model ${this.modelPath} was disposed during the reload from ${files.dir}`);
    }
    this.slot = new SessionSlot(session, files.modelPath, io);
    this.lastIO = io;
    this.files = files;
    await old.retire();
    return { modelPath: files.modelPath, ms: performance.now() - t0 };
  }

  /** The current session, held for the whole of `fn` (a reload meanwhile does not release it). */
  private pinned<T>(fn: (model: ForwardModel) => Promise<T>): Promise<T> {
    const slot = this.slot;
    if (slot === undefined) return Promise.reject(new MempoError('ERR_DISPOSED', `The model ${this.modelPath} has been disposed`));
    return slot.use((session) =>
      fn({
        modelPath: slot.modelPath,
        config: this.config,
        io: slot.io,
        tokenizer: this.tokenizer,
        padTokenId: this.padTokenId,
        eosTokenIds: this.eosTokenIds,
        forward: (input) => runForward(session, slot.modelPath, this.config, slot.io, input),
        emptyCache: (batch) => this.emptyCache(batch),
      }),
    );
  }

  /** Id used to fill padding positions (never attended to). */
  get padTokenId(): number {
    return this.config.padTokenId ?? this.tokenizer?.padTokenId ?? this.config.eosTokenIds[0] ?? 0;
  }

  /** Ids that end a generation: config/generation_config eos, else the tokenizer's eos. */
  get eosTokenIds(): number[] {
    if (this.config.eosTokenIds.length > 0) return this.config.eosTokenIds;
    const e = this.tokenizer?.eosTokenId;
    return e === undefined ? [] : [e];
  }

  /** One forward pass. Low level: shapes are the caller's responsibility. */
  forward(input: ForwardInput): Promise<ForwardOutput> {
    return this.pinned((m) => m.forward(input));
  }

  /** An empty cache for `batch` rows. */
  emptyCache(batch: number): KVCache {
    return KVCache.empty(this.config.numLayers, batch, this.config.numKvHeads, this.config.headDim);
  }

  /**
   * Logits `[ids.length, vocab]` of one unpadded sequence (teacher forcing, no cache): the
   * reference the batched scorer is tested against.
   */
  async logitsOf(ids: ArrayLike<number>): Promise<Float32Array> {
    const n = ids.length;
    const inputIds = new BigInt64Array(n);
    const positionIds = new BigInt64Array(n);
    for (let i = 0; i < n; i++) {
      inputIds[i] = BigInt(ids[i]!);
      positionIds[i] = BigInt(i);
    }
    const attentionMask = new BigInt64Array(n).fill(1n);
    const out = await this.forward({ inputIds, batch: 1, seqLen: n, attentionMask, positionIds, past: this.emptyCache(1), fetchPresent: false });
    return out.logits;
  }

  /** Samples continuations of many prompts at once (see `GenerateOptions`). Results in prompt order. */
  async generate(prompts: readonly PromptInput[], options: GenerateOptions): Promise<GenerationResult[]> {
    return (await this.generateWithStats(prompts, options)).results;
  }

  /** `generate`, also returning the statistics of this call alone (safe with concurrent calls). */
  async generateWithStats(prompts: readonly PromptInput[], options: GenerateOptions): Promise<GenerationWithStats> {
    const out = await this.pinned((m) => generate(m, prompts, options));
    this.lastGenerationStats = out.stats;
    return out;
  }

  /**
   * Statistics of the most recently finished `generate` call (steps, tokens, compactions). With
   * concurrent calls, use `generateWithStats` to get each call's own.
   */
  lastGenerationStats: GenerationStats | undefined;
  /**
   * Statistics of the most recently finished `scoreTargets` call (micro-batches, padded tokens).
   * With concurrent calls, use `scoreTargetsWithStats` to get each call's own.
   */
  lastScoreStats: ScoreStats | undefined;

  /**
   * docs/algorithm.md §4: per item, log π(target_t | context, target_<t) for every target token,
   * all items in one call (micro-batched internally by a token budget).
   */
  async scoreTargets(items: readonly ScoreItem[], options: ScoreOptions = {}): Promise<Float32Array[]> {
    return (await this.scoreTargetsWithStats(items, options)).results;
  }

  /** `scoreTargets`, also returning the statistics of this call alone (safe with concurrent calls). */
  async scoreTargetsWithStats(items: readonly ScoreItem[], options: ScoreOptions = {}): Promise<ScoresWithStats> {
    const out = await this.pinned((m) => scoreTargets(m, items, options));
    this.lastScoreStats = out.stats;
    return out;
  }

  /** Releases the session once the calls in flight have finished; later calls fail with ERR_DISPOSED. */
  async dispose(): Promise<void> {
    const s = this.slot;
    this.slot = undefined;
    if (s !== undefined) await s.retire();
  }
}
