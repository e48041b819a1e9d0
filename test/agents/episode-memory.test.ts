/** src/agents/episode-memory.ts: the memory reward on captured episodes, with the real Qwen3 tokenizer. */
import type { CapturedCall } from '../../src/agents/capture';
import { episodeHistories, scoreEpisodeMemory } from '../../src/agents/episode-memory';
import { episodeRecords } from '../../src/agents/episode-records';
import type { ScoringItem } from '../../src/contracts';
import { advantageSchema, memorySchema } from '../../src/options';
import { realTokenizer } from '../protocol/real-tokenizers';

const call = (index: number, promptIds: number[], sampledIds: number[]): CapturedCall => ({ index, promptIds, sampledIds, logprobs: sampledIds.map(() => -1), finishReason: 'stop', weightVersion: 0 });

describe('episodeHistories', () => {
  it('is the next prompt for an agent that appends, and every added tool result once for one that rewrites', () => {
    expect(episodeHistories([call(0, [1, 2], [3]), call(1, [1, 2, 3, 4], [5]), call(2, [1, 2, 3, 4, 5, 6], [7])])).toEqual([[1, 2], [1, 2, 3, 4], [1, 2, 3, 4, 5, 6]]);
    // a memory agent: each prompt is the question [1, 2] + its last memory + the last tool result
    expect(episodeHistories([call(0, [1, 2], [10, 11]), call(1, [1, 2, 10, 40], [12, 13]), call(2, [1, 2, 12, 41], [14])])).toEqual([
      [1, 2],
      [1, 2, 10, 11, 40],
      [1, 2, 10, 11, 40, 12, 13, 12, 41],
    ]);
  });
});

describe('scoreEpisodeMemory', () => {
  it('scores every call >= 2 with a closed <mem> in one 2N call and writes the memory advantage on its span', async () => {
    const tok = await realTokenizer('qwen3');
    const prompt = tok.encode('Question: where is the tower?');
    const first = tok.encode('<mem>look it up</mem><search>tower</search>');
    const info = tok.encode('\n<information>The tower is in Paris.</information>\n');
    const memA = tok.encode('<mem>tower: Paris</mem>');
    const memB = tok.encode('<mem>no idea</mem>');
    const ansA = tok.encode('<answer>Paris</answer>');
    const ansB = tok.encode('<answer>Rome</answer>');
    const episode = (id: string, mem: number[], ans: number[]) => ({
      id, tokens: 0, finished: true, lastSeen: 0,
      calls: [call(0, prompt, first), call(1, [...prompt, ...first, ...info], [...mem, ...ans])],
    });
    const { records, origins } = episodeRecords({ id: 'q', question: 'where is the tower?', golds: ['Paris'] }, [
      { episode: episode('A', memA, ansA), reward: 1, error: null },
      { episode: episode('B', memB, ansB), reward: 0, error: null },
    ]);
    const calls: ScoringItem[][] = [];
    const scorer = {
      score: async (items: readonly ScoringItem[]) => {
        calls.push([...items]);
        // full contexts: -0.1 per target token; memory contexts: -0.2 (A) and -0.5 (B), all above τ = ln 0.5
        return items.map((it) => new Float32Array(it.targetIds.length).fill(it.tag!.context === 'full' ? -0.1 : it.tag!.sample === 0 ? -0.2 : -0.5));
      },
    };
    const memory = memorySchema.parse({});
    const n = await scoreEpisodeMemory(origins, tok, scorer, memory, advantageSchema.parse({ alpha: 0.5 }));
    expect(n).toBe(2);
    expect(calls).toHaveLength(1);
    const items = calls[0]!;
    expect(items.map((i) => i.tag)).toEqual([
      { uid: 'q', sample: 0, round: 2, context: 'full' }, { uid: 'q', sample: 1, round: 2, context: 'full' },
      { uid: 'q', sample: 0, round: 2, context: 'memory' }, { uid: 'q', sample: 1, round: 2, context: 'memory' },
    ]);
    expect(items[0]!.contextIds).toEqual([...prompt, ...first, ...info]);
    expect(items[2]!.contextIds).toEqual([...prompt, ...memA]);
    expect(items[3]!.contextIds).toEqual([...prompt, ...memB]);
    const target = [...tok.encode('<answer>'), ...tok.encode('Paris'), ...tok.encode('</answer>')];
    expect(items[0]!.targetIds).toEqual(target);

    const rA = Math.exp(-0.2) - Math.exp(-0.1);
    const rB = Math.exp(-0.5) - Math.exp(-0.1);
    expect(records[0]!.rounds[1]!.memReward).toBeCloseTo(rA, 6);
    expect(records[1]!.rounds[1]!.pMem).toBeCloseTo(Math.exp(-0.5), 6);
    expect(records[0]!.rounds[0]!.memReward).toBeNull();
    const start = first.length + info.length;
    expect(records[0]!.rounds[1]!.memSpan).toEqual([start, start + memA.length]);
    // memory advantage: the two rewards of question q pooled; outcome: rewards 1 and 0
    const memAdv = (rA - (rA + rB) / 2) / (Math.abs(rA - rB) / Math.SQRT2 + 1e-6);
    const outAdv = 0.5 / (Math.SQRT1_2 + 1e-6);
    const a = records[0]!;
    expect(a.memoryAdvantage[start]).toBeCloseTo(memAdv, 5);
    expect(a.memoryAdvantage[start + memA.length]).toBe(0);
    expect(a.memoryAdvantage[start - 1]).toBe(0);
    expect(a.advantages[start]).toBeCloseTo(outAdv + 0.5 * memAdv, 5);
    expect(a.advantages[start + memA.length]).toBeCloseTo(outAdv, 5);
    expect(a.advantages[first.length]).toBe(0); // a tool-result token: masked out
    expect(records[1]!.memoryAdvantage[start]).toBeCloseTo(-memAdv, 5);
  });

  it('scores nothing for tasks without golds or episodes that failed', async () => {
    const tok = await realTokenizer('qwen3');
    const p = tok.encode('Q');
    const s = tok.encode('<mem>m</mem>');
    const ep = { id: 'e', tokens: 0, finished: true, lastSeen: 0, calls: [call(0, p, s), call(1, [...p, ...s], s)] };
    const noGold = episodeRecords({ id: 'q', question: 'Q', golds: [] }, [{ episode: ep, reward: 1, error: null }]);
    const failed = episodeRecords({ id: 'r', question: 'Q', golds: ['x'] }, [{ episode: ep, reward: null, error: 'agent threw' }]);
    const scorer = { score: async () => { throw new Error('must not be called'); } };
    await expect(scoreEpisodeMemory([...noGold.origins, ...failed.origins], tok, scorer, memorySchema.parse({}), advantageSchema.parse({}))).resolves.toBe(0);
  });
});
