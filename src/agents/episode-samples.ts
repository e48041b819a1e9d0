/**
 * An episode's calls → training samples, token-exact. A call whose prompt
 * starts with everything the current sample holds (its prompt, then every earlier call's sampled
 * ids and the tokens added between calls) extends that sample: the added tokens (tool results,
 * the next user turn, template glue) join the response masked out, the sampled ids join it
 * trained on, each with the log-prob it was sampled with. Any other call (an agent that rewrote,
 * trimmed or compressed its context, as a memory agent does each round) starts a new sample:
 * ids are compared, never text, and nothing is re-tokenized.
 */
import type { CapturedCall } from './capture';

/** A [start, end) range of a sample's response that one call sampled. */
export interface SampleCall {
  /** The call's index in its episode. */
  index: number;
  start: number;
  end: number;
  finishReason: string;
  weightVersion: number;
}

export interface EpisodeSample {
  promptIds: number[];
  responseIds: number[];
  /** 1 on sampled ids, 0 on the tokens added between calls. */
  responseMask: number[];
  /** The sampler's log-prob on sampled ids, 0 elsewhere. */
  oldLogp: number[];
  calls: SampleCall[];
}

function startsWith(ids: readonly number[], prefix: readonly number[], prefixTail: readonly number[]): boolean {
  if (ids.length < prefix.length + prefixTail.length) return false;
  for (let i = 0; i < prefix.length; i++) if (ids[i] !== prefix[i]) return false;
  const o = prefix.length;
  for (let i = 0; i < prefixTail.length; i++) if (ids[o + i] !== prefixTail[i]) return false;
  return true;
}

/** The samples of one episode's calls, in call order. */
export function episodeSamples(calls: readonly CapturedCall[]): EpisodeSample[] {
  const out: EpisodeSample[] = [];
  let cur: EpisodeSample | null = null;
  for (const c of calls) {
    if (cur === null || !startsWith(c.promptIds, cur.promptIds, cur.responseIds)) {
      cur = { promptIds: [...c.promptIds], responseIds: [], responseMask: [], oldLogp: [], calls: [] };
      out.push(cur);
    } else {
      for (let i = cur.promptIds.length + cur.responseIds.length; i < c.promptIds.length; i++) {
        cur.responseIds.push(c.promptIds[i]!);
        cur.responseMask.push(0);
        cur.oldLogp.push(0);
      }
    }
    const start = cur.responseIds.length;
    for (let i = 0; i < c.sampledIds.length; i++) {
      cur.responseIds.push(c.sampledIds[i]!);
      cur.responseMask.push(1);
      cur.oldLogp.push(c.logprobs[i]!);
    }
    cur.calls.push({ index: c.index, start, end: cur.responseIds.length, finishReason: c.finishReason, weightVersion: c.weightVersion });
  }
  return out;
}
