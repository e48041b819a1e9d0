/**
 * The agent state machine on scripted model outputs (docs/algorithm.md §1-§2), snapshots token by token,
 * memory rewards through one scorer call (docs/algorithm.md §4), advantages (docs/algorithm.md §5), tool failures,
 * options and input validation, the trainer batch (docs/algorithm.md §8).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { renderMemoryContext, renderPrompt } from '../../src/protocol/chat';
import { observationSegment } from '../../src/protocol/stream';
import { runAgentLoop } from '../../src/pipeline/rollout';
import { toTensorBatch } from '../../src/pipeline/batch';
import { PartialResultsError, type GenerateParams, type GenerationOutput, type GenerationRequest, type Generator, type RequestTag, type ScoringItem, type ScoringTag } from '../../src/contracts';
import { summarize } from '../../src/pipeline/summary';
import { resolveOptions } from '../../src/options';
import { runPipeline } from '../../src/pipeline/pipeline';
import { readQuestions } from '../../src/io/questions';
import { scoreBatch } from '../../src/pipeline/pipeline';
import { outcomeReward } from '../../src/pipeline/outcome-reward';
import { computeAdvantages } from '../../src/pipeline/advantages';
import { buildSnapshots } from '../../src/pipeline/snapshots';
import { ScriptedGenerator } from '../../src/engines/scripted';
import { renderSearchObservation } from '../../src/retrieval/observation';
import { FakeRetriever, FakeScorer, Q1, Q2, answer, normalise, search, tokenizer } from './helpers';

/** A generator whose requests for the tags `fails` picks fail for good, as HttpCompletionsBackend reports them. */
class FailingGenerator implements Generator {
  constructor(private readonly inner: Generator, private readonly fails: (tag: RequestTag) => boolean) {}
  get codec() { return this.inner.codec; }
  get maxContextTokens() { return this.inner.maxContextTokens; }
  async generate(requests: readonly GenerationRequest[], params: GenerateParams): Promise<GenerationOutput[]> {
    const outs = await this.inner.generate(requests, params);
    const failures = new Map<number, string>();
    requests.forEach((r, i) => {
      if (this.fails(r.tag)) failures.set(i, `http://gpu:8000/v1/completions (generation request ${i} (${r.tag.uid} sample ${r.tag.sample} round ${r.tag.round})): the answer is not valid JSON: {oops`);
    });
    if (failures.size > 0) throw new PartialResultsError(outs.map((o, i) => (failures.has(i) ? undefined : o)), failures);
    return outs;
  }
}

/** FakeScorer whose items for the tags `fails` picks fail for good. */
class FailingScorer extends FakeScorer {
  constructor(private readonly fails: (tag: ScoringTag) => boolean) { super(); }
  override async score(items: readonly ScoringItem[]): Promise<Float32Array[]> {
    const out = await super.score(items);
    const failures = new Map<number, string>();
    items.forEach((it, k) => {
      const t = it.tag!;
      if (this.fails(t)) failures.set(k, `http://gpu:8000/v1/completions (scoring item ${k} (${t.uid} sample ${t.sample} round ${t.round}, ${t.context} context)): the answer comes from model "other"`);
    });
    if (failures.size > 0) throw new PartialResultsError(out.map((o, k) => (failures.has(k) ? undefined : o)), failures);
    return out;
  }
}

const obsFor = (q: string, topk = 3) => renderSearchObservation(
  [{ title: 'Mamek', contents: `Mamek is a city in Thersekle. (${q})`, score: 2 }, { title: 'Other', contents: 'Nothing here.', score: 1 }].slice(0, topk),
);

/** One trajectory of Q1 scripted round by round, under a response budget. */
async function rollOne(tok: Awaited<ReturnType<typeof tokenizer>>, script: (round: number) => string, maxResponseTokens: number) {
  return (await runAgentLoop({
    questions: [Q1], generator: new ScriptedGenerator(tok, (tag) => script(tag.round)), retriever: new FakeRetriever(),
    options: resolveOptions({ rollout: { groupSize: 1, maxResponseTokens } }),
  })).trajectories[0]!;
}

