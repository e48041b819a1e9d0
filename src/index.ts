/**
 * mempo: MemPO (Self-Memory Policy Optimization) for Node.
 * The kernel API below is stable: names and argument order are fixed for trainers that depend
 * on them. Every kernel validates its input, then runs on the native addon or the pure-JS twin.
 */
export { backend, setBackend, nativeLoadErrors } from './backend';
export type { Backend } from './backend';

export { extractSolution, normalizeAnswer, emCheck, f1Score, validateFormat, computeScore } from './rewards';
export type { FormatResult, ComputeScoreOptions } from './rewards';

export { grpoOutcomeAdvantage, memoryAdvantage, finalAdvantage, groupNormalize } from './advantage';
export type { GroupNormOptions, MemoryAdvantageOptions, MemGrouping } from './advantage';

export { gatherLogProbs, answerProbability, memoryRewards } from './scoring';
export type { AnswerProbabilityOptions, MemoryRewards } from './scoring';

export { ppoPolicyLoss, AGG_MODES, KL_TYPES } from './loss';
export type { PpoPolicyLossInput, PpoPolicyLossResult, AggMode, KlType } from './loss';

export { CausalLM, Tokenizer, KVCache, MempoRuntimeError, createRng } from './runtime';
export type {
  LoadOptions,
  ForwardInput,
  ForwardOutput,
  ChatMessage,
  ChatTemplateOptions,
  GenerateOptions,
  GenerationResult,
  GenerationStats,
  FinishReason,
  PromptInput,
  ScoreItem,
  ScoreOptions,
  ScoreStats,
  SamplingParams,
  ModelConfig,
  ModelIO,
  RuntimeErrorCode,
  Rng,
} from './runtime';

export {
  runPipeline,
  runAgentLoop,
  LocalModel,
  ScriptedGenerator,
  scoreBatch,
  buildSnapshots,
  toBatchRecord,
  toTensorBatch,
  resolveOptions,
  readQuestions,
  loadForResume,
  summarize,
  evalReport,
  formatEvalReport,
} from './rollout';
export type {
  PipelineInput,
  PipelineResult,
  PipelineStats,
  Trajectory,
  RoundTrace,
  Generator,
  TargetScorer,
  TextCodec,
  GenerationRequest,
  GenerationOutput,
  ScoringItem,
  Snapshot,
  BatchRecord,
  BatchRound,
  TensorBatch,
  PipelineOptions,
  PipelineOptionsInput,
  Question,
  RunSummary,
  EvalReport,
} from './rollout';
export { Bm25Retriever, HttpRetriever, renderSearchObservation, parseRoundOutput, MempoPipelineError } from './tools';
export type { Retriever, RetrievedDoc, ObservationOptions, ParsedRoundOutput, Violation } from './tools';
export { AgentMemory } from './memory';
export type { AgentMemoryOptions, MemoryRecord } from './memory';
export { renderReport } from './report';
export type { ReportOptions } from './report';
export { createRetrievalServer } from './tools';
export type { RetrievalServerOptions } from './tools';
export { createCompletionsServer, HttpCompletionsBackend, CompletionsBackendError, connectCompletionsServers } from './serve';
export { PartialResultsError } from './rollout';
export type { CompletionsServerOptions, HttpCompletionsOptions, CompletionsApi, BackendStats, ServerBackendConfig } from './serve';
