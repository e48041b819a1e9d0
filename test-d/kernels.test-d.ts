// Type test of the stable kernel API as published (CommonJS types, dist/index.d.ts): argument
// types and order, results, option shapes. `npm run test:types` after `npm run build:ts`.
import {
  answerProbability,
  backend,
  computeScore,
  emCheck,
  extractSolution,
  f1Score,
  itemF1,
  METRICS,
  finalAdvantage,
  gatherLogProbs,
  grpoOutcomeAdvantage,
  memoryAdvantage,
  memoryRewards,
  normalizeAnswer,
  ppoPolicyLoss,
  setBackend,
  validateFormat,
  AGG_MODES,
  KL_TYPES,
} from 'mempo';
import type {
  AggMode,
  AnswerProbabilityOptions,
  Backend,
  ComputeScoreOptions,
  FormatResult,
  GroupNormOptions,
  KlType,
  MemGrouping,
  MemoryAdvantageOptions,
  MemoryRewards,
  Metric,
  OutcomeAdvantageOptions,
  PpoPolicyLossInput,
  PpoPolicyLossResult,
  ResultOptions,
} from 'mempo';
import { expectType, type Equal, type Expect } from './expect';

type Scores = Float32Array | Float64Array | number[];
type Groups = ArrayLike<number | string>;

// Signatures: parameter tuples (types and order) and results, exactly.
export type Signatures = [
  Expect<Equal<Parameters<typeof gatherLogProbs>, [Float32Array, Int32Array, number, number]>>,
  Expect<Equal<ReturnType<typeof gatherLogProbs>, Float32Array>>,
  Expect<Equal<Parameters<typeof answerProbability>, [Float32Array, Uint8Array, number, number, AnswerProbabilityOptions?]>>,
  Expect<Equal<ReturnType<typeof answerProbability>, Float32Array>>,
  Expect<Equal<Parameters<typeof memoryRewards>, [Float32Array, Uint8Array, number, number, AnswerProbabilityOptions?]>>,
  Expect<Equal<ReturnType<typeof memoryRewards>, MemoryRewards>>,
  Expect<Equal<Parameters<typeof grpoOutcomeAdvantage>, [Scores, Groups, Uint8Array, number, OutcomeAdvantageOptions?]>>,
  Expect<Equal<ReturnType<typeof grpoOutcomeAdvantage>, Float32Array>>,
  Expect<Equal<Parameters<typeof memoryAdvantage>, [Scores, Groups, Int32Array, number, number, MemoryAdvantageOptions?]>>,
  Expect<Equal<ReturnType<typeof memoryAdvantage>, Float32Array>>,
  Expect<Equal<Parameters<typeof finalAdvantage>, [Float32Array, Float32Array, Uint8Array, { alpha?: number }?]>>,
  Expect<Equal<ReturnType<typeof finalAdvantage>, Float32Array>>,
  Expect<Equal<Parameters<typeof ppoPolicyLoss>, [PpoPolicyLossInput]>>,
  Expect<Equal<ReturnType<typeof ppoPolicyLoss>, PpoPolicyLossResult>>,
  Expect<Equal<Parameters<typeof extractSolution>, [string]>>,
  Expect<Equal<ReturnType<typeof extractSolution>, string | null>>,
  Expect<Equal<Parameters<typeof normalizeAnswer>, [string]>>,
  Expect<Equal<ReturnType<typeof normalizeAnswer>, string>>,
  Expect<Equal<Parameters<typeof emCheck>, [string | null, string | readonly string[]]>>,
  Expect<Equal<ReturnType<typeof emCheck>, 0 | 1>>,
  Expect<Equal<Parameters<typeof f1Score>, [string | null, string | readonly string[]]>>,
  Expect<Equal<ReturnType<typeof f1Score>, number>>,
  Expect<Equal<Parameters<typeof itemF1>, [string | null, string | readonly string[]]>>,
  Expect<Equal<ReturnType<typeof itemF1>, number>>,
  Expect<Equal<typeof METRICS, readonly ['em', 'f1', 'item-f1']>>,
  Expect<Equal<Metric, 'em' | 'f1' | 'item-f1'>>,
  Expect<Equal<Parameters<typeof validateFormat>, [string, { requireAnswer?: boolean; access?: boolean; reading?: readonly number[] }?]>>,
  Expect<Equal<ReturnType<typeof validateFormat>, FormatResult>>,
  Expect<Equal<Parameters<typeof computeScore>, [string, string | readonly string[], ComputeScoreOptions?]>>,
  Expect<Equal<ReturnType<typeof computeScore>, number>>,
  Expect<Equal<Parameters<typeof backend>, []>>,
  Expect<Equal<ReturnType<typeof backend>, Backend>>,
  Expect<Equal<Parameters<typeof setBackend>, [Backend]>>,
  Expect<Equal<ReturnType<typeof setBackend>, void>>,
];