describe('agent state machine (scripted generator)', () => {
  test('runs search → observation → answer with the protocol layout, mask and log-probs', async () => {
    const tok = await tokenizer();
    const r1 = search('none', 'Mamek country');
    const r2 = answer('Mamek is a city in Thersekle.', 'Thersekle');
    const gen = new ScriptedGenerator(tok, (tag) => (tag.round === 1 ? r1 : r2));
    const ret = new FakeRetriever();
    const options = resolveOptions({ rollout: { groupSize: 2 } });
    const { trajectories, stats } = await runAgentLoop({ questions: [Q1], generator: gen, retriever: ret, options });
    expect(trajectories).toHaveLength(2);
    expect(ret.calls).toEqual([['Mamek country', 'Mamek country']]);
    expect(gen.calls.map((c) => c.requests.length)).toEqual([2, 2]);
    expect(gen.calls[0]!.params.stop).toEqual(['</search>', '</access>', '</answer>']);
    const t = trajectories[0]!;
    expect(t.uid).toBe('q1');
    expect(trajectories.map((x) => x.sample)).toEqual([0, 1]);
    expect(t.state).toBe('done');
    expect(t.doneReason).toBe('answer');
    expect(t.promptIds).toEqual(tok.encode(renderPrompt(Q1.question)));
    const a = tok.encode(r1);
    const o = tok.encode(observationSegment(obsFor('Mamek country')));
    const b = tok.encode(r2);
    expect(t.responseIds).toEqual([...a, ...o, ...b]);
    expect(t.responseMask).toEqual([...a.map(() => 1), ...o.map(() => 0), ...b.map(() => 1)]);
    expect(t.oldLogp).toEqual([...a.map(() => -0.25), ...o.map(() => 0), ...b.map(() => -0.25)]);
    expect(t.rounds.map((r) => [r.index, r.start, r.end, r.action])).toEqual([[1, 0, a.length, 'search'], [2, a.length + o.length, a.length + o.length + b.length, 'answer']]);
    expect(t.rounds[0]!.observation).toEqual({ start: a.length, end: a.length + o.length, text: obsFor('Mamek country'), truncated: false });
    expect(t.rounds[1]!.contextTokens).toBe(t.promptIds.length + a.length + o.length);
    expect(t.rounds.every((r) => r.violations.length === 0)).toBe(true);
    expect(stats).toMatchObject({ rounds: 4, searches: 2, toolErrors: 0 });
  });

  test('records malformed rounds as violations and never crashes', async () => {
    const tok = await tokenizer();
    const first = [
      'hello <mem>x</mem><think>y</think><search>q</search>',
      '<mem>x<think>y</think><search>q</search>',
      '<mem>a</mem><mem>b</mem><think>t</think><search>q</search>',
      '<mem>a</mem><think>t</think><search>   </search>',
      '<think>t</think><mem>a</mem><answer>Thersekle</answer>',
      '<mem>a</mem><think>t',
      '</mem><think>t</think><search>q</search>',
    ];
    const gen = new ScriptedGenerator(tok, (tag) => {
      if (tag.round > 1) return answer('m', 'Thersekle');
      if (tag.sample === 7) return { text: '<mem>a</mem><|endoftext|>', finishReason: 'eos' };
      return first[tag.sample]!;
    });
    const ret = new FakeRetriever();
    const options = resolveOptions({ rollout: { groupSize: 8, maxRoundTokens: 64 } });
    const { trajectories } = await runAgentLoop({ questions: [Q1], generator: gen, retriever: ret, options });
    const codes = trajectories.map((t) => t.rounds[0]!.violations.map((v) => v.code));
    expect(codes[0]).toEqual(['text-outside-tags']);
    expect(codes[1]).toEqual(expect.arrayContaining(['nested-tag', 'unclosed-tag', 'missing-mem']));
    expect(codes[2]).toEqual(['repeated-tag']);
    expect(codes[3]).toEqual(['empty-query']);
    expect(codes[4]).toEqual(['tag-order']);
    expect(codes[5]).toEqual(expect.arrayContaining(['unclosed-tag', 'no-action', 'missing-think']));
    expect(codes[6]).toEqual(expect.arrayContaining(['stray-close-tag', 'missing-mem']));
    expect(codes[7]).toEqual(['missing-think', 'no-action']);
    expect(trajectories.map((t) => t.doneReason)).toEqual(['answer', 'answer', 'answer', 'answer', 'answer', 'round-length', 'answer', 'eos']);
    // The empty query never reaches the retriever; its observation says so.
    expect(ret.calls).toEqual([['q', 'q', 'q', 'q']]);
    expect(trajectories[3]!.rounds[0]!.observation!.text).toBe('<information>No results.</information>');
    // The eos token stays in the response (generated) but not in the round's text.
    expect(trajectories[7]!.rounds[0]!.text).toBe('<mem>a</mem>');
    expect(trajectories[7]!.responseIds[trajectories[7]!.responseIds.length - 1]).toBe(0);
  });

  test('ends at maxTurns after the last search without calling the tool', async () => {
    const tok = await tokenizer();
    const gen = new ScriptedGenerator(tok, () => search('m', 'again'));
    const ret = new FakeRetriever();
    const { trajectories } = await runAgentLoop({ questions: [Q1], generator: gen, retriever: ret, options: resolveOptions({ rollout: { groupSize: 1, maxTurns: 3 } }) });
    expect(trajectories[0]!.rounds).toHaveLength(3);
    expect(trajectories[0]!.doneReason).toBe('max-turns');
    expect(ret.calls).toHaveLength(2);
  });

  test('cuts the observation to the response budget and stops', async () => {
    const tok = await tokenizer();
    const r1 = search('none', 'Mamek');
    const n1 = tok.encode(r1).length;
    const gen = new ScriptedGenerator(tok, () => r1);
    const { trajectories } = await runAgentLoop({
      questions: [Q1], generator: gen, retriever: new FakeRetriever(),
      options: resolveOptions({ rollout: { groupSize: 1, maxResponseTokens: n1 + 5 } }),
    });
    const t = trajectories[0]!;
    expect(t.responseIds).toHaveLength(n1 + 5);
    expect(t.rounds[0]!.observation!.truncated).toBe(true);
    expect(t.doneReason).toBe('response-budget');
    // A round never gets more tokens than the budget left.
    const gen2 = new ScriptedGenerator(tok, () => r1);
    const { trajectories: t2 } = await runAgentLoop({
      questions: [Q1], generator: gen2, retriever: new FakeRetriever(),
      options: resolveOptions({ rollout: { groupSize: 1, maxResponseTokens: 4 } }),
    });
    expect(gen2.calls[0]!.requests[0]!.maxNewTokens).toBe(4);
    expect(t2[0]!.responseIds).toHaveLength(4);
    expect(t2[0]!.doneReason).toBe('response-budget');
  });

  test('reward.budgetScore scores a budget cut in place of the format check; the model\'s own format breaks keep formatScore', async () => {
    const tok = await tokenizer();
    const r1 = search('none', 'Mamek');
    const roll = (script: (round: number) => string, maxResponseTokens: number) => rollOne(tok, script, maxResponseTokens);
    const cut = await roll(() => r1, tok.encode(r1).length + 5);
    const broken = await roll(() => '<mem>none</mem><think>x</mem>', 200);
    const answered = await roll((r) => (r === 1 ? r1 : answer('Mamek is a city in Thersekle.', 'Thersekle')), 400);
    expect([cut.doneReason, answered.doneReason]).toEqual(['response-budget', 'answer']);
    const score = (t: typeof cut, reward: Record<string, unknown>) => outcomeReward(t, tok, resolveOptions({ reward }));
    // default (none): the cut observation leaves <information> open, a format break like any other
    expect(score(cut, { formatScore: -1 })).toMatchObject({ score: -1, formatValid: false, formatReason: expect.stringContaining('<information> is not closed') });
    expect(score(cut, { formatScore: -1, budgetScore: 0 })).toMatchObject({ score: 0, formatValid: false });
    expect(score(cut, { formatScore: -1, budgetScore: -0.25 }).score).toBe(-0.25);
    expect(score(broken, { formatScore: -1, budgetScore: 0 })).toMatchObject({ score: -1, formatValid: false });
    expect(score(answered, { formatScore: -1, budgetScore: 0 })).toMatchObject({ score: 1, formatValid: true });
    expect(() => resolveOptions({ reward: { budgetScore: Number.NaN } })).toThrow(/options\.reward\.budgetScore/);
  });

  test('advantage.formatPenalty lowers the advantage of the round that broke the format, and of no other token', async () => {
    const tok = await tokenizer();
    const r1 = search('none', 'Mamek');
    const roll = (script: (round: number) => string, maxResponseTokens: number) => rollOne(tok, script, maxResponseTokens);
    // Round 1 searches, round 2 closes <think> with </mem>; a budget cut; a right answer after a search.
    const broken = await roll((r) => (r === 1 ? r1 : '<mem>Mamek</mem><think>x</mem><answer>Thersekle</answer>'), 400);
    const cut = await roll(() => r1, tok.encode(r1).length + 5);
    const answered = await roll((r) => (r === 1 ? r1 : answer('Mamek is a city in Thersekle.', 'Thersekle')), 400);
    expect(broken.rounds).toHaveLength(2);
    const advantages = (formatPenalty: number) => {
      const o = resolveOptions({ advantage: { formatPenalty } });
      const scored = [broken, cut, answered].map((t) => outcomeReward(t, tok, o));
      computeAdvantages(scored, [], o.advantage);
      return scored;
    };
    const [plain, penalised] = [advantages(0), advantages(0.5)];
    expect(penalised.map((s) => s.formatRound)).toEqual([2, 1, null]);
    const round2 = broken.rounds[1]!;
    for (const [k, s] of penalised.entries()) {
      s.advantages.forEach((a, p) => {
        const hit = k === 0 && p >= round2.start && p < round2.end && broken.responseMask[p] === 1;
        expect(a).toBeCloseTo(plain[k]!.advantages[p]! - (hit ? 0.5 : 0), 6);
      });
    }
    // The round's own tokens only: round 1 (the search) and the observation keep the outcome advantage.
    expect(penalised[0]!.advantages[broken.rounds[0]!.start]).toBe(plain[0]!.advantages[broken.rounds[0]!.start]);
    expect(penalised[0]!.advantages[round2.start]).toBeCloseTo(plain[0]!.advantages[round2.start]! - 0.5, 6);
    expect(() => resolveOptions({ advantage: { formatPenalty: -1 } })).toThrow(/options\.advantage\.formatPenalty/);
  });

  test("memory policy: round r sees system + question + round r-1's text and observation only (docs/algorithm.md §7)", async () => {
    const tok = await tokenizer();
    const rounds = [search('none', 'first'), search('fact one', 'second'), answer('fact one, two', 'Thersekle')];
    const gen = new ScriptedGenerator(tok, (tag) => rounds[tag.round - 1]!);
    const { trajectories } = await runAgentLoop({
      questions: [Q1], generator: gen, retriever: new FakeRetriever(),
      options: resolveOptions({ rollout: { groupSize: 1, context: 'memory' } }),
    });
    const ctx = gen.calls.map((c) => c.requests[0]!.ids);
    expect(ctx[0]).toEqual(tok.encode(renderPrompt(Q1.question)));
    expect(ctx[1]).toEqual(tok.encode(renderMemoryContext(Q1.question, rounds[0]!, obsFor('first'))));
    expect(ctx[2]).toEqual(tok.encode(renderMemoryContext(Q1.question, rounds[1]!, obsFor('second'))));
    expect(trajectories[0]!.rounds.map((r) => r.contextTokens)).toEqual(ctx.map((c) => c.length));
    // The response stream keeps the full layout for the trainer.
    expect(tok.decode(trajectories[0]!.responseIds)).toBe(`${rounds[0]}\n${obsFor('first')}\n${rounds[1]}\n${obsFor('second')}\n${rounds[2]}`);
  });
});

