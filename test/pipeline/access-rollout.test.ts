/**
 * The page tool in the agent loop (docs/algorithm.md §1, §2, §7), on scripted rounds and the
 * embedded model's real tokenizer: trajectories that mix searches and accesses, read a page chunk
 * by chunk, and forget it. Observations, the `full` stream, snapshot contexts (full and memory,
 * with and without the last observation), memory rewards and the `memory`-policy windows are each
 * rebuilt here from text written out by hand, never from the code under test.
 */
import type { Server } from 'node:http';
import { renderChat, type ChatMessage } from '../../src/protocol/chat';
import { renderRound } from '../../src/protocol/round';
import { runAgentLoop, type RolloutTrajectory } from '../../src/pipeline/rollout';
import { buildSnapshots } from '../../src/pipeline/snapshots';
import { runPipeline } from '../../src/pipeline/pipeline';
import { summarize } from '../../src/pipeline/summary';
import { resolveOptions, type PipelineOptionsInput } from '../../src/options';
import { ScriptedGenerator } from '../../src/engines/scripted';
import { Bm25Retriever } from '../../src/retrieval/bm25';
import { HttpRetriever } from '../../src/retrieval/http-retriever';
import { PageStore } from '../../src/retrieval/pages';
import { createRetrievalServer, listen } from '../../src/servers/retrieval-server';
import { validateFormat } from '../../src/kernels/outcome-reward';
import { MempoError } from '../../src/errors';
import type { Retriever } from '../../src/contracts';
import { REAL_NAMES, realTokenizer } from '../protocol/real-tokenizers';
import { ACCESS_PROMPT, C1, C2, C3, DOC, NONE, P1, P2, P3, PAGE, SEARCH_OBS, URL_M, URL_X, renderPrompt } from './page-fixture';
import { CannedGenerator, FakeScorer, Q1, answer, search, tokenizer } from './helpers';


const access = (mem: string, url: string) => renderRound(mem, 'Read the page.', { kind: 'access', url });
// What the tool shows, written out: mempo's format with 20-character short texts.
const P2_SHORT = `<information>Page 2 of 3 (${URL_M}): Mamek lies in the la</information>`;

/** Per sample, the rounds and the observation each is answered with (the last round answers). */
const SCRIPT: Array<Array<[string, string | null]>> = [
  // Sample 0 searches, opens the page, reads on to chunk 2 and writes the fact into its mem.
  [[search('none', 'Mamek'), SEARCH_OBS], [access('none', URL_M), P1], [access('Mamek has a page.', URL_M), P2], [answer('Mamek lies in Thersekle.', 'Thersekle'), null]],
  // Sample 1 reads chunks 1 and 2, forgets the fact, tries an unknown URL and searches.
  [[access('none', URL_M), P1], [access('none', URL_M), P2], [access('none', URL_X), NONE], [search('none', 'Mamek country'), SEARCH_OBS], [answer('none', 'Thersekle'), null]],
  // Sample 2 reads the page to its end and past it.
  [[access('none', URL_M), P1], [access('none', URL_M), P2], [access('Mamek lies in Thersekle.', URL_M), P3], [access('Mamek lies in Thersekle.', URL_M), NONE], [answer('Mamek lies in Thersekle.', 'Thersekle')]].map(([r, o]) => [r!, o ?? null] as [string, string | null]),
];

const TOOL = { access: true, topk: 1, pageChunkChars: 60, pageMaxChars: 1000 };
const options = (extra: PipelineOptionsInput = {}) => resolveOptions({
  ...extra,
  rollout: { groupSize: SCRIPT.length, maxTurns: 8, maxResponseTokens: 4096, maxRoundTokens: 200, ...extra.rollout },
  tool: { ...TOOL, ...extra.tool },
  memory: { webpageShortTextChars: 20, ...extra.memory },
});

const localRetriever = () => new Bm25Retriever([DOC], {}, 'bm25', new PageStore([PAGE]));
const generator = async () => new ScriptedGenerator(await tokenizer(), (tag) => SCRIPT[tag.sample]![tag.round - 1]![0]);