// The enums and result shapes the kernels accept and return.
export type Shapes = [
  Expect<Equal<Backend, 'native' | 'native-cuda' | 'js'>>,
  Expect<Equal<AggMode, 'token-mean' | 'seq-mean-token-sum' | 'seq-mean-token-mean'>>,
  Expect<Equal<KlType, 'k1' | 'k2' | 'k3' | 'low_var_kl'>>,
  Expect<Equal<MemGrouping, 'question' | 'question-round'>>,
  Expect<Equal<typeof AGG_MODES, readonly ['token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean']>>,
  Expect<Equal<typeof KL_TYPES, readonly ['k1', 'k2', 'k3', 'low_var_kl']>>,
  Expect<Equal<FormatResult, { valid: true } | { valid: false; reason: string; round: number }>>,
  Expect<Equal<MemoryRewards, { memRewards: Float32Array; pFull: Float32Array; pMem: Float32Array }>>,
  Expect<Equal<PpoPolicyLossResult, { loss: number; grad: Float32Array; clipFrac: number; approxKl: number; kl?: number }>>,
  Expect<Equal<GroupNormOptions, { eps?: number; normByStd?: boolean }>>,
  Expect<Equal<MemoryAdvantageOptions, { eps?: number; normByStd?: boolean; out?: Float32Array; memGrouping?: MemGrouping; rounds?: Int32Array }>>,
  Expect<Equal<OutcomeAdvantageOptions, { eps?: number; normByStd?: boolean; out?: Float32Array }>>,
  Expect<Equal<ResultOptions, { out?: Float32Array }>>,
  Expect<Equal<AnswerProbabilityOptions, { threshold?: number }>>,
  Expect<Equal<ComputeScoreOptions, { formatScore?: number; metric?: 'em' | 'f1' | 'item-f1'; requireAnswer?: boolean; access?: boolean; reading?: readonly number[] }>>,
];

