/**
 * Every option of the rollout pipeline (docs/algorithm.md §1-§8), typed and validated with zod, each with
 * the default of docs/algorithm.md. Its [decided] rules are options here, never hidden constants.
 */
import { z } from 'zod';
import { ANSWER_TEMPLATE } from './protocol/answer';
import { DEFAULT_TOPK } from './retrieval/observation';
import { MempoError } from './errors';
import { METRICS } from './kernels/outcome-reward';

/**
 * Every default that more than one layer needs, written once: the pipeline schemas below, the
 * engines (local ONNX runtime, inference-server client), the retriever, the servers and the CLI
 * read them from here.
 */
export const DEFAULTS = Object.freeze({
  /** Most sequences per model forward pass when generating. */
  maxGenerateBatch: 64,
  /** Most padded tokens (rows × longest row) per forward pass of the target scorer. */
  scorerMaxBatchTokens: 8192,
  /** HTTP retriever (Search-R1 / ASearcher `POST /retrieve`). */
  retriever: Object.freeze({ timeoutMs: 10_000, retries: 3, backoffMs: 250 }),
  /** Inference servers (vLLM, SGLang, `mempo serve`) as seen by the client. */
  server: Object.freeze({
    api: 'vllm' as 'vllm' | 'sglang',
    maxInFlight: 8,
    timeoutMs: 120_000,
    retries: 3,
    backoffMs: 200,
    /** Consecutive failures after which an endpoint leaves rotation, and for how long. */
    failureThreshold: 3,
    cooldownMs: 30_000,
    scoreBatchSize: 8,
  }),
  /** `mempo rollout` / `mempo eval` question slices and report size. */
  rolloutLimit: 24,
  evalLimit: 100,
  reportQuestions: 12,
});

const posInt = () => z.number().int().positive();
const nonNegInt = () => z.number().int().nonnegative();
const finite = () => z.number();
/** A number below +Infinity; -Infinity allowed (τ). */
const threshold = () =>
  z.custom<number>((v) => typeof v === 'number' && !Number.isNaN(v) && v < Infinity, {
    message: 'Expected a number below Infinity (-Infinity allowed)',
  });

export const samplingSchema = z.object({
  /** Sampling temperature (docs/algorithm.md §2: temperature sampling; 0 is greedy). */
  temperature: z.number().nonnegative().default(1),
  topP: z.number().gt(0).lte(1).default(1),
  topK: nonNegInt().default(0),
}).strict();

export const rolloutSchema = z.object({
  /** Trajectories per question (docs/algorithm.md §2, default 16). */
  groupSize: posInt().default(16),
  /** Most rounds per trajectory (docs/algorithm.md §1; the notes' training setting 8). */
  maxTurns: posInt().default(8),
  /** Response token budget: generated + observation tokens (docs/algorithm.md §1). */
  maxResponseTokens: posInt().default(1024),
  /** Most new tokens in one round. */
  maxRoundTokens: posInt().default(160),
  /** 'full' (training rollout, default) or 'memory' (docs/algorithm.md §7 window). */
  context: z.enum(['full', 'memory']).default('full'),
  /** [decided] chat rendering of the prompt and memory contexts (docs/algorithm.md §1, §7): the model's own template (default) or mempo's plain ChatML. */
  chatTemplate: z.enum(['model', 'chatml']).default('model'),
  /** The agent's system message (docs/algorithm.md §1); unset, mempo's own: SYSTEM_PROMPT, or ACCESS_SYSTEM_PROMPT with the page tool (tool.access). */
  systemPrompt: z.string().min(1).max(65536).optional(),
  /** Questions per batch: the unit of records delivered to `onBatch` and, under the 'batch' schedule, of generation and scoring (one scorer call). */
  questionsPerBatch: posInt().default(8),
  /**
   * 'batch' (default): a batch's groups are generated together and the next batch starts when the
   * batch is scored. 'continuous': a group is taken up as soon as the engine has room for it
   * (maxGenerateBatch trajectories in flight) and scored as soon as it is done, overlapped with
   * generation; reproducible for a given seed and options, not byte-identical to 'batch'
   * (docs/rollout.md, "Schedules").
   */
  schedule: z.enum(['batch', 'continuous']).default('batch'),
  /** 'continuous' schedule: most trajectories in flight (null: maxGenerateBatch); more than maxGenerateBatch lets the engine sort each call into waves of similar length. */
  maxInFlight: posInt().nullable().default(null),
  /** Most sequences per model forward pass when generating. */
  maxGenerateBatch: posInt().default(DEFAULTS.maxGenerateBatch),
  /** Seed of sampling; the same seed reproduces the same batch. */
  seed: nonNegInt().default(0),
  sampling: samplingSchema.default({ temperature: 1, topP: 1, topK: 0 }),
}).strict();

export const toolSchema = z.object({
  /** Documents per search (default 3). */
  topk: posInt().default(DEFAULT_TOPK),
  /** Each document cut to this many characters; null keeps all. */
  docMaxChars: posInt().nullable().default(512),
  /** [decided] observation text (docs/algorithm.md §1): mempo's compact format (default, what the embedded model reads) or ASearcher's. */
  observationFormat: z.enum(['mempo', 'asearcher']).default('mempo'),
  /** The agent has the page tool: `<access>URL</access>` is an action (docs/algorithm.md §1); needs a retriever with pages. */
  access: z.boolean().default(false),
  /** A page is cut to pageMaxChars and read in chunks of pageChunkChars, at most pageMaxChunks of them (ASearcher: 250,000, 25,000, 10). */
  pageMaxChars: posInt().default(250_000),
  pageChunkChars: posInt().default(25_000),
  pageMaxChunks: posInt().default(10),
  /**
   * [decided] docs/algorithm.md §1: 'cursor' (default) shows a page's next chunk at each access of its URL;
   * 'queue' is ASearcher's: one access queues all its chunks and each following round reads one (a reading round).
   */
  pageReading: z.enum(['cursor', 'queue']).default('cursor'),
  /** HTTP retriever: per-request timeout, retries and first backoff. */
  timeoutMs: posInt().default(DEFAULTS.retriever.timeoutMs),
  retries: nonNegInt().default(DEFAULTS.retriever.retries),
  backoffMs: nonNegInt().default(DEFAULTS.retriever.backoffMs),
}).strict();