describe('snapshots (docs/algorithm.md §2) token by token', () => {
  test('fullContext, memContext and the mem span of every round r >= 2', async () => {
    const tok = await tokenizer();
    const rounds = [search('none', 'a'), search('Mamek is a city in Thersekle.', 'b'), answer('Mamek is a city in Thersekle.', 'Thersekle')];
    const gen = new ScriptedGenerator(tok, (tag) => rounds[tag.round - 1]!);
    const options = resolveOptions({ rollout: { groupSize: 1 } });
    const { trajectories } = await runAgentLoop({ questions: [Q1], generator: gen, retriever: new FakeRetriever(), options });
    const t = trajectories[0]!;
    const P = tok.encode(renderPrompt(Q1.question));
    const r = rounds.map((x) => tok.encode(x));
    const o = ['a', 'b'].map((q) => tok.encode(observationSegment(obsFor(q))));
    const snaps = buildSnapshots(trajectories, tok, options);
    expect(snaps.map((s) => s.round)).toEqual([2, 3]);
    const memIds = (x: string) => tok.encode(`<mem>${x}</mem>`);
    // Round 2
    expect(snaps[0]!.fullContext).toEqual([...P, ...r[0]!, ...o[0]!]);
    expect(snaps[0]!.memContext).toEqual([...P, ...memIds('Mamek is a city in Thersekle.')]);
    const s2 = r[0]!.length + o[0]!.length;
    expect(snaps[0]!.span).toEqual([s2, s2 + memIds('Mamek is a city in Thersekle.').length]);
    expect(t.responseIds.slice(...snaps[0]!.span)).toEqual(memIds('Mamek is a city in Thersekle.'));
    // Round 3 (the answer round has a <mem> and gets a reward)
    const s3 = s2 + r[1]!.length + o[1]!.length;
    expect(snaps[1]!.fullContext).toEqual([...P, ...r[0]!, ...o[0]!, ...r[1]!, ...o[1]!]);
    expect(snaps[1]!.memContext).toEqual([...P, ...memIds('Mamek is a city in Thersekle.')]);
    expect(snaps[1]!.span[0]).toBe(s3);
    // fullContext is a prefix of the trajectory and excludes the round's own output.
    for (const s of snaps) expect([...P, ...t.responseIds].slice(0, s.fullContext.length)).toEqual(s.fullContext);
    // Target: <answer>gold</answer>, only the gold's tokens marked.
    const gold = tok.encode('Thersekle');
    expect(snaps[0]!.targetIds).toEqual([...tok.encode('<answer>'), ...gold, ...tok.encode('</answer>')]);
    expect(Array.from(snaps[0]!.ansMask)).toEqual([0, ...gold.map(() => 1), 0]);

    // Options: content span, memory context with the last observation, another template.
    const o2 = resolveOptions({ rollout: { groupSize: 1 }, memory: { memSpan: 'content', memContextIncludesLastObservation: true, answerTemplate: 'Answer: {answer}.' } });
    const alt = buildSnapshots(trajectories, tok, o2);
    expect(alt[0]!.span).toEqual([s2 + 1, s2 + memIds('Mamek is a city in Thersekle.').length - 1]);
    expect(alt[0]!.memContext).toEqual([...P, ...o[0]!, ...memIds('Mamek is a city in Thersekle.')]);
    expect(alt[0]!.targetIds).toEqual([...tok.encode('Answer: '), ...gold, ...tok.encode('.')]);
  });
});