/** The `full` stream of a sample up to (not including) round r, written out. */
const streamBefore = (sample: number, r: number) => SCRIPT[sample]!.slice(0, r - 1).map(([round, obs]) => `${round}\n${obs!}\n`).join('');
const memOf = (round: string) => /^<mem>.*?<\/mem>/.exec(round)![0];

describe('the page tool in the agent loop', () => {
  test('observations, the full stream, rounds and stats of trajectories mixing search and access', async () => {
    const tok = await tokenizer();
    const retriever = localRetriever();
    const calls: string[][] = [];
    const access0 = retriever.access!;
    (retriever as { access?: unknown }).access = (urls: readonly string[]) => { calls.push([...urls]); return access0(urls); };
    const { trajectories, stats } = await runAgentLoop({ questions: [Q1], generator: await generator(), retriever, options: options() });
    SCRIPT.forEach((rounds, s) => {
      const t = trajectories[s]!;
      expect(t.doneReason).toBe('answer');
      expect(t.rounds.map((r) => r.text)).toEqual(rounds.map(([r]) => r));
      expect(t.rounds.map((r) => r.observation?.text ?? null)).toEqual(rounds.map(([, o]) => o));
      expect(tok.decode(t.responseIds)).toBe(streamBefore(s, rounds.length) + rounds[rounds.length - 1]![0]);
      // Observation tokens carry mask 0, generated ones 1.
      const generated = rounds.reduce((a, [r]) => a + tok.encode(r).length, 0);
      expect(t.responseMask.filter((m) => m === 1)).toHaveLength(generated);
      expect(validateFormat(tok.decode(t.responseIds), { access: true })).toEqual({ valid: true });
    });
    const t0 = trajectories[0]!;
    expect(t0.rounds.map((r) => [r.action, r.url ?? null, r.page ?? null])).toEqual([['search', null, null], ['access', URL_M, 1], ['access', URL_M, 2], ['answer', null, null]]);
    expect(t0.rounds[2]!.observation!.shortText).toBe(P2_SHORT);
    expect(trajectories[1]!.rounds.map((r) => r.page ?? null)).toEqual([1, 2, null, null, null]);
    // A page is fetched on a trajectory's first access of it, all of a step's in one call; later chunks come from its cursor.
    expect(calls).toEqual([[URL_M, URL_M], [URL_M], [URL_X]]);
    expect(stats).toMatchObject({ searches: 2, accesses: 9, pagesOpened: 3 });
  });

  test('snapshot contexts: full carries the whole chunk; memory is the prompt and the mem, with the last observation whole when asked', async () => {
    const tok = await tokenizer();
    const prompt = renderPrompt(Q1.question);
    for (const withLast of [false, true]) {
      const o = options({ memory: { memContextIncludesLastObservation: withLast } });
      const { trajectories } = await runAgentLoop({ questions: [Q1], generator: await generator(), retriever: localRetriever(), options: o });
      const snaps = buildSnapshots(trajectories, tok, o);
      const expected = SCRIPT.flatMap((rounds, s) => rounds.slice(1).map(([round], i) => {
        const r = i + 2;
        const prev = rounds[r - 2]![1]!;
        return {
          sample: s,
          round: r,
          full: [...tok.encode(prompt), ...SCRIPT[s]!.slice(0, r - 1).flatMap(([rt, ob]) => [...tok.encode(rt), ...tok.encode(`\n${ob!}\n`)])],
          fullText: prompt + streamBefore(s, r),
          mem: [...tok.encode(prompt), ...(withLast ? tok.encode(`\n${prev}\n`) : []), ...tok.encode(memOf(round))],
          memText: prompt + (withLast ? `\n${prev}\n` : '') + memOf(round),
        };
      }));
      expect(snaps.map((x) => [x.trajectory.sample, x.round])).toEqual(expected.map((e) => [e.sample, e.round]));
      snaps.forEach((x, k) => {
        const e = expected[k]!;
        expect(x.fullContext).toEqual(e.full);
        expect(tok.decode(x.fullContext)).toBe(e.fullText);
        expect(x.memContext).toEqual(e.mem);
        expect(tok.decode(x.memContext)).toBe(e.memText);
      });
      // Round 3 of sample 0 follows chunk 1; round 4 follows chunk 2, whole in the full context.
      expect(tok.decode(snaps.find((x) => x.trajectory.sample === 0 && x.round === 4)!.fullContext)).toContain(C2);
    }
  });

  test('memory rewards: the fact read on page 2 counts only where the mem (or the page just shown) holds it', async () => {
    const tok = await tokenizer();
    const gold = 'Thersekle';
    // A scorer that "reads": the gold is likely exactly when the context's text contains it.
    const lp = -0.05;
    const reads = () => new FakeScorer((item) => (tok.decode(item.contextIds).includes(gold) ? lp : -2));
    for (const withLast of [false, true]) {
      const o = options({ memory: { memContextIncludesLastObservation: withLast } });
      const { records } = await runPipeline({ questions: [Q1], generator: await generator(), scorer: reads(), retriever: localRetriever(), options: o });
      SCRIPT.forEach((rounds, s) => {
        const rec = records[s]!;
        expect(rec.score).toBe(1);
        rounds.forEach(([round], i) => {
          const r = i + 1;
          const got = rec.rounds[i]!;
          if (r === 1) {
            expect(got.memReward).toBeNull();
            return;
          }
          // Rebuilt from text: is the gold in what each context shows?
          const fullHas = (Q1.question + streamBefore(s, r)).includes(gold);
          const memHas = (memOf(round) + (withLast ? rounds[r - 2]![1]! : '')).includes(gold);
          const p = (has: boolean) => (has ? Math.exp(lp) : 0);
          expect(got.pFull).toBeCloseTo(p(fullHas), 6);
          expect(got.pMem).toBeCloseTo(p(memHas), 6);
          expect(got.memReward).toBeCloseTo(p(memHas) - p(fullHas), 6);
        });
      });
      // Sample 1 forgot the fact: round 3 follows chunk 2, round 4 follows its forgetting.
      const forgot = records[1]!.rounds;
      expect(forgot[2]!.memReward).toBeCloseTo(withLast ? 0 : -Math.exp(lp), 6);
      expect(forgot[3]!.memReward).toBeCloseTo(-Math.exp(lp), 6);
      // Sample 0 copied it into its mem before the page shrank.
      expect(records[0]!.rounds[3]!.memReward).toBeCloseTo(0, 6);
      const summary = summarize(records, null);
      expect(summary.access).toEqual({ rounds: 9, pagesOpened: 3, chunksShown: 7 });
      expect(records[0]!.rounds[1]).toMatchObject({ action: 'access', url: URL_M, page: 1 });
    }
  });

  test('memory policy: a chunk is whole in the round it arrives, then its short text, then nothing (window 1 and 2)', async () => {
    const tok = await tokenizer();
    const head: ChatMessage[] = [{ role: 'system', content: ACCESS_PROMPT }, { role: 'user', content: Q1.question }];
    const short = (obs: string) => (obs === P1 ? `<information>Page 1 of 3 (${URL_M}): ${C1.slice(0, 20)}</information>`
      : obs === P2 ? P2_SHORT : obs === P3 ? `<information>Page 3 of 3 (${URL_M}): ${C3}</information>` : obs);
    for (const window of [1, 2]) {
      const o = options({ rollout: { context: 'memory' }, memory: { windowToolResults: window } });
      const { trajectories } = await runAgentLoop({ questions: [Q1], generator: await generator(), retriever: localRetriever(), options: o });
      SCRIPT.forEach((rounds, s) => {
        const t: RolloutTrajectory = trajectories[s]!;
        rounds.forEach((_x, i) => {
          const r = i + 1;
          const ctx = t.rounds[i]!.contextIds!;
          if (r === 1) {
            expect(tok.decode(ctx)).toBe(renderPrompt(Q1.question));
            return;
          }
          // The window: the last `window` rounds with their observations; only the newest whole.
          const from = Math.max(0, r - 1 - window);
          const msgs: ChatMessage[] = [...head];
          for (let k = from; k < r - 1; k++) {
            msgs.push({ role: 'assistant', content: rounds[k]![0] });
            msgs.push({ role: 'user', content: k === r - 2 ? rounds[k]![1]! : short(rounds[k]![1]!) });
          }
          expect(ctx).toEqual(tok.encode(renderChat(msgs, true)));
        });
      });
      // Sample 1, round 4: chunk 2 (which holds the fact) shows only its short text in a window of 2, nothing in a window of 1.
      const text = tok.decode(trajectories[1]!.rounds[3]!.contextIds!);
      expect(text).not.toContain('Thersekle');
      expect(text.includes(P2_SHORT)).toBe(window === 2);
      expect(text.includes('Mamek lies')).toBe(window === 2);
    }
  });

  test("ASearcher's observation format end to end", async () => {
    const o = options({ tool: { observationFormat: 'asearcher', docMaxChars: 5000 } });
    const { trajectories } = await runAgentLoop({ questions: [Q1], generator: await generator(), retriever: localRetriever(), options: o });
    expect(trajectories[2]!.rounds.map((r) => r.observation?.text ?? null)).toEqual([
      `<information>\n>>>> Page 1 >>>>\n\n${C1}\n</information>`,
      `<information>\n>>>> Page 2 >>>>\n\n${C2}\n</information>`,
      `<information>\n>>>> Page 3 >>>>\n\n${C3}\n</information>`,
      '<information>\nNo More Information is Found for this URL.\n</information>',
      null,
    ]);
    expect(trajectories[2]!.rounds[1]!.observation!.shortText).toBe(`<information>\n>>>> Page 2 >>>>\n\n${C2.slice(0, 20)}\n</information>`);
    expect(trajectories[0]!.rounds[0]!.observation!.text).toBe(`<information>\n[Doc 1](${URL_M}):\n"Mamek"\n${DOC.contents}\n</information>`);
  });

  test('a retrieval server with pages (POST /access on loopback) gives the same trajectories as the local tool', async () => {
    const server: Server = createRetrievalServer(localRetriever());
    const url = await listen(server, 0);
    try {
      const remote = new HttpRetriever(url, { retries: 0 });
      const viaHttp = await runAgentLoop({ questions: [Q1], generator: await generator(), retriever: remote, options: options() });
      const local = await runAgentLoop({ questions: [Q1], generator: await generator(), retriever: localRetriever(), options: options() });
      expect(viaHttp.trajectories.map((t) => t.responseIds)).toEqual(local.trajectories.map((t) => t.responseIds));
      expect(viaHttp.stats).toMatchObject({ accesses: 9, pagesOpened: 3, toolErrors: 0 });
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  test('a failing page tool ends its trajectories as tool errors; tool.access without pages is an error naming the option', async () => {
    const failing: Retriever = { name: 'flaky', search: (qs) => Promise.resolve(qs.map(() => [])), access: () => Promise.reject(new Error('connection reset')) };
    const { trajectories, stats } = await runAgentLoop({ questions: [Q1], generator: await generator(), retriever: failing, options: options() });
    expect(trajectories.map((t) => t.doneReason)).toEqual(['tool-error', 'tool-error', 'tool-error']);
    expect(trajectories[0]!.error).toBe('flaky: connection reset');
    expect(stats.toolErrors).toBe(3);
    const bare: Retriever = { name: 'bare', search: (qs) => Promise.resolve(qs.map(() => [])) };
    const err = await runAgentLoop({ questions: [Q1], generator: await generator(), retriever: bare, options: options() }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MempoError);
    expect((err as MempoError).message).toBe('options.tool.access: the retriever bare has no pages (give it a pages file, --pages FILE, or a retrieval server started with --pages)');
  });

  test('without tool.access the same rounds are not actions: <access> is text and nothing is fetched', async () => {
    const retriever = localRetriever();
    const o = resolveOptions({ rollout: { groupSize: 1 }, tool: { topk: 1 } });
    const { trajectories, stats } = await runAgentLoop({ questions: [Q1], generator: new ScriptedGenerator(await tokenizer(), () => access('none', URL_M)), retriever, options: o });
    expect(trajectories[0]!.rounds[0]!.action).toBeNull();
    expect(trajectories[0]!.doneReason).toBe('no-action');
    expect(stats).toMatchObject({ accesses: 0, pagesOpened: 0 });
  });

  test("the system message: search-only without pages, the page tool's with them, the user's rollout.systemPrompt over both", async () => {
    const tok = await tokenizer();
    const SEARCH_PROMPT = 'Answer with search. Each turn: memory of facts found, thoughts, then a search or the answer.';
    const mine = 'You are a careful agent. Keep notes.';
    const cases: Array<[PipelineOptionsInput, string]> = [
      [{ tool: { access: false } }, SEARCH_PROMPT],
      [{}, ACCESS_PROMPT],
      [{ rollout: { systemPrompt: mine } }, mine],
      [{ tool: { access: false }, rollout: { systemPrompt: mine } }, mine],
    ];
    for (const [extra, want] of cases) {
      const o = options({ ...extra, rollout: { context: 'memory', ...extra.rollout } });
      const { trajectories } = await runAgentLoop({ questions: [Q1], generator: await generator(), retriever: localRetriever(), options: o });
      const t = trajectories[0]!;
      const head = `<|im_start|>system\n${want}<|im_end|>\n<|im_start|>user\n${Q1.question}<|im_end|>\n`;
      expect(tok.decode(t.promptIds)).toBe(`${head}<|im_start|>assistant\n`);
      // every memory-policy context (round 2 on: the window) starts with the same system message
      for (const r of t.rounds.slice(1)) expect(tok.decode(r.contextIds!).startsWith(head)).toBe(true);
    }
    expect(() => resolveOptions({ rollout: { systemPrompt: '' } })).toThrow(/systemPrompt/);
  });
});


describe.each(REAL_NAMES)('the page tool with the %s tokenizer (tags spelled with several tokens)', (name) => {
  test('</access> ends the round where its text completes, the URL is read from the decoded text, the page follows', async () => {
    const tok = await realTokenizer(name);
    const rounds = [
      `<mem>none</mem>\n<think>Open it.</think>\n<access>${URL_M}</access>\n\nignored`,
      `<mem>Mamek has a page.</mem>\n<think>Read on.</think>\n<access> ${URL_M} </access>\n\n<mem>`,
      '<mem>Mamek lies in Thersekle.</mem><think>ok</think><answer>Thersekle</answer>',
    ];
    const gen = new CannedGenerator(tok, (tag) => rounds[tag.round - 1]!);
    const o = options({ rollout: { groupSize: 1, chatTemplate: 'chatml' } });
    const { trajectories } = await runAgentLoop({ questions: [Q1], generator: gen, retriever: localRetriever(), options: o });
    const t = trajectories[0]!;
    expect(t.doneReason).toBe('answer');
    expect(t.rounds.map((r) => [r.action, r.url ?? null, r.observation?.text ?? null])).toEqual([['access', URL_M, P1], ['access', URL_M, P2], ['answer', null, null]]);
    // Generation stopped inside the canned text: nothing after </access> but what its completing token carries.
    for (const [i, r] of t.rounds.slice(0, 2).entries()) {
      const cut = r.text.indexOf('</access>') + '</access>'.length;
      expect(rounds[i]!.startsWith(r.text)).toBe(true);
      expect(r.text.slice(cut)).not.toContain('ignored');
    }
    expect(validateFormat(tok.decode(t.responseIds), { access: true }).valid).toBe(true);
    const snaps = buildSnapshots(trajectories, tok, o);
    expect(snaps.map((x) => x.round)).toEqual([2, 3]);
    expect(tok.decode(snaps[1]!.fullContext)).toContain(C2);
    expect(tok.decode(snaps[1]!.memContext).startsWith(`${renderPrompt(Q1.question)}<mem>Mamek lies in Thersekle.</mem>`)).toBe(true);
  });
});
