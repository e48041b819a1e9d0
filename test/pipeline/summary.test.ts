import { toTensorBatch } from '../../src/pipeline/batch';
/** summary.json and the eval table from batch records; report.html structure. */
import type { BatchRecord } from '../../src/pipeline/batch';
import { summarize } from '../../src/pipeline/summary';
import { evalReport, formatEvalReport } from '../../src/pipeline/eval-report';
import { renderReport } from '../../src/io/report';

function rec(uid: string, sample: number, o: { score: number; answer: string; hops: number; objectives: number; ctx: number[]; mem?: Array<number | null>; valid?: boolean; excluded?: boolean }): BatchRecord {
  const n = o.ctx.length;
  return {
    uid, sample, question: `Q ${uid}?`, golds: ['Gold'], hops: o.hops, objectives: o.objectives,
    promptIds: [1, 2], responseIds: Array(n * 3).fill(20), responseMask: Array(n * 3).fill(1).map((_, i) => (i % 3 === 2 ? 0 : 1)),
    oldLogp: Array(n * 3).fill(-0.5),
    rounds: o.ctx.map((c, i) => ({
      index: i + 1, start: 3 * i, end: 3 * i + 2, memSpan: [3 * i, 3 * i + 1] as [number, number], memReward: o.mem?.[i] ?? null, pFull: 0.5, pMem: 0.5,
      action: i === n - 1 ? 'answer' as const : 'search' as const, query: null, answer: null,
      violations: o.valid === false && i === 0 ? [{ code: 'missing-think' as const, message: 'no closed <think>' }] : [],
      finishReason: 'stop', contextTokens: c, observation: null,
    })),
    score: o.excluded ? null : o.score, formatValid: o.valid !== false, formatReason: o.valid === false ? 'round 1: x' : null,
    outcomeAdvantage: Array(n * 3).fill(0.5), memoryAdvantage: Array(n * 3).fill(0), advantages: Array(n * 3).fill(0.5),
    text: `<mem>m</mem><think>t</think><answer>${o.answer}</answer>`, doneReason: o.excluded ? 'tool-error' : 'answer',
    error: o.excluded ? 'down' : null, excluded: o.excluded ?? false,
  };
}

const records = [
  rec('a', 0, { score: 1, answer: 'Gold', hops: 1, objectives: 1, ctx: [40, 100], mem: [null, 0.1] }),
  rec('a', 1, { score: 0, answer: 'Lead', hops: 1, objectives: 1, ctx: [40], valid: false }),
  rec('b', 0, { score: 0, answer: 'x', hops: 2, objectives: 1, ctx: [40, 90, 160], mem: [null, -0.2, 0.3] }),
  rec('b', 1, { score: 0, answer: 'y', hops: 2, objectives: 1, ctx: [40, 80] }),
  rec('c', 0, { score: 0, answer: 'Gold', hops: 1, objectives: 2, ctx: [40], excluded: true }),
];

test('summarize: counts, means, memory-reward statistics over non-excluded trajectories', () => {
  const s = summarize(records, null);
  expect(s).toMatchObject({ questions: 3, trajectories: 5, excluded: 1, toolErrors: 1, meanTurns: 9 / 5, thisRun: null });
  expect(s.meanScore).toBeCloseTo(0.25, 10);
  expect(s.formatValidRate).toBeCloseTo(4 / 5, 10);
  expect(s.memoryReward.count).toBe(3);
  expect(s.memoryReward.mean).toBeCloseTo(0.2 / 3, 10);
  const m = 0.2 / 3;
  expect(s.memoryReward.std).toBeCloseTo(Math.sqrt(((0.1 - m) ** 2 + (-0.2 - m) ** 2 + (0.3 - m) ** 2) / 2), 10);
  expect(s.scoredItems).toBe(6);
  expect(s.doneReasons).toEqual({ answer: 4, 'tool-error': 1 });
  expect(s.tokensGenerated).toBe(records.reduce((a, r) => a + r.responseMask.filter((x) => x === 1).length, 0));
});

