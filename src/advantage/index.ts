export { grpoOutcomeAdvantage } from './outcome';
export type { GroupNormOptions } from './outcome';
export { memoryAdvantage } from './memory';
export type { MemoryAdvantageOptions, MemGrouping } from './memory';
export { finalAdvantage } from './final';
export { groupNormalize } from './normalize';
