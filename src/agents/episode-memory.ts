/**
 * The MemPO memory reward on captured episodes (docs/algorithm.md §2, §4, §5).
 * Call k ≥ 2 of an episode (1-based, as rounds) whose sampled ids hold a closed `<mem>` is a
 * snapshot when its task has golds:
 *   memContext  = the episode's first prompt + the call's sampled ids up to the token that
 *                 completes `</mem>` (§2: the question and the memory alone);
 *   fullContext = the episode's history before the call: the first prompt, then per earlier call
 *                 its sampled ids and whatever the next prompt added past what it shares with
 *                 them (for an agent that appends, exactly the next prompt; for one that rewrites
 *                 its context, every tool result and turn it was shown, each once).
 * All snapshots of the batch are scored in ONE scorer call (the 2N pass); the memory advantage is
 * written on each mem span and the final advantage is outcome + α · memory, as in the pipeline.
 */
import type { ScoringItem, TargetScorer, TextCodec } from '../contracts';
import { finalAdvantage } from '../kernels/final-advantage';
import { memoryAdvantage } from '../kernels/memory-advantage';
import type { AdvantageOptions, MemoryOptions } from '../options';
import { snapshotMemoryRewards } from '../pipeline/memory-reward';
import { answerTarget, pickGold } from '../pipeline/snapshots';
import { locateMem } from '../protocol/mem-tokens';
import { maxOf } from '../util';
import type { CapturedCall } from './capture';
import type { RecordOrigin } from './episode-records';


interface AgentSnapshot {
  row: number;
  /** Index into the record's rounds. */
  round: number;
  fullContext: number[];
  memContext: number[];
  span: [number, number];
  targetIds: number[];
  ansMask: Uint8Array;
  group: string;
}

/** fullBefore[k]: the episode's history before call k (see the header). */
export function episodeHistories(calls: readonly CapturedCall[]): number[][] {
  const out: number[][] = [];
  if (calls.length === 0) return out;
  const history = [...calls[0]!.promptIds];
  for (let k = 0; k < calls.length; k++) {
    if (k > 0) {
      const prev = calls[k - 1]!;
      const seen = [...prev.promptIds, ...prev.sampledIds];
      const p = calls[k]!.promptIds;
      let shared = 0;
      while (shared < p.length && shared < seen.length && p[shared] === seen[shared]) shared++;
      for (let i = shared; i < p.length; i++) history.push(p[i]!);
    }
    out.push([...history]);
    history.push(...calls[k]!.sampledIds);
  }
  return out;
}

function snapshotsOf(origins: readonly RecordOrigin[], codec: TextCodec, memory: MemoryOptions): AgentSnapshot[] {
  const snaps: AgentSnapshot[] = [];
  const histories = new Map<readonly CapturedCall[], number[][]>();
  origins.forEach(({ record, calls, sample }, row) => {
    if (record.excluded || record.golds.length === 0) return;
    const target = answerTarget(pickGold(record.golds, memory.gold), memory.answerTemplate, codec, memory.targetTokenization);
    sample.calls.forEach((sc, round) => {
      if (sc.index < 1) return; // §2: the first call has no history
      const call = calls[sc.index]!;
      const mem = locateMem(codec, call.sampledIds, codec.decode(call.sampledIds));
      if (mem === null) return;
      const [a, b] = memory.memSpan === 'inclusive' ? mem.inclusive : mem.content;
      if (b <= a) return;
      let h = histories.get(calls);
      if (h === undefined) histories.set(calls, (h = episodeHistories(calls)));
      snaps.push({
        row,
        round,
        fullContext: h[sc.index]!,
        memContext: [...calls[0]!.promptIds, ...call.sampledIds.slice(0, mem.inclusive[1])],
        span: [sc.start + a, sc.start + b],
        targetIds: target.targetIds,
        ansMask: target.ansMask,
        group: record.uid,
      });
    });
  });
  return snaps;
}

/**
 * Scores the memory of every record's calls and rewrites the records' rounds (memSpan, memReward,
 * pFull, pMem), memoryAdvantage and advantages; their outcomeAdvantage stays. Returns the number
 * of snapshots scored.
 */
export async function scoreEpisodeMemory(origins: readonly RecordOrigin[], codec: TextCodec, scorer: TargetScorer, memory: MemoryOptions, advantage: AdvantageOptions): Promise<number> {
  const snaps = snapshotsOf(origins, codec, memory);
  const B = origins.length;
  if (B === 0) return 0;
  const T = maxOf(1, origins.map((o) => o.record.responseIds.length));
  const mask = new Uint8Array(B * T);
  const outcome = new Float32Array(B * T);
  origins.forEach(({ record }, b) => {
    mask.set(record.responseMask, b * T);
    outcome.set(record.outcomeAdvantage, b * T);
  });
  let rewards: Array<{ memReward: number; pFull: number; pMem: number }> = [];
  if (snaps.length > 0) {
    const item = (s: AgentSnapshot, context: 'full' | 'memory'): ScoringItem => ({
      contextIds: context === 'full' ? s.fullContext : s.memContext,
      targetIds: s.targetIds,
      tag: { uid: origins[s.row]!.record.uid, sample: origins[s.row]!.record.sample, round: s.round + 1, context },
    });
    const items = [...snaps.map((s) => item(s, 'full')), ...snaps.map((s) => item(s, 'memory'))];
    const logps = await scorer.score(items);
    if (logps.length !== items.length) throw new Error(`The scorer returned ${logps.length} results for ${items.length} items`);
    const M = snaps.length;
    rewards = snapshotMemoryRewards(snaps, logps.slice(0, M), logps.slice(M), memory);
  }
  const memAdv = memoryAdvantage(
    rewards.map((r) => r.memReward),
    snaps.map((s) => s.group),
    Int32Array.from(snaps.flatMap((s) => [s.row, s.span[0], s.span[1]])),
    B,
    T,
    {
      eps: advantage.eps,
      normByStd: advantage.normByStd,
      memGrouping: advantage.memGrouping,
      rounds: Int32Array.from(snaps.map((s) => origins[s.row]!.sample.calls[s.round]!.index + 1)),
    },
  );
  const final = finalAdvantage(outcome, memAdv, mask, { alpha: advantage.alpha });
  snaps.forEach((s, i) => {
    const r = origins[s.row]!.record.rounds[s.round]!;
    r.memSpan = s.span;
    r.memReward = rewards[i]!.memReward;
    r.pFull = rewards[i]!.pFull;
    r.pMem = rewards[i]!.pMem;
  });
  origins.forEach(({ record }, b) => {
    const n = record.responseIds.length;
    record.memoryAdvantage = Array.from(memAdv.subarray(b * T, b * T + n));
    record.advantages = Array.from(final.subarray(b * T, b * T + n));
  });
  return snaps.length;
}