test('evalReport: EM by hops and objectives, mixed groups, context tokens', () => {
  const e = evalReport(records);
  expect(e).toMatchObject({ questions: 2, trajectories: 4 });
  expect(e.em).toBeCloseTo(0.25, 10);
  // per trajectory: a0 total 140 peak 100, a1 40/40, b0 290/160, b1 120/80
  expect(e.byHops).toEqual({
    1: { questions: 1, trajectories: 2, em: 0.5, f1: 0.5, contextTokens: { meanTotal: 90, meanPeak: 70 }, meanTurns: (2 + 1) / 2, rounds: 3, invalidRounds: 1 },
    2: { questions: 1, trajectories: 2, em: 0, f1: 0, contextTokens: { meanTotal: 205, meanPeak: 120 }, meanTurns: (3 + 2) / 2, rounds: 5, invalidRounds: 0 },
  });
  expect(e.byObjectives).toEqual({
    1: { questions: 2, trajectories: 4, em: 0.25, f1: 0.25, contextTokens: { meanTotal: (140 + 40 + 290 + 120) / 4, meanPeak: (100 + 40 + 160 + 80) / 4 }, meanTurns: (2 + 1 + 3 + 2) / 4, rounds: 8, invalidRounds: 1 },
  });
  expect(e.mixedGroupFraction).toBe(0.5);
  expect(e.formatValidRoundRate).toBeCloseTo(7 / 8, 10);
  expect(e).toMatchObject({ rounds: 8, invalidRounds: 1 }); // a1's only round is invalid
  // a: totals 140 and 40 → 90; b: 290 and 120 → 205. Peaks: a (100+40)/2 = 70, b (160+80)/2 = 120.
  expect(e.contextTokens).toEqual({ meanTotalPerQuestion: (90 + 205) / 2, meanPeakPerQuestion: (70 + 120) / 2, maxPeak: 160 });
  const text = formatEvalReport(e);
  expect(text).toContain('exact match              25.0%');
  expect(text).toContain('EM by hops:        1: 50.0% (n=1)  2: 0.0% (n=1)');
  expect(text).toContain('context tokens by objectives (total / peak per trajectory):  1: 148 / 95');
  expect(text).toContain('F1 by objectives:  1: 25.0% (n=2)');
  expect(text).toContain('format-valid rounds      87.5%   (1 invalid of 8; valid trajectories 75.0%)');
  expect(text).toContain('invalid rounds by objectives:  1: 1 of 8');
});

test('evalReport: F1 gives a bundle partial credit where EM gives none', () => {
  const bundle = (sample: number, answer: string) => ({ ...rec('m', sample, { score: 0, answer, hops: 1, objectives: 2, ctx: [40] }), golds: ['Zusje Studio, Geveim Press'] });
  // gold tokens after normalisation: zusje studio geveim press (4).
  // "Zusje Studio": 2 common, precision 1, recall 1/2 -> F1 2/3. "Geveim Press, Zusje Studio": all 4 -> 1, but EM 0 (order).
  // "Vobor": 0.
  const e = evalReport([bundle(0, 'Zusje Studio'), bundle(1, 'Geveim Press, Zusje Studio'), bundle(2, 'Vobor')]);
  expect(e.em).toBe(0);
  expect(e.f1).toBeCloseTo((2 / 3 + 1 + 0) / 3, 10);
  expect(e.byObjectives['2']).toMatchObject({ questions: 1, trajectories: 3, em: 0 });
  expect(e.byHops).toEqual({}); // hops are reported for single-objective questions only
});

test('renderReport: self-contained, tokens coloured, mem spans outlined, observations grey, a chart', () => {
  const html = renderReport(records, { pieceOf: (id) => `<${id}>`, summary: summarize(records, null), maxQuestions: 2 });
  expect(html).not.toMatch(/<script|<link|src=|url\(|@import/);
  expect(html).toContain('<svg');
  expect(html).toContain('class="mem"');
  expect(html).toContain('class="obs"');
  expect(html).toContain('&lt;20&gt;');
  expect(html).toContain('memory reward <b>+0.1000</b>');
  expect(html).toContain('1 more questions in batch.jsonl');
  expect(html.match(/class="traj /g)).toHaveLength(4);
});

test('large batches: no argument-spreading limits (200k tokens)', () => {
  const big = Array.from({ length: 200 }, (_, i) => {
    const r = rec(`q${i >> 4}`, i % 16, { score: i % 2, answer: 'Gold', hops: 1, objectives: 1, ctx: Array(300).fill(50), mem: Array(300).fill(0.1) });
    return r;
  });
  expect(big.reduce((a, r) => a + r.advantages.length, 0)).toBe(180000);
  expect(() => renderReport(big, { pieceOf: () => 'x', maxQuestions: 1 })).not.toThrow();
  expect(evalReport(big).contextTokens.maxPeak).toBe(50);
  expect(summarize(big, null).trajectories).toBe(200);
  expect(toTensorBatch(big, 0).T).toBe(900);
  expect(() => toTensorBatch(big, -1)).toThrow("Expected the model's pad token id (a non-negative integer) for padTokenId but received -1");
});