export const memorySchema = z.object({
  /** [decided] mem span with its tags ('inclusive', default) or only its content (docs/algorithm.md §1). */
  memSpan: z.enum(['inclusive', 'content']).default('inclusive'),
  /** Memory-reward target (docs/algorithm.md §4). Must contain `{answer}` once. */
  answerTemplate: z.string().refine((s) => s.split('{answer}').length === 2, { message: 'must contain {answer} exactly once' }).default(ANSWER_TEMPLATE),
  /** How the target is tokenised (docs/algorithm.md §4): 'apart' (prefix / gold / suffix separately, exact mask; default) or 'whole' (the whole target, gold tokens marked by character offsets). */
  targetTokenization: z.enum(['apart', 'whole']).default('apart'),
  /** [decided] which gold fills the target when there are several (docs/algorithm.md §4). */
  gold: z.enum(['first', 'shortest', 'longest']).default('first'),
  /** [decided] P when no answer token passes τ (docs/algorithm.md §4): 0 ('zero', default) or the plain geometric mean over all answer tokens ('all-tokens'). */
  emptyKept: z.enum(['zero', 'all-tokens']).default('zero'),
  /** τ of the threshold filter (docs/algorithm.md §4, ln 0.5); -Infinity = plain geometric mean. */
  threshold: threshold().default(Math.log(0.5)),
  /** Memory context includes the previous observation (a gap of the MemPO code between training and evaluation, docs/algorithm.md §7; default false). */
  memContextIncludesLastObservation: z.boolean().default(false),
  /** docs/algorithm.md §7 window: tool results kept in the memory-policy prompt. */
  windowToolResults: posInt().default(1),
  /** docs/algorithm.md §7 shortText of search results (null = full text, default) and webpages (100). */
  searchShortTextChars: posInt().nullable().default(null),
  webpageShortTextChars: posInt().nullable().default(100),
  /** Most tokens per forward pass of the memory-reward scorer. */
  scorerMaxBatchTokens: posInt().default(DEFAULTS.scorerMaxBatchTokens),
  /** Compute memory rewards at all (eval turns it off). */
  enabled: z.boolean().default(true),
}).strict();

export const rewardSchema = z.object({
  /** Score of an invalid format (docs/algorithm.md §3, default 0). */
  formatScore: finite().default(0),
  /**
   * Score of a trajectory stopped by the response budget (doneReason 'response-budget', docs/algorithm.md §3);
   * null (default): the format check decides, as for any response (the cut leaves its last tag open).
   */
  budgetScore: finite().nullable().default(null),
  /** The outcome metric of computeScore (docs/algorithm.md §3). */
  metric: z.enum(METRICS).default('em'),
  requireAnswer: z.boolean().default(false),
}).strict();

export const advantageSchema = z.object({
  eps: z.number().nonnegative().default(1e-6),
  normByStd: z.boolean().default(true),
  memGrouping: z.enum(['question', 'question-round']).default('question'),
  /** Weight of the memory advantage (docs/algorithm.md §5, default 1). */
  alpha: finite().default(1),
  /** Subtracted from the advantage of the round that broke the format, not of the whole trajectory (docs/algorithm.md §5, default 0). */
  formatPenalty: z.number().nonnegative().default(0),
}).strict();

export const pipelineSchema = z.object({
  rollout: rolloutSchema.default(() => rolloutSchema.parse({})),
  tool: toolSchema.default(() => toolSchema.parse({})),
  memory: memorySchema.default(() => memorySchema.parse({})),
  reward: rewardSchema.default(() => rewardSchema.parse({})),
  advantage: advantageSchema.default(() => advantageSchema.parse({})),
}).strict();

export type SamplingOptions = z.output<typeof samplingSchema>;
export type RolloutOptions = z.output<typeof rolloutSchema>;
export type ToolOptions = z.output<typeof toolSchema>;
export type MemoryOptions = z.output<typeof memorySchema>;
export type RewardOptions = z.output<typeof rewardSchema>;
export type AdvantageOptions = z.output<typeof advantageSchema>;
export type PipelineOptions = z.output<typeof pipelineSchema>;
/** What a caller may pass: every field optional, nested groups partial. */
export type PipelineOptionsInput = z.input<typeof pipelineSchema>;

/** Parses `input` with `schema`; the first issue becomes an ERR_INVALID_OPTION naming its path under `root`. */
export function parseOptions<S extends z.ZodType>(schema: S, input: unknown, root: string, noun = 'option'): z.output<S> {
  const r = schema.safeParse(input ?? {});
  if (r.success) return r.data;
  const issue = r.error.issues[0]!;
  const path = issue.path.map(String).join('.');
  const keys = issue.code === 'unrecognized_keys' ? ` (${(issue as { keys: string[] }).keys.map((k) => JSON.stringify(k)).join(', ')})` : '';
  throw new MempoError('ERR_INVALID_OPTION', `Invalid ${noun} ${path.length ? `${root}.${path}` : root}: ${issue.message}${keys}`);
}

/** Validates options and fills in defaults; an invalid option is an error naming it. */
export function resolveOptions(input: unknown = {}): PipelineOptions {
  return parseOptions(pipelineSchema, input, 'options');
}
