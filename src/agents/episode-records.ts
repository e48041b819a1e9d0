/**
 * Captured episodes → the pipeline's `BatchRecord`s (docs/algorithm.md §5, §8).
 * A task's episodes are its GRPO group: the outcome advantage is the episode's reward normalised
 * over the group's episodes (one value per episode, however many samples it made), written on
 * every sampled token of every sample of the episode. An episode without a reward (the agent
 * threw, or the reward did) is excluded: it takes no part in its group and trains nothing.
 * Each call of a sample is one of its `rounds`.
 */
import type { BatchRecord, BatchRound } from '../contracts';
import { grpoOutcomeAdvantage } from '../kernels/outcome-advantage';
import type { CapturedCall, CapturedEpisode } from './capture';
import { episodeSamples, type EpisodeSample } from './episode-samples';

export interface AgentTask {
  id: string;
  question: string;
  golds: string[];
}

export interface ScoredEpisode {
  episode: CapturedEpisode;
  /** The reward, or null when the episode failed (then `error` says why). */
  reward: number | null;
  error: string | null;
}

export interface EpisodeRecordOptions {
  /** Group normalisation (docs/algorithm.md §5): added to the std (default 1e-6), and whether to divide by it (default true). */
  eps?: number;
  normByStd?: boolean;
  /** Decodes response ids for the record's `text` (default: no text). */
  decode?: (ids: number[]) => string;
}

/** Where a record came from: its episode, and which of the episode's samples it is. */
export interface AgentRecordSource {
  episode: string;
  /** 0-based sample of the episode (an agent that rewrote its context makes several). */
  part: number;
}

/** One record with the episode calls and the sample it was made from (what the memory reward reads). */
export interface RecordOrigin {
  record: BatchRecord;
  calls: readonly CapturedCall[];
  sample: EpisodeSample;
}

/**
 * The records of one task's episodes, in episode then sample order; `sample` numbers the records
 * of the task from 0. `sources[i]` names record i's episode and part, `origins[i]` its calls and sample.
 */
export function episodeRecords(task: AgentTask, episodes: readonly ScoredEpisode[], opts: EpisodeRecordOptions = {}): { records: BatchRecord[]; sources: AgentRecordSource[]; origins: RecordOrigin[] } {
  const kept = episodes.filter((e) => e.reward !== null);
  const adv = new Map<ScoredEpisode, number>();
  if (kept.length > 0) {
    const a = grpoOutcomeAdvantage(kept.map((e) => e.reward!), kept.map(() => 0), new Uint8Array(kept.length).fill(1), 1, {
      ...(opts.eps !== undefined ? { eps: opts.eps } : {}),
      ...(opts.normByStd !== undefined ? { normByStd: opts.normByStd } : {}),
    });
    kept.forEach((e, i) => adv.set(e, a[i]!));
  }
  const records: BatchRecord[] = [];
  const sources: AgentRecordSource[] = [];
  const origins: RecordOrigin[] = [];
  for (const e of episodes) {
    const excluded = e.reward === null;
    const a = adv.get(e) ?? 0;
    episodeSamples(e.episode.calls).forEach((s, part) => {
      const outcome = s.responseMask.map((m) => (m !== 0 && !excluded ? Math.fround(a) : 0));
      const rounds: BatchRound[] = s.calls.map((c, i) => ({
        index: i + 1,
        start: c.start,
        end: c.end,
        memSpan: null,
        memReward: null,
        pFull: null,
        pMem: null,
        action: null,
        query: null,
        answer: null,
        violations: [],
        finishReason: c.finishReason,
        contextTokens: s.promptIds.length + c.start,
        observation: null,
      }));
      const record: BatchRecord = {
        uid: task.id,
        sample: records.length,
        question: task.question,
        golds: task.golds,
        hops: null,
        objectives: null,
        promptIds: s.promptIds,
        responseIds: s.responseIds,
        responseMask: s.responseMask,
        oldLogp: s.oldLogp,
        rounds,
        score: e.reward,
        formatValid: true,
        formatReason: null,
        outcomeAdvantage: outcome,
        memoryAdvantage: outcome.map(() => 0),
        advantages: [...outcome],
        text: opts.decode !== undefined ? opts.decode(s.responseIds) : '',
        doneReason: null,
        error: e.error,
        excluded,
      };
      records.push(record);
      sources.push({ episode: e.episode.id, part });
      origins.push({ record, calls: e.episode.calls, sample: s });
    });
  }
  return { records, sources, origins };
}