describe('scoring and advantages', () => {
  test('memory rewards come from ONE scorer call with the M full items first, then the M memory items', async () => {
    const tok = await tokenizer();
    // sample 0: correct in 2 rounds; 1: wrong in 2 rounds; 2: correct in 3 rounds; 3: answers in round 1 (no snapshot).
    const gen = new ScriptedGenerator(tok, (tag) => {
      if (tag.sample === 3) return answer('none', 'Thersekle');
      const last = tag.sample === 2 ? 3 : 2;
      if (tag.round < last) return search(tag.round === 1 ? 'none' : 'fact', `q${tag.round}`);
      return answer('fact', tag.sample === 1 ? 'Wrong' : 'Thersekle');
    });
    const scorer = new FakeScorer();
    const options = resolveOptions({ rollout: { groupSize: 4 } });
    const res = await runPipeline({ questions: [Q1], generator: gen, scorer, retriever: new FakeRetriever(), options });
    expect(scorer.calls).toHaveLength(1);
    const items = scorer.calls[0]!;
    expect(items).toHaveLength(2 * 4); // snapshots: s0 r2, s1 r2, s2 r2, s2 r3
    expect(res.stats).toMatchObject({ snapshots: 4, scoredItems: 8, scorerCalls: 1 });
    const recs = res.records;
    expect(recs.map((r) => r.score)).toEqual([1, 0, 1, 1]);
    const mr = Math.exp(-0.1) - Math.exp(-0.3);
    const rewards = recs.flatMap((r) => r.rounds.map((rd) => rd.memReward));
    expect(rewards.filter((x) => x !== null).map((x) => x!.toFixed(6))).toEqual(Array(4).fill(mr.toFixed(6)));
    expect(recs[0]!.rounds[0]!.memReward).toBeNull();
    expect(recs[0]!.rounds[1]!.pFull).toBeCloseTo(Math.exp(-0.3), 6);

    // Outcome advantage: group-normalised scores on every generated token, 0 on observations.
    const adv = normalise([1, 0, 1, 1]);
    recs.forEach((r, i) => {
      r.responseMask.forEach((m, k) => expect(r.outcomeAdvantage[k]).toBeCloseTo(m ? adv[i]! : 0, 5));
    });
    // Memory advantage: all 4 rewards equal → normalised to 0 everywhere.
    for (const r of recs) expect(r.memoryAdvantage.every((x) => x === 0)).toBe(true);
    for (const r of recs) r.advantages.forEach((a, k) => expect(a).toBeCloseTo(r.outcomeAdvantage[k]! + r.memoryAdvantage[k]!, 6));
  });

  test('memory advantage: pooled per question, written on its own mem span, weighted by alpha', async () => {
    const tok = await tokenizer();
    const gen = new ScriptedGenerator(tok, (tag) => (tag.round === 1 ? search('none', 'q') : answer(`fact ${tag.sample}`, 'Thersekle')));
    // Memory items of sample k score -0.1·(k+1): rewards differ per sample.
    const scorer = new FakeScorer((_it, i, n) => (i < n / 2 ? -0.5 : -0.1 * (1 + (i - n / 2))));
    const options = resolveOptions({ rollout: { groupSize: 3 }, advantage: { alpha: 0.5 } });
    const res = await runPipeline({ questions: [Q1, Q2], generator: gen, scorer, retriever: new FakeRetriever(), options });
    expect(scorer.calls).toHaveLength(1);
    for (const uid of ['q1', 'q2']) {
      const g = res.records.filter((r) => r.uid === uid);
      const rewards = g.map((r) => r.rounds[1]!.memReward!);
      const want = normalise(rewards);
      g.forEach((r, k) => {
        const [a, b] = r.rounds[1]!.memSpan!;
        for (let t = 0; t < r.responseIds.length; t++) {
          const inside = t >= a && t < b;
          expect(r.memoryAdvantage[t]).toBeCloseTo(inside ? want[k]! : 0, 5);
          expect(r.advantages[t]).toBeCloseTo(r.responseMask[t] ? r.outcomeAdvantage[t]! + 0.5 * r.memoryAdvantage[t]! : 0, 5);
        }
        // Round 1's mem span carries the outcome advantage only.
        const [a1, b1] = r.rounds[0]!.memSpan!;
        for (let t = a1; t < b1; t++) expect(r.advantages[t]).toBeCloseTo(r.outcomeAdvantage[t]!, 6);
      });
    }
  });

  test("[decided] rules are options: P = 0 when no token is kept, or the plain geometric mean; which gold", async () => {
    const tok = await tokenizer();
    const gen = new ScriptedGenerator(tok, (tag) => (tag.round === 1 ? search('none', 'q') : answer('f', 'Thersekle')));
    // Full items: every token at log 0.3 (< ln 0.5, none kept); memory items: log 0.9 (kept).
    const scorer = () => new FakeScorer((_it, i, n) => (i < n / 2 ? Math.log(0.3) : Math.log(0.9)));
    const q = { ...Q1, golds: ['Thersekle', 'T'] };
    const zero = await runPipeline({ questions: [q], generator: gen, scorer: scorer(), retriever: new FakeRetriever(), options: { rollout: { groupSize: 1 } } });
    expect(zero.records[0]!.rounds[1]!.pFull).toBe(0);
    expect(zero.records[0]!.rounds[1]!.pMem).toBeCloseTo(0.9, 6);
    const plain = await runPipeline({ questions: [q], generator: gen, scorer: scorer(), retriever: new FakeRetriever(), options: { rollout: { groupSize: 1 }, memory: { emptyKept: 'all-tokens' } } });
    expect(plain.records[0]!.rounds[1]!.pFull).toBeCloseTo(0.3, 6);
    expect(plain.records[0]!.rounds[1]!.memReward).toBeCloseTo(0.6, 6);
    const sc = scorer();
    await runPipeline({ questions: [q], generator: gen, scorer: sc, retriever: new FakeRetriever(), options: { rollout: { groupSize: 1 }, memory: { gold: 'shortest' } } });
    expect(sc.calls[0]![0]!.targetIds).toEqual([...tok.encode('<answer>'), ...tok.encode('T'), ...tok.encode('</answer>')]);
  });

  test('a tool failure is recorded and excluded; the group is normalised over the remaining samples', async () => {
    const tok = await tokenizer();
    const gen = new ScriptedGenerator(tok, (tag) => (tag.sample < 2 ? answer('none', tag.sample === 0 ? 'Thersekle' : 'Nope') : search('none', 'q')));
    const ret = new FakeRetriever();
    ret.fail = new Error('connection refused');
    const res = await runPipeline({ questions: [Q1], generator: gen, scorer: new FakeScorer(), retriever: ret, options: { rollout: { groupSize: 4 } } });
    const recs = res.records;
    expect(recs.map((r) => r.excluded)).toEqual([false, false, true, true]);
    expect(recs[2]!.error).toBe('fake: connection refused');
    expect(recs[2]!.doneReason).toBe('tool-error');
    expect(recs[2]!.score).toBeNull();
    expect(recs[2]!.advantages.every((x) => x === 0)).toBe(true);
    const adv = normalise([1, 0]);
    expect(recs[0]!.advantages[0]).toBeCloseTo(adv[0]!, 5);
    expect(recs[1]!.advantages[0]).toBeCloseTo(adv[1]!, 5);
    expect(res.stats.toolErrors).toBe(2);
  });

  test('a failed generation request or scoring item fails only its trajectory (backend-error), excluded like a tool failure', async () => {
    const tok = await tokenizer();
    const script = (tag: RequestTag) => (tag.round === 1 ? search('none', 'q') : answer('f', tag.sample === 1 ? 'Nope' : 'Thersekle'));
    const options = { rollout: { groupSize: 4 } };
    const clean = await runPipeline({ questions: [Q1], generator: new ScriptedGenerator(tok, script), scorer: new FakeScorer(), retriever: new FakeRetriever(), options });
    // Sample 2's second round fails on the server; sample 3's memory-context scoring item does.
    const gen = new FailingGenerator(new ScriptedGenerator(tok, script), (t) => t.sample === 2 && t.round === 2);
    const scorer = new FailingScorer((t) => t.sample === 3 && t.context === 'memory');
    const res = await runPipeline({ questions: [Q1], generator: gen, scorer, retriever: new FakeRetriever(), options });
    const recs = res.records;
    expect(recs.map((r) => [r.doneReason, r.excluded])).toEqual([['answer', false], ['answer', false], ['backend-error', true], ['backend-error', true]]);
    expect(recs[2]!.error).toBe('http://gpu:8000/v1/completions (generation request 2 (q1 sample 2 round 2)): the answer is not valid JSON: {oops');
    expect(recs[3]!.error).toBe('http://gpu:8000/v1/completions (scoring item 5 (q1 sample 3 round 2, memory context)): the answer comes from model "other"');
    // The failed round is not recorded: sample 2 keeps round 1 and its observation, whole.
    expect(recs[2]!.rounds).toHaveLength(1);
    expect(recs[2]!.responseIds).toEqual(clean.records[2]!.responseIds.slice(0, recs[2]!.rounds[0]!.observation!.end));
    expect(recs[3]!.responseIds).toEqual(clean.records[3]!.responseIds);
    for (const r of recs.slice(2)) {
      expect(r.score).toBeNull();
      expect(r.advantages.every((x) => x === 0)).toBe(true);
      expect(r.rounds.every((q) => q.memReward === null)).toBe(true);
    }
    // The other two: as in the clean run, normalised over the remaining samples (scores 1, 0).
    for (const i of [0, 1]) {
      expect(recs[i]!.responseIds).toEqual(clean.records[i]!.responseIds);
      expect(recs[i]!.rounds.map((q) => q.memReward)).toEqual(clean.records[i]!.rounds.map((q) => q.memReward));
      expect(recs[i]!.advantages[0]).toBeCloseTo(normalise([1, 0])[i]!, 5);
    }
    expect(res.stats).toMatchObject({ backendErrors: 2, toolErrors: 0 });
    // Every item carried its tag; the one scorer call still held all 2M items.
    expect(scorer.calls).toHaveLength(1);
    expect(scorer.calls[0]!.map((it) => it.tag)).toEqual([0, 1, 3, 0, 1, 3].map((sample, k) => ({ uid: 'q1', sample, round: 2, context: k < 3 ? 'full' : 'memory' })));
    expect(summarize(recs, null)).toMatchObject({ excluded: 2, toolErrors: 0, backendErrors: 2, doneReasons: { answer: 2, 'backend-error': 2 } });
  });

  test('a batch in which every trajectory failed on the server stops the run before its records are delivered; other errors stop it as before', async () => {
    const tok = await tokenizer();
    const script = (tag: RequestTag) => (tag.round === 1 ? search('none', 'q') : answer('f', 'Thersekle'));
    const delivered: string[] = [];
    const run = runPipeline({
      questions: [Q1, Q2], generator: new FailingGenerator(new ScriptedGenerator(tok, script), (t) => t.uid === 'q2'), scorer: new FakeScorer(), retriever: new FakeRetriever(),
      options: { rollout: { groupSize: 2, questionsPerBatch: 1 } }, onBatch: (recs) => { delivered.push(...recs.map((r) => `${r.uid}/${r.sample}`)); },
    });
    await expect(run).rejects.toThrow('batch 2 of 2: all 2 trajectories failed on the inference server, so the run stops (the batches before it were delivered; a resumed run redoes this one); first error: http://gpu:8000/v1/completions (generation request 0 (q2 sample 0 round 1)): the answer is not valid JSON');
    await expect(run).rejects.toMatchObject({ code: 'ERR_BACKEND' });
    expect(delivered).toEqual(['q1/0', 'q1/1']);
    // Any other generator error (the in-process model's included) stops the run as it always did.
    const broken: Generator = { codec: tok, maxContextTokens: 2048, generate: () => Promise.reject(new Error('onnxruntime: out of memory')) };
    await expect(runPipeline({ questions: [Q1], generator: broken, scorer: null, retriever: new FakeRetriever(), options: { rollout: { groupSize: 2 } } })).rejects.toThrow('onnxruntime: out of memory');
  });

  test('scoreBatch without a scorer gives outcome advantages only', async () => {
    const tok = await tokenizer();
    const gen = new ScriptedGenerator(tok, (tag) => (tag.round === 1 ? search('none', 'q') : answer('f', 'Thersekle')));
    const options = resolveOptions({ rollout: { groupSize: 2 } });
    const { trajectories } = await runAgentLoop({ questions: [Q1], generator: gen, retriever: new FakeRetriever(), options });
    const { scored, stats } = await scoreBatch(trajectories, tok, null, options);
    expect(stats.scorerCalls).toBe(0);
    expect(scored.every((s) => s.roundRewards.every((r) => r === null))).toBe(true);
  });

  test('each sampling call gets a seed derived from (seed, batch, step)', async () => {
    const tok = await tokenizer();
    const seeds = async (seed: number) => {
      const gen = new ScriptedGenerator(tok, (tag) => (tag.round === 1 ? search('none', 'q') : answer('f', 'x')));
      await runPipeline({ questions: [Q1, Q2], generator: gen, scorer: null, retriever: new FakeRetriever(), options: { rollout: { groupSize: 2, seed, questionsPerBatch: 1 } } });
      return gen.calls.map((c) => c.params.seed);
    };
    const a = await seeds(7);
    expect(a).toHaveLength(4);
    expect(new Set(a).size).toBe(4);
    expect(await seeds(7)).toEqual(a);
    expect(await seeds(8)).not.toEqual(a);
  });
});

