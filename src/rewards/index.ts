export { extractSolution, normalizeAnswer, emCheck, f1Score, validateFormat, computeScore } from './outcome';
export type { FormatResult, ComputeScoreOptions } from './outcome';
