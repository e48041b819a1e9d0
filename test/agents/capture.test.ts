/** src/agents: the episode recorder's limits, calls → token-exact samples, episodes → batch records. */
import { EpisodeRecorder, checkEpisodeId, type CapturedCall } from '../../src/agents/capture';
import { episodeSamples } from '../../src/agents/episode-samples';
import { episodeRecords, type ScoredEpisode } from '../../src/agents/episode-records';
import { MempoError } from '../../src/errors';

function call(index: number, promptIds: number[], sampledIds: number[], weightVersion = 0): CapturedCall {
  return { index, promptIds, sampledIds, logprobs: sampledIds.map((id) => -id / 100), finishReason: 'stop', weightVersion };
}

describe('EpisodeRecorder', () => {
  it('records calls in order and bounds calls, tokens and open episodes, naming the limit', () => {
    const r = new EpisodeRecorder({ maxCallsPerEpisode: 2, maxTokensPerEpisode: 20, maxEpisodes: 2 });
    r.admit('a', 3, 4);
    r.record('a', { promptIds: [1, 2, 3], sampledIds: [4, 5], logprobs: [-0.1, -0.2], finishReason: 'stop', weightVersion: 0 });
    r.admit('a', 7, 4);
    expect(r.record('a', { promptIds: [1, 2, 3, 4, 5, 6, 7], sampledIds: [8], logprobs: [-0.3], finishReason: 'length', weightVersion: 1 }).index).toBe(1);
    expect(() => r.admit('a', 1, 1)).toThrow(/made 2 calls.*maxCallsPerEpisode/);
    r.admit('b', 10, 10);
    expect(() => r.admit('b', 10, 11)).toThrow(/0 tokens so far \+ 10 prompt \+ 11 max new exceeds/);
    r.record('b', { promptIds: Array(10).fill(1), sampledIds: Array(5).fill(2), logprobs: Array(5).fill(-1), finishReason: 'stop', weightVersion: 0 });
    expect(() => r.admit('b', 3, 3)).toThrow(/15 tokens so far \+ 3 prompt \+ 3 max new exceeds capture.maxTokensPerEpisode = 20/);
    expect(() => r.admit('c', 1, 1)).toThrow(/2 episodes are open.*maxEpisodes/);
    expect(r.get('a')!.tokens).toBe(3 + 2 + 7 + 1);
  });

  it('refuses calls to finished or unknown episodes and log-probs that do not match the ids', () => {
    const r = new EpisodeRecorder();
    r.admit('e', 1, 1);
    expect(() => r.record('e', { promptIds: [1], sampledIds: [2, 3], logprobs: [-1], finishReason: 'stop', weightVersion: 0 })).toThrow(/1 log-probs for 2 sampled ids/);
    r.finish('e');
    expect(() => r.admit('e', 1, 1)).toThrow(/episode e is finished/);
    expect(() => r.record('x', { promptIds: [1], sampledIds: [], logprobs: [], finishReason: 'stop', weightVersion: 0 })).toThrow(/episode x is not open/);
    expect(() => r.finish('x')).toThrow(MempoError);
    expect(r.take('e')!.finished).toBe(true);
    expect(r.take('e')).toBeUndefined();
  });

  it('expires an unfinished episode idle past idleMs and names it; a finished one waits to be taken', () => {
    let t = 1000;
    const r = new EpisodeRecorder({ idleMs: 50 }, () => t);
    r.admit('idle', 1, 1);
    r.admit('done', 1, 1);
    r.finish('done');
    t += 51;
    expect(r.expired).toEqual(['idle']);
    expect(r.episodes().map((e) => e.id)).toEqual(['done']);
    expect(() => r.record('idle', { promptIds: [1], sampledIds: [], logprobs: [], finishReason: 'stop', weightVersion: 0 })).toThrow(/not open/);
  });

  it('holds the budget of calls admitted and not yet recorded, so calls at once cannot pass a limit together', () => {
    const r = new EpisodeRecorder({ maxCallsPerEpisode: 2, maxTokensPerEpisode: 30 });
    const a = r.admit('e', 5, 5);
    const b = r.tryAdmit('e', 5, 5);
    expect('limit' in b).toBe(false);
    expect(r.tryAdmit('e', 1, 1)).toMatchObject({ limit: 'maxCallsPerEpisode' });
    r.release(b as Exclude<typeof b, { limit: string }>);
    expect(r.tryAdmit('e', 10, 11)).toMatchObject({ limit: 'maxTokensPerEpisode', message: expect.stringContaining('10 tokens so far + 10 prompt + 11 max new') });
    r.record('e', { promptIds: [1, 2, 3, 4, 5], sampledIds: [6], logprobs: [-1], finishReason: 'stop', weightVersion: 0 }, a);
    // recorded: 6 tokens held, not the 10 reserved
    expect('limit' in r.tryAdmit('e', 10, 14)).toBe(false);
    r.finish('e');
    expect(r.tryRecord('e', { promptIds: [1], sampledIds: [], logprobs: [], finishReason: 'stop', weightVersion: 0 })).toMatchObject({ limit: 'finished' });
    expect(r.get('e')!.calls).toHaveLength(1);
  });

  it('checks episode ids and its own limits', () => {
    expect(checkEpisodeId('run-1/q:3@2', 'x')).toBe('run-1/q:3@2');
    for (const bad of ['', 'a b', 'x'.repeat(129), 7, null, 'é']) expect(() => checkEpisodeId(bad, 'header x-mempo-episode')).toThrow(/header x-mempo-episode: expected an episode id/);
    expect(() => new EpisodeRecorder({ maxCallsPerEpisode: 0 })).toThrow(/capture.maxCallsPerEpisode: expected an integer >= 1 but received 0/);
  });
});

