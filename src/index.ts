/**
 * mempo: MemPO (Self-Memory Policy Optimization) for Node — the table of contents of the package.
 * Grouped by the MemPO pipeline (docs/algorithm.md), values first, then types, in each group.
 *
 * The kernel API (first group) is stable: names, argument order and results are fixed for trainers
 * that depend on them. Every kernel validates its input, then runs on the native addon (C++ or
 * CUDA) or its pure-JS twin.
 */

// The declarations use Node's types (http.Server, ChildProcess): a consumer whose tsconfig lists
// no "types" (as `tsc --init` writes since TypeScript 5.9) still gets them, from @types/node.
/// <reference types="node" preserve="true" />
// And the ES2020 library they name (ReadonlyMap, BigInt64Array, AsyncGenerator): a consumer compiling with
// TypeScript's defaults (target ES5, its lib) would not otherwise know them.
/// <reference lib="es2020" preserve="true" />

// Kernels (src/kernels): outcome reward §3, memory reward §4, advantages §5, loss §6, the backend.
export {
  backend, setBackend, nativeLoadErrors, nativeInfo, uploadToDevice, gatherLogProbsOnDevice,
  extractSolution, normalizeAnswer, emCheck, f1Score, itemF1, METRICS, validateFormat, computeScore,
  gatherLogProbs, answerProbability, memoryRewards,
  grpoOutcomeAdvantage, memoryAdvantage, finalAdvantage, groupNormalize,
  ppoPolicyLoss, AGG_MODES, KL_TYPES,
} from './kernels';
export { mempoAdvantages, type MempoAdvantagesInput, type MempoAdvantages } from './kernels'; // §5 in one pass
export type {
  Backend, NativeDeviceBuffer, NativeInfo, FormatResult, ComputeScoreOptions, Metric, AnswerProbabilityOptions, MemoryRewards,
  GroupNormOptions, OutcomeAdvantageOptions, ResultOptions, MemoryAdvantageOptions, MemGrouping, PpoPolicyLossInput, PpoPolicyLossResult, AggMode, KlType,
} from './kernels';

// The protocol (src/protocol, §1, §7): the round grammar, the model's protocol ids, the context window.
export { parseRoundOutput } from './protocol/round';
export { ACCESS_GRAMMAR, SEARCH_GRAMMAR, grammarFor } from './protocol/grammar';
export { resolveProtocolIds } from './protocol/special-ids';
export { STOP_STRINGS } from './protocol/tags'; // what a Generator of your own stops at
export { AgentMemory } from './protocol/agent-memory';
export type { ParsedRoundOutput, Violation } from './protocol/round';
export type { ActionName, Grammar, GrammarSlot, ViolationCode } from './protocol/grammar';
export type { ProtocolTokenIds, IdCodec, IdConfig, RoundTag, StopString } from './protocol/special-ids';
export type { AgentMemoryOptions, MemoryRecord, MemoryRecordType } from './protocol/agent-memory';

// The pipeline (src/pipeline), one step a file: rollout §1-§2 → outcome reward §3 → snapshots §2 →
// snapshot scoring and memory reward §4 → advantages §5 → batch §8; pipeline.ts wires them.
export { runAgentLoop } from './pipeline/rollout';
export { outcomeReward } from './pipeline/outcome-reward';
export { buildSnapshots } from './pipeline/snapshots';
export { scoreSnapshots } from './pipeline/snapshot-scoring';
export { snapshotMemoryRewards } from './pipeline/memory-reward';
export { computeAdvantages } from './pipeline/advantages';
export { toBatchRecord, toTensorBatch } from './pipeline/batch';
export { runPipeline, pipelineBatches, scoreBatch } from './pipeline/pipeline';
export { summarize } from './pipeline/summary';
export { evalReport, formatEvalReport } from './pipeline/eval-report';
export { resolveOptions, DEFAULTS } from './options';
export type { AgentLoopInput, AgentLoopStats } from './pipeline/rollout';
export type { TensorBatch } from './pipeline/batch';
export type { PipelineInput, PipelineResult, PipelineBatch, PipelineStats, BatchScoringStats, ProgressSink, StageTimes } from './pipeline/pipeline';
export type { RunSummary, RunContext } from './pipeline/summary';
export type { EvalReport, EvalBucket } from './pipeline/eval-report';
export type { AccessFigures, GoldInMemAfterShrink, PageQuestionsEm } from './pipeline/page-figures';
export type { AgentLoopHooks, PageCursor, QueuedObservation, RolloutTrajectory } from './pipeline/trajectory';
export type { SnapshotScores } from './pipeline/snapshot-scoring';
export type { PipelineOptions, PipelineOptionsInput } from './options';

// What every layer shares (src/contracts/) and the one error class (src/errors.ts).
export { PartialResultsError } from './contracts';
export { MempoError, MempoPipelineError, MempoRuntimeError } from './errors';
export type {
  TextCodec, Generator, TargetScorer, GenerationRequest, GenerateParams, GenerationOutput, GenerationFinish, RequestTag, ScoringItem, ScoringTag, ChatTurn, Retriever, RetrievedDoc, Page,
  Question, Trajectory, TrajectoryState, RoundTrace, ObservationTrace, RoundViolation, RoundRewards, Snapshot, ScoredTrajectory, BatchRecord, BatchRound, DoneReason,
  Learner, LearnerSample, LearnerForwardOptions, LearnerInfo, OptimParams,
} from './contracts';
export type { MempoErrorCode, PipelineErrorCode, RuntimeErrorCode, ServerErrorCode, LearnerErrorCode } from './errors';

