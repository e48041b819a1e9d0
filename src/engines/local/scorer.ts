/**
 * Teacher-forced target scoring (docs/algorithm.md §4): for each item, log π(target_t | context,
 * target_<t) for every target token.
 *
 * All items of a call are sorted by length (longest first) and packed into micro-batches whose
 * padded size (rows × longest row) stays within a token budget (score-batch.ts runs one). On a
 * graph with selected logits (onnx-select.ts) a pass computes the LM head only at its target
 * positions, so the logits bound limits its targets rather than its tokens (`passLimits`).
 *
 * Prefix sharing (default on, see prefix.ts): an item whose context is a prefix of another
 * item's context (MemPO full contexts of rounds 2..R of one trajectory) is not run over its
 * context again; its host's micro-batch also fetches `present.*`, and the member is scored by a
 * pass over its target only, on a slice of the host's cache (score-tails.ts).
 */
import { invalidArgument } from './errors';
import { findSharing, type PrefixMember } from './prefix';
import { runMicroBatch } from './score-batch';
import { passLimits, prepareItem, resolveScoreOptions, type PassLimits, type Prepared, type ResolvedScore } from './score-options';
import { runTails, type TailRow } from './score-tails';
import type { ForwardModel, ScoreItem, ScoreOptions, ScoreStats, ScoresWithStats } from './types';

export type { GatherFn, ScoreItem, ScoreOptions, ScoreStats, ScoresWithStats } from './types';

/** Scores every item; log-probs in item order, with this call's statistics. */
export async function scoreTargets(model: ForwardModel, items: readonly ScoreItem[], options: ScoreOptions = {}): Promise<ScoresWithStats> {
  if (!Array.isArray(items)) throw invalidArgument('an array of { contextIds, targetIds }', 'items', items);
  const opts = resolveScoreOptions(model, options);
  const prepared = items.map((item, index) => prepareItem(model, item, index, opts.truncate));

  const results: Float32Array[] = new Array(items.length);
  const chains = opts.sharePrefixes && model.io.hasPositionIds ? findSharing(prepared, opts.minShared) : new Map<number, PrefixMember[]>();
  const isMember = new Uint8Array(prepared.length);
  for (const members of chains.values()) for (const m of members) isMember[m.pos] = 1;
  const order = prepared.filter((_, pos) => !isMember[pos]).sort((a, b) => b.length - a.length || a.index - b.index);
  const limits = passLimits(opts, model.config.vocabSize);
  const stats: ScoreStats = { items: items.length, microBatches: 0, tokens: 0, paddedTokens: 0, targetTokens: 0, sharedItems: 0, tailTokens: 0 };
  for (const it of prepared) stats.targetTokens += it.target.length;
  for (const batch of microBatches(order, limits)) {
    const members = membersOf(batch, chains, prepared);
    await scoreMicroBatch(model, batch, members, limits, opts, results, stats);
  }
  return { results, stats };
}

/** Consecutive runs of `order` (longest first) whose rows × longest row, and targets, stay within `limits`. */
function microBatches(order: readonly Prepared[], limits: PassLimits): Prepared[][] {
  const out: Prepared[][] = [];
  let i = 0;
  while (i < order.length) {
    const L = order[i]!.length;
    let j = i + 1;
    let targets = order[i]!.target.length;
    while (j < order.length && (j - i + 1) * L <= limits.tokens && targets + order[j]!.target.length <= limits.targets) targets += order[j++]!.target.length;
    out.push(order.slice(i, j));
    i = j;
  }
  return out;
}

/** The members of the batch's hosts, each with its host's row and the cached positions it reuses. */
function membersOf(batch: readonly Prepared[], chains: Map<number, PrefixMember[]>, prepared: readonly Prepared[]): TailRow[] {
  const members: TailRow[] = [];
  batch.forEach((host, row) => {
    for (const m of chains.get(host.index) ?? []) {
      const item = prepared[m.pos]!;
      members.push({ item, hostRow: row, past: Math.min(m.shared, item.context.length - 1) });
    }
  });
  return members;
}

/** The full pass of one micro-batch (its first row is the longest), then its members' tail passes. */
async function scoreMicroBatch(
  model: ForwardModel,
  batch: readonly Prepared[],
  members: readonly TailRow[],
  limits: PassLimits,
  opts: ResolvedScore,
  results: Float32Array[],
  stats: ScoreStats,
): Promise<void> {
  const L = batch[0]!.length;
  const run = await runMicroBatch(model, batch, L, opts, results, members.length > 0);
  stats.microBatches++;
  stats.paddedTokens += batch.length * L;
  for (const it of batch) stats.tokens += it.length;
  if (run.present === undefined) return;
  const tail = await runTails(model, run.present, run.offsets, members, limits, opts, results);
  stats.microBatches += tail.passes;
  stats.tailTokens += tail.tokens;
  stats.paddedTokens += tail.padded;
  stats.sharedItems += members.length;
}
