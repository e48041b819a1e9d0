/**
 * The rollout engine and the MemPO pipeline (SPEC §1-§8): what `src/index.ts` re-exports.
 * Values and types listed apart.
 */
export { runPipeline, questionBatches } from './pipeline';
export type { PipelineInput, PipelineResult, PipelineStats, ProgressSink, StageTimes } from './pipeline';
export { runAgentLoop, applyGeneration, applyObservation, newTrajectory, roundContext, protocolIds } from './agent';
export type { Trajectory, RoundTrace, ObservationTrace, TrajectoryState, DoneReason, AgentLoopInput, AgentLoopStats, AgentLoopHooks } from './agent';
export { LocalModel, PartialResultsError } from './generator';
export type {
  Generator, TargetScorer, TextCodec, GenerationRequest, GenerationOutput, GenerateParams, GenerationFinish, RequestTag, ScoringItem, ScoringTag, LocalModelOptions,
} from './generator';
export { ScriptedGenerator } from './scripted';
export type { ScriptFn } from './scripted';
export { scoreBatch, buildSnapshots, answerTarget, scoringText } from './score';
export type { Snapshot, ScoredTrajectory, RoundRewards } from './score';
export { toBatchRecord, toTensorBatch } from './batch';
export type { BatchRecord, BatchRound, TensorBatch } from './batch';
export { resolveOptions, pipelineSchema } from './options';
export type {
  PipelineOptions, PipelineOptionsInput, RolloutOptions, SamplingOptions, ToolOptions, MemoryOptions, RewardOptions, AdvantageOptions,
} from './options';
export { readQuestions, checkQuestions, questionSchema } from './questions';
export type { Question, QuestionInput } from './questions';
export { JsonlWriter, loadForResume, writeFileAtomic } from './io';
export type { ExistingRun } from './io';
export { summarize, evalReport, formatEvalReport } from './summary';
export type { RunSummary, EvalReport, EvalBucket } from './summary';
export { mixSeed } from './seed';
