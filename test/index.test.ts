/**
 * The package root keeps the stable kernel API: trainers import these names, so a refactor that
 * drops or renames one (or exports a type where a function was) fails here. The list is written
 * out, not read from src/index.ts.
 */
import * as api from '../src';

const KERNEL_FUNCTIONS = [
  'gatherLogProbs',
  'answerProbability',
  'memoryRewards',
  'grpoOutcomeAdvantage',
  'memoryAdvantage',
  'finalAdvantage',
  'groupNormalize',
  'ppoPolicyLoss',
  'extractSolution',
  'normalizeAnswer',
  'emCheck',
  'f1Score',
  'validateFormat',
  'computeScore',
  'backend',
  'setBackend',
  'nativeLoadErrors',
  'nativeInfo',
] as const;

describe('package root exports', () => {
  const exported = api as unknown as Record<string, unknown>;

  it.each(KERNEL_FUNCTIONS)('exports the kernel function %s', (name) => {
    expect(typeof exported[name]).toBe('function');
  });

  it('exports the loss enums as lists', () => {
    expect(exported.AGG_MODES).toEqual(['token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean']);
    expect(exported.KL_TYPES).toEqual(['k1', 'k2', 'k3', 'low_var_kl']);
  });
});