describe('episodeSamples', () => {
  it('extends a sample while each prompt starts with all its ids: added tokens masked out, sampled ids trained on', () => {
    const s = episodeSamples([call(0, [1, 2], [3, 4]), call(1, [1, 2, 3, 4, 9, 9], [5]), call(2, [1, 2, 3, 4, 9, 9, 5], [6, 7])]);
    expect(s).toHaveLength(1);
    expect(s[0]!.promptIds).toEqual([1, 2]);
    expect(s[0]!.responseIds).toEqual([3, 4, 9, 9, 5, 6, 7]);
    expect(s[0]!.responseMask).toEqual([1, 1, 0, 0, 1, 1, 1]);
    expect(s[0]!.oldLogp).toEqual([-0.03, -0.04, 0, 0, -0.05, -0.06, -0.07]);
    expect(s[0]!.calls.map((c) => [c.index, c.start, c.end])).toEqual([[0, 0, 2], [1, 4, 5], [2, 5, 7]]);
  });

  it('starts a new sample when a prompt rewrites the context, compared by ids only', () => {
    // call 1 re-tokenizes the first answer differently (3 → 33): a new sample, never a merge
    const s = episodeSamples([call(0, [1, 2], [3, 4]), call(1, [1, 2, 33, 4, 9], [5]), call(2, [1, 2, 33, 4, 9, 5, 8], [6]), call(3, [1], [2])]);
    expect(s.map((x) => [x.promptIds, x.responseIds, x.responseMask])).toEqual([
      [[1, 2], [3, 4], [1, 1]],
      [[1, 2, 33, 4, 9], [5, 8, 6], [1, 0, 1]],
      [[1], [2], [1]],
    ]);
    expect(s[1]!.calls.map((c) => c.index)).toEqual([1, 2]);
  });
});

describe('episodeRecords', () => {
  function ep(id: string, calls: CapturedCall[], reward: number | null): ScoredEpisode {
    return { episode: { id, calls, tokens: 0, finished: true, lastSeen: 0 }, reward, error: reward === null ? 'agent threw: boom' : null };
  }

  it('normalises rewards over the task group by episode, writes the advantage on every sampled token of every sample, excludes failures', () => {
    const { records, sources } = episodeRecords({ id: 'q1', question: 'who?', golds: ['x'] }, [
      ep('e0', [call(0, [1, 2], [3, 4]), call(1, [1, 5], [6])], 1), // two samples, one episode
      ep('e1', [call(0, [1, 2], [7])], 0),
      ep('e2', [call(0, [1, 2], [8])], null),
      ep('e3', [call(0, [1, 2], [3]), call(1, [1, 2, 3, 0], [9])], 0),
    ]);
    // kept rewards 1, 0, 0: mean 1/3, unbiased std sqrt((4/9 + 1/9 + 1/9) / 2) = sqrt(1/3)
    const std = Math.sqrt(1 / 3);
    const hi = Math.fround((1 - 1 / 3) / (std + 1e-6));
    const lo = Math.fround((0 - 1 / 3) / (std + 1e-6));
    expect(sources).toEqual([{ episode: 'e0', part: 0 }, { episode: 'e0', part: 1 }, { episode: 'e1', part: 0 }, { episode: 'e2', part: 0 }, { episode: 'e3', part: 0 }]);
    expect(records.map((r) => r.sample)).toEqual([0, 1, 2, 3, 4]);
    expect(records.map((r) => r.uid)).toEqual(['q1', 'q1', 'q1', 'q1', 'q1']);
    expect(records[0]!.advantages).toEqual([hi, hi]);
    expect(records[1]!.advantages).toEqual([hi]);
    expect(records[2]!.advantages).toEqual([lo]);
    expect(records[3]!.advantages).toEqual([0]);
    expect(records[3]!.excluded).toBe(true);
    expect(records[3]!.error).toBe('agent threw: boom');
    expect(records[4]!.responseMask).toEqual([1, 0, 1]);
    expect(records[4]!.advantages).toEqual([lo, 0, lo]);
    expect(records[4]!.rounds.map((r) => [r.index, r.start, r.end, r.contextTokens])).toEqual([[1, 0, 1, 2], [2, 2, 3, 4]]);
    expect(records.every((r) => r.memoryAdvantage.every((v) => v === 0))).toBe(true);
  });
});
