export { ppoPolicyLoss, AGG_MODES, KL_TYPES } from './ppo';
export type { PpoPolicyLossInput, PpoPolicyLossResult, AggMode, KlType } from './ppo';
