/** The stable kernel API (docs/algorithm.md §3-§6): each kernel validates, then runs native or its JS twin. */
export { backend, setBackend, nativeLoadErrors, nativeInfo, uploadToDevice, gatherLogProbsOnDevice } from './backend';
export { extractSolution, normalizeAnswer, emCheck, f1Score, itemF1, METRICS, validateFormat, computeScore } from './outcome-reward';
export { gatherLogProbs } from './gather-log-probs';
export { answerProbability, memoryRewards } from './answer-probability';
export { grpoOutcomeAdvantage } from './outcome-advantage';
export { memoryAdvantage } from './memory-advantage';
export { finalAdvantage } from './final-advantage';
export { mempoAdvantages, type MempoAdvantagesInput, type MempoAdvantages } from './mempo-advantages';
export { groupNormalize } from './group-normalize';
export { ppoPolicyLoss, AGG_MODES, KL_TYPES } from './ppo-policy-loss';
export type { Backend, NativeDeviceBuffer, NativeInfo } from './backend';
export type { FormatResult, ComputeScoreOptions, Metric } from './outcome-reward';
export type { AnswerProbabilityOptions, MemoryRewards } from './answer-probability';
export type { GroupNormOptions, OutcomeAdvantageOptions } from './outcome-advantage';
export type { ResultOptions } from './result';
export type { MemoryAdvantageOptions, MemGrouping } from './memory-advantage';
export type { PpoPolicyLossInput, PpoPolicyLossResult, AggMode, KlType } from './ppo-policy-loss';
