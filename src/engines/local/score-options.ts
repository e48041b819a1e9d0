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
  /** Passes fetch only their target rows (the model's graph has selected logits and the option is on). */
  select: boolean;
}

/** What one pass may hold: padded tokens, and target rows (selected logits; Infinity without). */
export interface PassLimits {
  tokens: number;
  targets: number;
}

/** An item as the scorer runs it. */
export interface Prepared {
  index: number;
  context: ArrayLike<number>;
  target: Int32Array;
  length: number;
}

const DEFAULT_MAX_LOGITS_BYTES = 256 * 1024 * 1024;
/**
 * With selected logits a pass holds targets × V × 4 bytes and the context tokens cost no logits,
 * so a smaller default bound costs only more (shorter-batched) passes: 24 MiB is 41 targets at
 * V = 151,936 and 2,048 at V = 3,072 (bench/README.md: the pass's added memory 7× below the
 * full path's at the same time as 32 MiB; 16 MiB is 9× but 1.4× slower).
 */
const DEFAULT_MAX_SELECTED_LOGITS_BYTES = 24 * 1024 * 1024;
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
  const selectOpt = options.selectLogits ?? true;
  if (typeof selectOpt !== 'boolean') throw invalidArgument('a boolean', 'options.selectLogits', selectOpt);
  const select = selectOpt && model.io.selectLogits;
  const maxLogitsBytes = options.maxLogitsBytes ?? (select ? DEFAULT_MAX_SELECTED_LOGITS_BYTES : DEFAULT_MAX_LOGITS_BYTES);
  if (typeof maxLogitsBytes !== 'number' || !(maxLogitsBytes > 0)) throw invalidArgument('a positive number', 'options.maxLogitsBytes', maxLogitsBytes);
  const gather: GatherFn = options.gather ?? gatherLogProbs;
  if (typeof gather !== 'function') throw invalidArgument('a function', 'options.gather', gather);
  const sharePrefixes = options.sharePrefixes ?? true;
  if (typeof sharePrefixes !== 'boolean') throw invalidArgument('a boolean', 'options.sharePrefixes', sharePrefixes);
  const minShared = options.minSharedPrefix ?? DEFAULT_MIN_SHARED_PREFIX;
  if (typeof minShared !== 'number' || !(minShared >= 1)) throw invalidArgument('a number >= 1', 'options.minSharedPrefix', minShared);
  return { padding, truncate, maxBatchTokens, maxLogitsBytes, gather, sharePrefixes, minShared, select };
}

/**
 * docs/algorithm.md §4: full logits bound the padded tokens of a pass by maxLogitsBytes; selected
 * logits bound only its target rows, and the tokens by maxBatchTokens alone.
 */
export function passLimits(opts: ResolvedScore, vocab: number): PassLimits {
  const rows = Math.max(1, Math.floor(opts.maxLogitsBytes / (vocab * 4)));
  return opts.select ? { tokens: opts.maxBatchTokens, targets: rows } : { tokens: Math.min(opts.maxBatchTokens, rows), targets: Infinity };
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