// Engines: the embedded ONNX Runtime model (src/engines/local), inference servers (src/engines/http), a scripted fake.
export { CausalLM } from './engines/local/causal-lm';
export { Tokenizer } from './engines/local/tokenizer';
export { KVCache } from './engines/local/kv-cache';
export { LocalModel } from './engines/local/local-model';
export { HttpCompletionsBackend, CompletionsBackendError } from './engines/http/client';
export { connectCompletionsServers } from './engines/http/connect';
export { ScriptedGenerator } from './engines/scripted';
export { createRng } from './rng';
export type { LoadOptions, ForwardInput, ForwardOutput, ReloadResult } from './engines/local/causal-lm';
export type { ChatMessage, ChatTemplateOptions } from './engines/local/tokenizer';
export type { GenerateOptions, GenerationResult, GenerationStats, FinishReason, PromptInput } from './engines/local/generate';
export type { ScoreItem, ScoreOptions, ScoreStats } from './engines/local/scorer';
export type { SamplingParams } from './engines/local/sampler';
export type { ForwardModel, GatherFn, GenerationWithStats, ScoresWithStats } from './engines/local/types';
export type { LocalModelOptions } from './engines/local/local-model';
export type { EndpointStats } from './engines/http/pool';
export type { ScriptFn } from './engines/scripted';
export type { ModelConfig, ModelIO } from './engines/local/model-dir';
export type { HttpCompletionsOptions, CompletionsApi, BackendStats, WeightUpdateResult } from './engines/http/client';
export type { ServerBackendConfig } from './engines/http/connect';
export type { Rng } from './rng';

// The training loop (src/train, §9) and the learner behind it (src/learner, docs/learner.md).
export { runTraining } from './train/loop';
export { runStep, evaluate, stepQuestions } from './train/step';
export { policyUpdate } from './train/update';
export { trainRows, microBatches } from './train/samples';
export { resolveTrainOptions } from './train/options';
export { checkpoints, checkpointDir, readMetrics } from './train/checkpoint';
export { HttpLearner } from './learner/http-learner';
export { spawnLearner, findPython, SpawnedLearner } from './learner/spawn';
export type { TrainContext, TrainPhase } from './train/step';
export type { TrainRun } from './train/loop';
export type { ResumePoint, TrainerState } from './train/checkpoint';
export type { UpdateStats } from './train/update';
export type { TrainRow } from './train/samples';
export type { TrainOptions, TrainOptionsInput, LossOptions, OptimOptions } from './train/options';
export type { StepMetrics, Moments } from './train/metrics';
export type { HttpLearnerOptions } from './learner/http-learner';
export type { SpawnLearnerOptions } from './learner/spawn';

// Retrieval (src/retrieval) and the servers mempo runs (src/servers).
export { Bm25Retriever } from './retrieval/bm25';
export { HttpRetriever } from './retrieval/http-retriever';
export { renderSearchObservation, renderWebpage, renderNoPage, chunkPage } from './retrieval/observation';
export { PageStore } from './retrieval/pages';
export { createRetrievalServer } from './servers/retrieval-server';
export { createCompletionsServer } from './servers/completions-server';
export type { ObservationOptions, ObservationFormat, PagingOptions, WebpageObservation } from './retrieval/observation';
export type { Bm25Options } from './retrieval/bm25';
export type { HttpRetrieverOptions } from './retrieval/http-retriever';
export type { RetrievalServerOptions } from './servers/retrieval-server';
export type { CompletionsServerOptions } from './servers/completions-server';

// Capture (issue 45): the endpoint records tagged calls into an EpisodeRecorder (src/servers/capture-hook.ts).
export { EpisodeRecorder, CAPTURE_DEFAULTS, EPISODE_HEADER } from './agents/capture';
export type { CapturedCall, CapturedEpisode, CaptureLimits, Admission, CaptureRefusal, Refused } from './agents/capture';
export type { CaptureServerOptions } from './servers/capture-hook';

// Files (src/io): questions, the run directory with resume, the HTML report.
export { readQuestions, readQuestionFiles } from './io/questions';
export { EMBEDDED } from './paths'; // the embedded model, corpus, question splits and learner inside the installed package
export { loadForResume } from './io/run-dir';
export { renderReport } from './io/report';
export { trainReportHtml } from './io/train-report';
export type { ReportOptions } from './io/report';
export type { ExistingRun, ResumeCheck } from './io/run-dir';

// Agents of your own (src/agents, docs/agents.md): run them through the OpenAI-compatible endpoint, train on what it captured.
export { collectEpisodes } from './agents/collect';
export { loadAgentModule } from './agents/agent-module';
export { SYSTEM_PROMPT } from './protocol/chat'; // the built-in agent's system message (no page tool)
export { observationSegment } from './protocol/stream'; // "\n" + observation + "\n": what the built-in agent appends after a tool call
export type { AgentClient, AgentEpisode, CaptureEndpoint, CollectOptions, CollectResult } from './agents/collect';
export type { AgentModule } from './agents/agent-module';
export type { AgentTask, AgentRecordSource } from './agents/episode-records';
export type { RolloutSource } from './train/step';