// Calls as a trainer writes them.
const f32 = new Float32Array(8);
const mask = new Uint8Array(8);
expectType<Float32Array>()(gatherLogProbs(f32, new Int32Array(2), 2, 4));
expectType<Float32Array>()(answerProbability(f32, mask, 2, 4, { threshold: -Infinity }));
expectType<MemoryRewards>()(memoryRewards(f32, mask, 1, 4));
expectType<Float32Array>()(grpoOutcomeAdvantage([1, 0], ['q1', 'q1'], mask, 4, { eps: 1e-6, normByStd: false }));
expectType<Float32Array>()(memoryAdvantage(new Float64Array(1), [0], new Int32Array([0, 1, 3]), 2, 4, { memGrouping: 'question-round', rounds: new Int32Array(1) }));
expectType<Float32Array>()(finalAdvantage(f32, f32, mask, { alpha: 0.5 }));
const loss = ppoPolicyLoss({ logp: f32, oldLogp: f32, advantages: f32, mask, rows: 2, cols: 4, aggMode: 'seq-mean-token-sum', refLogp: f32, klType: 'k3' });
expectType<number | undefined>()(({} as PpoPolicyLossInput).globalTokens);
expectType<number | undefined>()(({} as PpoPolicyLossInput).globalSequences);
ppoPolicyLoss({ logp: f32, oldLogp: f32, advantages: f32, mask, rows: 2, cols: 4, globalTokens: 64 });
// @ts-expect-error globalSequences is a count, not a string
ppoPolicyLoss({ logp: f32, oldLogp: f32, advantages: f32, mask, rows: 2, cols: 4, globalSequences: '4' });
expectType<number>()(loss.loss);
expectType<number | undefined>()(loss.kl);
expectType<string | null>()(extractSolution('<answer>Paris</answer>'));
expectType<string>()(normalizeAnswer('The Paris'));
expectType<0 | 1>()(emCheck(null, ['paris']));
expectType<number>()(f1Score('paris', 'Paris'));
expectType<number>()(computeScore('<answer>x</answer>', ['x'], { metric: 'f1', formatScore: 0, requireAnswer: true }));
const format = validateFormat('<answer>x</answer>', { requireAnswer: true });
if (!format.valid) expectType<string>()(format.reason);
expectType<Backend>()(backend());
setBackend('js');

// Wrong argument types do not compile.
// @ts-expect-error logits must be a Float32Array
gatherLogProbs(new Float64Array(8), new Int32Array(2), 2, 4);
// @ts-expect-error targets must be an Int32Array
gatherLogProbs(f32, new Uint32Array(2), 2, 4);
// @ts-expect-error rows and vocab are numbers
gatherLogProbs(f32, new Int32Array(2), '2', 4);
// @ts-expect-error ansMask must be a Uint8Array
answerProbability(f32, f32, 2, 4);
// @ts-expect-error unknown option
answerProbability(f32, mask, 2, 4, { tau: 0 });
// @ts-expect-error snapshots is a number
memoryRewards(f32, mask, [1], 4);
// @ts-expect-error responseMask must be a Uint8Array
grpoOutcomeAdvantage([1, 0], [0, 0], [1, 1], 4);
// @ts-expect-error scores are numbers
grpoOutcomeAdvantage(['1'], [0], mask, 4);
// @ts-expect-error spans must be an Int32Array
memoryAdvantage([0.5], [0], [0, 1, 3], 2, 4);
// @ts-expect-error memGrouping is 'question' or 'question-round'
memoryAdvantage([0.5], [0], new Int32Array(3), 2, 4, { memGrouping: 'round' });
// @ts-expect-error alpha is a number
finalAdvantage(f32, f32, mask, { alpha: '1' });
// @ts-expect-error ppoPolicyLoss takes one input object
ppoPolicyLoss(f32, f32, f32, mask, 2, 4);
// @ts-expect-error the input needs oldLogp, advantages, mask, rows and cols
ppoPolicyLoss({ logp: f32 });
// @ts-expect-error unknown aggregation mode
ppoPolicyLoss({ logp: f32, oldLogp: f32, advantages: f32, mask, rows: 2, cols: 4, aggMode: 'mean' });
// @ts-expect-error text must be a string
extractSolution(null);
// @ts-expect-error s must be a string
normalizeAnswer(42);
// @ts-expect-error golds are strings
emCheck('paris', [1]);
// @ts-expect-error pred is a string or null
f1Score(undefined, 'paris');
// @ts-expect-error golds are strings
itemF1('paris', 7);
// @ts-expect-error response must be a string
validateFormat(['<answer>x</answer>']);
// @ts-expect-error metric is 'em', 'f1' or 'item-f1'
computeScore('<answer>x</answer>', 'x', { metric: 'bleu' });
// @ts-expect-error unknown backend
setBackend('cuda');
// @ts-expect-error backend() takes no argument
backend('js');
