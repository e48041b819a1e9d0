export { gatherLogProbs } from './gather';
export { answerProbability, memoryRewards } from './answer';
export type { AnswerProbabilityOptions, MemoryRewards } from './answer';