describe('options and inputs', () => {
  test('every option has the default of docs/algorithm.md', () => {
    const o = resolveOptions({});
    expect(o.rollout).toMatchObject({ groupSize: 16, context: 'full', sampling: { temperature: 1, topP: 1, topK: 0 } });
    expect(o.tool.topk).toBe(3);
    expect(o.memory).toMatchObject({ memSpan: 'inclusive', answerTemplate: '<answer>{answer}</answer>', targetTokenization: 'apart', gold: 'first', emptyKept: 'zero', threshold: Math.log(0.5), memContextIncludesLastObservation: false, windowToolResults: 1, searchShortTextChars: null, webpageShortTextChars: 100 });
    expect(o.reward).toEqual({ formatScore: 0, budgetScore: null, metric: 'em', requireAnswer: false });
    expect(o.advantage).toEqual({ eps: 1e-6, normByStd: true, memGrouping: 'question', alpha: 1, formatPenalty: 0 });
    expect(resolveOptions({ memory: { threshold: -Infinity } }).memory.threshold).toBe(-Infinity);
  });

  test('rejects an invalid option naming it', () => {
    expect(() => resolveOptions({ rollout: { groupSize: 0 } })).toThrow(/^Invalid option options\.rollout\.groupSize: /);
    expect(() => resolveOptions({ rollout: { context: 'window' } })).toThrow(/options\.rollout\.context/);
    expect(() => resolveOptions({ memory: { answerTemplate: '<answer></answer>' } })).toThrow(/options\.memory\.answerTemplate: must contain \{answer\} exactly once/);
    expect(() => resolveOptions({ rollout: { groupsize: 4 } })).toThrow(/Unrecognized key.*"groupsize"/);
    expect(() => resolveOptions({ memory: { threshold: Infinity } })).toThrow(/options\.memory\.threshold/);
  });

  test('rejects a malformed questions line naming the file, line and field', () => {
    const dir = mkdtempSync(join(tmpdir(), 'mempo-q-'));
    const f = join(dir, 'q.jsonl');
    writeFileSync(f, '{"id":"a","question":"Q?","golds":["x"]}\n{"id":"b","question":"Q?","golds":[1]}\n');
    expect(() => readQuestions(f)).toThrow(`${f}:2: field "golds[0]": Invalid input: expected string, received number`);
    writeFileSync(f, '{"id":"a","question":"Q?","golds":"x"}\n\n{"id":"b","question":"Q?"\n');
    expect(() => readQuestions(f)).toThrow(`${f}:3: not valid JSON`);
    writeFileSync(f, '{"id":"a","question":"Q?","golds":"x"}\n{"id":"a","question":"R?","golds":"y"}\n');
    expect(() => readQuestions(f)).toThrow(`${f}:2: field "id": "a" repeats line 1`);
    writeFileSync(f, '{"id":"a","golds":"x"}\n');
    expect(() => readQuestions(f)).toThrow(`${f}:1: field "question": `);
    writeFileSync(f, '{"id":7,"question":"Q?","golds":"x"}\n');
    expect(readQuestions(f)).toEqual([{ id: '7', question: 'Q?', golds: ['x'] }]);
  });

  test('toTensorBatch pads prompts left and responses right (B × T)', async () => {
    const tok = await tokenizer();
    const gen = new ScriptedGenerator(tok, (tag) => (tag.sample === 0 ? answer('n', 'Thersekle') : tag.round === 1 ? search('n', 'q') : answer('f', 'x')));
    const res = await runPipeline({ questions: [Q1, Q2], generator: gen, scorer: new FakeScorer(), retriever: new FakeRetriever(), options: { rollout: { groupSize: 2 } } });
    const pad = tok.padTokenId ?? tok.eosTokenId!;
    const tb = toTensorBatch(res.records, pad);
    const T = Math.max(...res.records.map((r) => r.responseIds.length));
    const P = Math.max(...res.records.map((r) => r.promptIds.length));
    expect([tb.B, tb.T, tb.P]).toEqual([4, T, P]);
    expect(tb.responseIds).toHaveLength(4 * T);
    expect(tb.advantages).toBeInstanceOf(Float32Array);
    res.records.forEach((r, b) => {
      expect(Array.from(tb.responseIds.subarray(b * T, b * T + r.responseIds.length))).toEqual(r.responseIds);
      expect(Array.from(tb.responseMask.subarray(b * T, (b + 1) * T))).toEqual([...r.responseMask, ...Array(T - r.responseIds.length).fill(0)]);
      expect(Array.from(tb.responseIds.subarray(b * T + r.responseIds.length, (b + 1) * T))).toEqual(Array(T - r.responseIds.length).fill(pad));
      expect(Array.from(tb.promptIds.subarray((b + 1) * P - r.promptIds.length, (b + 1) * P))).toEqual(r.promptIds);
      expect(tb.advantages[b * T]).toBeCloseTo(r.advantages[0]!, 6);
    });
  });
});
