/** collectEpisodes' orchestration: groups, failures, rewards, the records; the endpoint is played by a recorder the agent writes to (the served path: test/agents/agent-endpoint.test.ts). */
import { EpisodeRecorder } from '../../src/agents/capture';
import { collectEpisodes, EPISODE_HEADER, type AgentClient } from '../../src/agents/collect';

function endpoint(recorder: EpisodeRecorder) {
  return { baseURL: 'http://127.0.0.1:1/v1', model: 'm', recorder };
}

/** A fake model call: what the endpoint does for a request tagged with the client's header. */
function modelCall(r: EpisodeRecorder, c: AgentClient, prompt: number[], sampled: number[]) {
  const id = c.headers[EPISODE_HEADER]!;
  r.admit(id, prompt.length, sampled.length);
  r.record(id, { promptIds: prompt, sampledIds: sampled, logprobs: sampled.map(() => -0.5), finishReason: 'stop', weightVersion: 0 });
}

describe('collectEpisodes', () => {
  it('runs groupSize episodes per task, rewards each, normalises per task and excludes an agent that threw', async () => {
    const r = new EpisodeRecorder();
    const seen: string[] = [];
    const out = await collectEpisodes({
      tasks: [{ id: 'a', question: 'qa', golds: ['x'] }, { id: 'b', question: 'qb', golds: ['y'] }],
      groupSize: 3,
      concurrency: 2,
      endpoint: endpoint(r),
      agent: async (task, client) => {
        seen.push(client.episode);
        expect(client.apiKey).toBe('none');
        const n = Number(client.episode.slice(-1));
        modelCall(r, client, [1, 2], [3 + n]);
        if (task.id === 'b' && n === 2) throw new Error('tool down');
        return n;
      },
      reward: (_task, ep) => (ep.result === 0 ? 1 : 0),
    });
    expect(seen.sort()).toEqual(['ep-a-0', 'ep-a-1', 'ep-a-2', 'ep-b-0', 'ep-b-1', 'ep-b-2']);
    expect(out.failed).toEqual([{ episode: 'ep-b-2', error: 'episode ep-b-2: tool down' }]);
    expect(out.records.map((x) => [x.uid, x.sample, x.score, x.excluded])).toEqual([
      ['a', 0, 1, false], ['a', 1, 0, false], ['a', 2, 0, false],
      ['b', 0, 1, false], ['b', 1, 0, false], ['b', 2, null, true],
    ]);
    // group a: rewards 1, 0, 0 → (1 - 1/3) / (sqrt(1/3) + 1e-6); group b (2 kept): 0.5 / (sqrt(0.5) + 1e-6)
    expect(out.records[0]!.advantages[0]).toBeCloseTo((2 / 3) / (Math.sqrt(1 / 3) + 1e-6), 5);
    expect(out.records[3]!.advantages[0]).toBeCloseTo(0.5 / (Math.SQRT1_2 + 1e-6), 5);
    expect(out.records[5]!.advantages).toEqual([0]);
    expect(out.records[1]!.responseIds).toEqual([4]);
    expect(r.episodes()).toEqual([]); // every episode was collected
  });

  it('names an agent that made no call, a non-finite reward and duplicate task ids', async () => {
    const r = new EpisodeRecorder();
    const out = await collectEpisodes({
      tasks: [{ id: 'a', question: 'q', golds: [] }],
      groupSize: 2,
      endpoint: endpoint(r),
      agent: async (_t, c) => { if (c.episode.endsWith('1')) modelCall(r, c, [1], [2]); },
      reward: (_t, ep) => (ep.calls.length > 0 ? Number.NaN : 0),
    });
    expect(out.failed.map((f) => f.error)).toEqual([
      'episode ep-a-0: the agent made no model call',
      'episode ep-a-1: the reward of episode ep-a-1 is NaN, not a finite number',
    ]);
    expect(out.records).toHaveLength(1);
    expect(out.records[0]!.excluded).toBe(true);
    await expect(collectEpisodes({ tasks: [{ id: 'a', question: 'q', golds: [] }, { id: 'a', question: 'q', golds: [] }], endpoint: endpoint(r), agent: async () => 0, reward: () => 0 }))
      .rejects.toThrow(/task id "a" appears twice/);
    await expect(collectEpisodes({ tasks: [], groupSize: 0, endpoint: endpoint(r), agent: async () => 0, reward: () => 0 })).rejects.toThrow(/groupSize must be an integer >= 1 but received 0/);
  });
});
