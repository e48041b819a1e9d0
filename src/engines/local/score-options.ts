/**
 * Request checks of `scoreTargets`: the options resolved to their defaults, and each item's ids
 * checked (and its context truncated on the left if asked).
 */
import { DEFAULTS } from '../../options';
import { gatherLogProbs } from '../../kernels/gather-log-probs';
import { MempoError } from '../../errors';
import { invalidArgument } from './errors';
import type { ForwardModel, GatherFn, ScoreItem, ScoreOptions } from './types';
import { checkTokenIds } from './validate';

/** The options of one call with every default applied. */
export interface ResolvedScore {
  padding: 'right' | 'left';
  truncate: 'error' | 'left';
  maxBatchTokens: number;
  maxLogitsBytes: number;
  gather: GatherFn;
  sharePrefixes: boolean;
  minShared: number;
}

/** An item as the scorer runs it. */
export interface Prepared {
  index: number;
  context: ArrayLike<number>;
  target: Int32Array;
  length: number;
}

const DEFAULT_MAX_LOGITS_BYTES = 256 * 1024 * 1024;
const DEFAULT_MIN_SHARED_PREFIX = 16;

/** Checks the options in a fixed order (the first bad one is reported) and applies defaults. */
export function resolveScoreOptions(model: ForwardModel, options: ScoreOptions): ResolvedScore {
  if (options === null || typeof options !== 'object') throw invalidArgument('an options object', 'options', options);
  const padding = options.padding ?? 'right';
  if (padding !== 'right' && padding !== 'left') throw invalidArgument("'right' or 'left'", 'options.padding', padding);
  if (padding === 'left' && !model.io.hasPositionIds) {
    throw new MempoError('ERR_INVALID_ARGUMENT', `padding: 'left' needs position_ids, which ${model.modelPath} does not take`);
  }
  const truncate = options.truncate ?? 'error';
  if (truncate !== 'error' && truncate !== 'left') throw invalidArgument("'error' or 'left'", 'options.truncate', truncate);
  const maxBatchTokens = options.maxBatchTokens ?? DEFAULTS.scorerMaxBatchTokens;
  if (!Number.isInteger(maxBatchTokens) || maxBatchTokens < 1) throw invalidArgument('a positive integer', 'options.maxBatchTokens', maxBatchTokens);
  const maxLogitsBytes = options.maxLogitsBytes ?? DEFAULT_MAX_LOGITS_BYTES;
  if (typeof maxLogitsBytes !== 'number' || !(maxLogitsBytes > 0)) throw invalidArgument('a positive number', 'options.maxLogitsBytes', maxLogitsBytes);
  const gather: GatherFn = options.gather ?? gatherLogProbs;
  if (typeof gather !== 'function') throw invalidArgument('a function', 'options.gather', gather);
  const sharePrefixes = options.sharePrefixes ?? true;
  if (typeof sharePrefixes !== 'boolean') throw invalidArgument('a boolean', 'options.sharePrefixes', sharePrefixes);
  const minShared = options.minSharedPrefix ?? DEFAULT_MIN_SHARED_PREFIX;
  if (typeof minShared !== 'number' || !(minShared >= 1)) throw invalidArgument('a number >= 1', 'options.minSharedPrefix', minShared);
  return { padding, truncate, maxBatchTokens, maxLogitsBytes, gather, sharePrefixes, minShared };
}

/** Checks `items[index]`: ids in the vocabulary, a non-empty context and target, the model's maximum length. */
export function prepareItem(model: ForwardModel, item: ScoreItem, index: number, truncate: ResolvedScore['truncate']): Prepared {
  const V = model.config.vocabSize;
  const maxPos = model.config.maxPositions;
  if (item === null || typeof item !== 'object') throw invalidArgument('{ contextIds, targetIds }', `items[${index}]`, item);
  let context = checkTokenIds(item.contextIds, V, `items[${index}].contextIds`);
  const targetIds = checkTokenIds(item.targetIds, V, `items[${index}].targetIds`);
  if (targetIds.length === 0) throw new MempoError('ERR_EMPTY_TARGET', `items[${index}].targetIds is empty; there is nothing to score`);
  if (context.length === 0) {
    throw new MempoError('ERR_EMPTY_CONTEXT', `items[${index}].contextIds is empty; the first target token needs at least one context token`);
  }
  const length = context.length + targetIds.length;
  if (length > maxPos) {
    const keep = maxPos - targetIds.length;
    if (truncate === 'error' || keep < 1) {
      throw new MempoError(
        'ERR_CONTEXT_TOO_LONG',
        `items[${index}] has ${context.length} context + ${targetIds.length} target tokens = ${length}, more than the model's maximum length ${maxPos}` +
          (keep < 1 ? '' : " (pass truncate: 'left' to drop the oldest context tokens)"),
      );
    }
    context = Array.prototype.slice.call(context, context.length - keep) as number[];
  }
  return { index, context, target: Int32Array.from(targetIds), length: context.length + targetIds.length };
}
