/**
 * mempo: MemPO (Self-Memory Policy Optimization) for Node.
 * The kernel API below is stable: names and argument order are fixed for trainers that depend
 * on them. Every kernel validates its input, then runs on the native addon or the pure-JS twin.
 */
export { backend, setBackend, nativeLoadErrors, uploadToDevice, gatherLogProbsOnDevice } from './kernels/backend';
export type { Backend, NativeDeviceBuffer } from './kernels/backend';

export { extractSolution, normalizeAnswer, emCheck, f1Score, validateFormat, computeScore } from './kernels/outcome-reward';
export type { FormatResult, ComputeScoreOptions } from './kernels/outcome-reward';

export { grpoOutcomeAdvantage } from './kernels/outcome-advantage';
export { memoryAdvantage } from './kernels/memory-advantage';
export { finalAdvantage } from './kernels/final-advantage';
export { groupNormalize } from './kernels/group-normalize';
export type { GroupNormOptions } from './kernels/outcome-advantage';
export type { MemoryAdvantageOptions, MemGrouping } from './kernels/memory-advantage';

export { gatherLogProbs } from './kernels/gather-log-probs';
export { answerProbability, memoryRewards } from './kernels/answer-probability';
export type { AnswerProbabilityOptions, MemoryRewards } from './kernels/answer-probability';

export { ppoPolicyLoss, AGG_MODES, KL_TYPES } from './kernels/ppo-policy-loss';
export type { PpoPolicyLossInput, PpoPolicyLossResult, AggMode, KlType } from './kernels/ppo-policy-loss';

export { CausalLM } from './engines/local/causal-lm';
export { Tokenizer } from './engines/local/tokenizer';
export { KVCache } from './engines/local/kv-cache';
export { MempoRuntimeError } from './engines/local/errors';
export { createRng } from './rng';
export type { LoadOptions, ForwardInput, ForwardOutput } from './engines/local/causal-lm';
export type { ChatMessage, ChatTemplateOptions } from './engines/local/tokenizer';
export type { GenerateOptions, GenerationResult, GenerationStats, FinishReason, PromptInput } from './engines/local/generate';
export type { ScoreItem, ScoreOptions, ScoreStats } from './engines/local/scorer';
export type { SamplingParams } from './engines/local/sampler';
export type { ModelConfig, ModelIO } from './engines/local/model-dir';
export type { RuntimeErrorCode } from './engines/local/errors';
export type { Rng } from './rng';

export { runPipeline } from './pipeline/pipeline';
export { runAgentLoop } from './pipeline/rollout';
export { LocalModel } from './engines/local/local-model';
export { ScriptedGenerator } from './engines/scripted';
export { scoreBatch } from './pipeline/pipeline';
export { buildSnapshots } from './pipeline/snapshots';
export { toBatchRecord, toTensorBatch } from './pipeline/batch';
export { resolveOptions } from './options';
export { readQuestions } from './io/questions';
export { loadForResume } from './io/run-dir';
export { summarize, evalReport, formatEvalReport } from './pipeline/summary';
export type { PipelineInput, PipelineResult, PipelineStats, BatchScoringStats } from './pipeline/pipeline';
export type { Trajectory, RoundTrace } from './contracts';
export type { Generator, TargetScorer, TextCodec, GenerationRequest, GenerationOutput, ScoringItem } from './contracts';
export type { Snapshot } from './contracts';
export type { BatchRecord, BatchRound, TensorBatch } from './pipeline/batch';
export type { PipelineOptions, PipelineOptionsInput } from './options';
export type { Question } from './io/questions';
export type { RunSummary, EvalReport } from './pipeline/summary';
export { Bm25Retriever } from './retrieval/bm25';
export { HttpRetriever } from './retrieval/http-retriever';
export { renderSearchObservation } from './retrieval/observation';
export { parseRoundOutput } from './protocol/round';
export { MempoPipelineError } from './errors';
export type { ObservationOptions } from './retrieval/observation';
export type { Retriever, RetrievedDoc } from './contracts';
export type { ParsedRoundOutput, Violation } from './protocol/round';
export { AgentMemory } from './protocol/agent-memory';
export type { AgentMemoryOptions, MemoryRecord } from './protocol/agent-memory';
export { renderReport } from './io/report';
export type { ReportOptions } from './io/report';
export { createRetrievalServer } from './servers/retrieval-server';
export type { RetrievalServerOptions } from './servers/retrieval-server';
export { createCompletionsServer } from './servers/completions-server';
export { HttpCompletionsBackend, CompletionsBackendError } from './engines/http/client';
export { connectCompletionsServers } from './engines/http/connect';
export { PartialResultsError } from './contracts';
export type { CompletionsServerOptions } from './servers/completions-server';
export type { HttpCompletionsOptions, CompletionsApi, BackendStats } from './engines/http/client';
export type { ServerBackendConfig } from './engines/http/connect';
