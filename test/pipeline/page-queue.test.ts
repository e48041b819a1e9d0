/**
 * ASearcher's chunk queue as an option (docs/algorithm.md §1, §2, §7; `tool.pageReading: 'queue'`):
 * an access queues every chunk of its page and each following round reads one, a reading round
 * (`<mem>`, `<think>`, no action, stopped at `</think>`). Scripted trajectories on the embedded
 * tokenizer and on real tokenizers whose tags are several tokens: observations, the `full` stream,
 * stop strings, snapshot contexts, memory rewards, `memory`-policy windows and the format check are
 * each written out here by hand, never produced by the code under test.
 */
import type { Server } from 'node:http';
import { Command } from 'commander';
import { renderChat, type ChatMessage } from '../../src/protocol/chat';
import { renderRound } from '../../src/protocol/round';
import { checkRound, grammarFor } from '../../src/protocol/grammar';
import { runAgentLoop, type RolloutTrajectory } from '../../src/pipeline/rollout';
import { buildSnapshots } from '../../src/pipeline/snapshots';
import { runPipeline } from '../../src/pipeline/pipeline';
import { batchRecordSchema } from '../../src/io/batch-record';
import { resolveOptions, type PipelineOptionsInput } from '../../src/options';
import { addPipelineOptions, pipelineOptionsFromFlags } from '../../src/cli/options';
import { ScriptedGenerator } from '../../src/engines/scripted';
import { Bm25Retriever } from '../../src/retrieval/bm25';
import { HttpRetriever } from '../../src/retrieval/http-retriever';
import { PageStore } from '../../src/retrieval/pages';
import { createRetrievalServer, listen } from '../../src/servers/retrieval-server';
import { computeScore, validateFormat } from '../../src/kernels/outcome-reward';
import { REAL_NAMES, realTokenizer } from '../protocol/real-tokenizers';
import { connectCompletionsServers } from '../../src/engines/http/connect';
import { startVllmFake, type FakeModel } from '../fakes/vllm-fake';
import { ACCESS_PROMPT, C1, C2, C3, DOC, NONE, P1, P2, P3, PAGE, SEARCH_OBS, URL_M, URL_X, renderPrompt } from './page-fixture';
import { CannedGenerator, FakeScorer, MODEL_DIR, Q1, answer, search, tokenizer } from './helpers';


// What the tool shows, written out: mempo's format with 20-character short texts.
const SHORT = new Map([
  [P1, `<information>Page 1 of 3 (${URL_M}): Mamek is an old city</information>`],
  [P2, `<information>Page 2 of 3 (${URL_M}): Mamek lies in the la</information>`],
  [P3, P3],
]);
const short = (obs: string) => SHORT.get(obs) ?? obs;

const access = (mem: string, url: string) => renderRound(mem, 'Read the page.', { kind: 'access', url });
const READ = (mem: string) => `<mem>${mem}</mem><think>Read on.</think>`;
const FACT = 'Mamek lies in Thersekle.';

/** One round: what the model is scripted to write, the round text kept (cut at the stop), its observation, whether it reads. */
interface Step { script: string; text: string; obs: string | null; reading: boolean }
const step = (script: string, obs: string | null, reading: boolean, text = script): Step => ({ script, text, obs, reading });

const SCRIPT: Step[][] = [
  // Sample 0 searches, opens the page (chunk 1 now, 2 and 3 queued), reads chunks 2 and 3 and copies the fact into its mem.
  // Its first reading round also writes an access after </think>: the stop at </think> cuts it off.
  [
    step(search('none', 'Mamek'), SEARCH_OBS, false),
    step(access('none', URL_M), P1, false),
    step(`${READ('Mamek has a page.')}<access>${URL_M}</access>`, P2, true, READ('Mamek has a page.')),
    step(READ(FACT), P3, true),
    step(answer(FACT, 'Thersekle'), null, false),
  ],
  // Sample 1 writes a search while chunks are queued (a violation; ASearcher runs it and queues its result behind the chunks).
  [
    step(access('none', URL_M), P1, false),
    step('<mem>none</mem><search>Mamek country</search><think>Search too.</think>', P2, true),
    step(READ('none'), P3, true),
    step(READ('none'), SEARCH_OBS, true),
    step(answer('none', 'Thersekle'), null, false),
  ],
  // Sample 2: an unknown URL queues nothing; the page read to its end, then opened again from chunk 1
  // (no second page-tool call); an answer written in a reading round after </think> is cut off.
  [
    step(access('none', URL_X), NONE, false),
    step(access('none', URL_M), P1, false),
    step(READ(FACT), P2, true),
    step(READ(FACT), P3, true),
    step(access(FACT, URL_M), P1, false),
    step(`<mem>${FACT}</mem><think>I know it.</think><answer>Thersekle</answer>`, P2, true, `<mem>${FACT}</mem><think>I know it.</think>`),
    step(READ(FACT), P3, true),
    step(answer(FACT, 'Thersekle'), null, false),
  ],
  // Sample 3 answers before </think> in a reading round: the answer ends the trajectory (ASearcher's is_finished), a violation.
  [
    step(access('none', URL_M), P1, false),
    step('<mem>none</mem><answer>Thersekle</answer><think>Done.</think>', null, true),
  ],
];
// validateFormat's verdict per sample, written out.
const FORMAT = [
  { valid: true },
  { valid: false, reason: 'round 2: expected <think> after </mem> but found <search>', round: 2 },
  { valid: true },
  { valid: false, reason: 'round 2: expected <think> after </mem> but found <answer>', round: 2 },
];
const readingRounds = (s: number) => SCRIPT[s]!.flatMap((x, i) => (x.reading ? [i + 1] : []));

const TOOL = { access: true, topk: 1, pageChunkChars: 60, pageMaxChars: 1000, pageReading: 'queue' as const };
const options = (extra: PipelineOptionsInput = {}) => resolveOptions({
  ...extra,
  rollout: { groupSize: SCRIPT.length, maxTurns: 10, maxResponseTokens: 4096, maxRoundTokens: 200, ...extra.rollout },
  tool: { ...TOOL, ...extra.tool },
  memory: { webpageShortTextChars: 20, ...extra.memory },
});

const localRetriever = () => new Bm25Retriever([DOC], {}, 'bm25', new PageStore([PAGE]));
const generator = async () => new ScriptedGenerator(await tokenizer(), (tag) => SCRIPT[tag.sample]![tag.round - 1]!.script);

/** The `full` stream of a sample before round r, written out. */
const streamBefore = (s: number, r: number) => SCRIPT[s]!.slice(0, r - 1).map((x) => `${x.text}\n${x.obs!}\n`).join('');
const memOf = (round: string) => /^<mem>.*?<\/mem>/.exec(round)![0];

describe("tool.pageReading 'queue': ASearcher's chunk queue", () => {
  test("the default is 'cursor'; --page-reading queue selects the queue, anything else is refused", () => {
    expect(resolveOptions({}).tool.pageReading).toBe('cursor');
    const parse = (argv: string[]) => {
      const cmd = addPipelineOptions(new Command().exitOverride().configureOutput({ writeErr: () => {} }));
      cmd.parse(argv, { from: 'user' });
      return pipelineOptionsFromFlags(cmd.opts()).tool.pageReading;
    };
    expect(parse([])).toBe('cursor');
    expect(parse(['--page-reading', 'queue'])).toBe('queue');
    expect(() => parse(['--page-reading', 'stack'])).toThrow('Allowed choices are cursor, queue');
    expect(() => resolveOptions({ tool: { pageReading: 'stack' } as never })).toThrow(/options\.tool\.pageReading/);
  });

  test('observations, reading rounds, stop strings, the full stream, page-tool calls and the format of each trajectory', async () => {
    const tok = await tokenizer();
    const retriever = localRetriever();
    const calls: string[][] = [];
    const access0 = retriever.access!;
    (retriever as { access?: unknown }).access = (urls: readonly string[]) => { calls.push([...urls]); return access0(urls); };
    const gen = await generator();
    const { trajectories, stats } = await runAgentLoop({ questions: [Q1], generator: gen, retriever, options: options() });
    SCRIPT.forEach((steps, s) => {
      const t = trajectories[s]!;
      expect(t.doneReason).toBe('answer');
      expect(t.rounds.map((r) => r.text)).toEqual(steps.map((x) => x.text));
      expect(t.rounds.map((r) => r.observation?.text ?? null)).toEqual(steps.map((x) => x.obs));
      expect(t.rounds.map((r) => r.reading ?? false)).toEqual(steps.map((x) => x.reading));
      // A reading round ends at </think> (or at its action when it is an answer that ends the trajectory).
      for (const [i, r] of t.rounds.entries()) if (steps[i]!.reading) expect(r.finishReason).toBe('stop');
      expect(tok.decode(t.responseIds)).toBe(streamBefore(s, steps.length) + steps[steps.length - 1]!.text);
      const generated = steps.reduce((a, x) => a + tok.encode(x.text).length, 0);
      expect(t.responseMask.filter((m) => m === 1)).toHaveLength(generated);
      expect(validateFormat(tok.decode(t.responseIds), { access: true, reading: readingRounds(s) })).toEqual(FORMAT[s]);
    });
    // The chunk each round's observation showed, and the violation of the rounds that act while reading.
    expect(trajectories[0]!.rounds.map((r) => [r.action, r.page ?? null])).toEqual([['search', null], ['access', 1], [null, 2], [null, 3], ['answer', null]]);
    expect(trajectories[1]!.rounds.map((r) => [r.action, r.page ?? null])).toEqual([['access', 1], ['search', 2], [null, 3], [null, null], ['answer', null]]);
    expect(trajectories[2]!.rounds.map((r) => r.page ?? null)).toEqual([null, 1, 2, 3, 1, 2, 3, null]);
    expect(trajectories[1]!.rounds[1]!.violations.map((v) => v.code)).toEqual(['action-while-reading']);
    expect(trajectories[3]!.rounds[1]!.violations.map((v) => v.code)).toEqual(['action-while-reading']);
    expect(trajectories[0]!.rounds[2]!.violations).toEqual([]);
    // Without the reading rounds named, the text of a reading round runs on into the next: not the agent's format.
    expect(validateFormat(tok.decode(trajectories[0]!.responseIds), { access: true }).valid).toBe(false);
    // Every generator call: reading rounds alone, stopping at </think>, with a seed of their own; the others at ASearcher's three.
    for (const c of gen.calls) {
      const reads = c.requests.map((q) => SCRIPT[q.tag.sample]![q.tag.round - 1]!.reading);
      expect(new Set(reads).size).toBe(1);
      expect(c.params.stop).toEqual(reads[0] ? ['</think>'] : ['</search>', '</access>', '</answer>']);
    }
    expect(gen.calls.map((c) => c.requests.map((q) => `${q.tag.sample}:${q.tag.round}`).join(' '))).toEqual([
      '0:1 1:1 2:1 3:1',
      '0:2 2:2', '1:2 3:2',
      '0:3 1:3 2:3',
      '0:4 1:4 2:4',
      '0:5 1:5 2:5',
      '2:6',
      '2:7',
      '2:8',
    ]);
    expect(gen.calls[1]!.params.seed).not.toBe(gen.calls[2]!.params.seed);
    // A page is fetched at a trajectory's first access of its URL, all of a step's in one call; a second access reuses it.
    expect(calls).toEqual([[URL_M, URL_X, URL_M], [URL_M, URL_M]]);
    expect(stats).toMatchObject({ searches: 2, accesses: 6, pagesOpened: 4, rounds: 20 });
  });

  test('maxTurns counts reading rounds: the last round reads, its chunk is not shown, the format holds', async () => {
    const tok = await tokenizer();
    const o = options({ rollout: { maxTurns: 3 } });
    const { trajectories } = await runAgentLoop({ questions: [Q1], generator: await generator(), retriever: localRetriever(), options: o });
    const t = trajectories[0]!;
    expect(t.doneReason).toBe('max-turns');
    expect(t.rounds.map((r) => [r.reading ?? false, r.observation?.text ?? null])).toEqual([[false, SEARCH_OBS], [false, P1], [true, null]]);
    expect(tok.decode(t.responseIds)).toBe(`${SCRIPT[0]![0]!.text}\n${SEARCH_OBS}\n${SCRIPT[0]![1]!.text}\n${P1}\n${READ('Mamek has a page.')}`);
    expect(validateFormat(tok.decode(t.responseIds), { access: true, reading: [3] })).toEqual({ valid: true });
  });

  test('snapshot contexts: full carries every chunk read, memory the prompt and the mem (with the last chunk whole when asked)', async () => {
    const tok = await tokenizer();
    const prompt = renderPrompt(Q1.question);
    for (const withLast of [false, true]) {
      const o = options({ memory: { memContextIncludesLastObservation: withLast } });
      const { trajectories } = await runAgentLoop({ questions: [Q1], generator: await generator(), retriever: localRetriever(), options: o });
      const snaps = buildSnapshots(trajectories, tok, o);
      const expected = SCRIPT.flatMap((steps, s) => steps.slice(1).map((x, i) => {
        const r = i + 2;
        const prev = steps[r - 2]!.obs!;
        return {
          key: [s, r],
          full: [...tok.encode(prompt), ...steps.slice(0, r - 1).flatMap((y) => [...tok.encode(y.text), ...tok.encode(`\n${y.obs!}\n`)])],
          fullText: prompt + streamBefore(s, r),
          mem: [...tok.encode(prompt), ...(withLast ? tok.encode(`\n${prev}\n`) : []), ...tok.encode(memOf(x.text))],
          memText: prompt + (withLast ? `\n${prev}\n` : '') + memOf(x.text),
        };
      }));
      expect(snaps.map((x) => [x.trajectory.sample, x.round])).toEqual(expected.map((e) => e.key));
      snaps.forEach((x, k) => {
        const e = expected[k]!;
        expect(x.fullContext).toEqual(e.full);
        expect(tok.decode(x.fullContext)).toBe(e.fullText);
        expect(x.memContext).toEqual(e.mem);
        expect(tok.decode(x.memContext)).toBe(e.memText);
      });
      // Sample 0, round 4 reads chunk 2's fact into its mem; with the last observation its memory context also holds chunk 2 whole.
      const s0r4 = snaps.find((x) => x.trajectory.sample === 0 && x.round === 4)!;
      expect(tok.decode(s0r4.memContext)).toBe(`${prompt}${withLast ? `\n${P2}\n` : ''}<mem>${FACT}</mem>`);
    }
  });

  test('memory rewards and the outcome: the fact of chunk 2 counts where the mem (or the chunk just shown) holds it', async () => {
    const tok = await tokenizer();
    const gold = 'Thersekle';
    const lp = -0.05;
    // A scorer that "reads": the gold is likely exactly when the context's text contains it.
    const reads = () => new FakeScorer((item) => (tok.decode(item.contextIds).includes(gold) ? lp : -2));
    const p = (has: boolean) => (has ? Math.exp(lp) : 0);
    for (const withLast of [false, true]) {
      const o = options({ memory: { memContextIncludesLastObservation: withLast } });
      const { records } = await runPipeline({ questions: [Q1], generator: await generator(), scorer: reads(), retriever: localRetriever(), options: o });
      expect(records.map((r) => [r.score, r.formatValid, r.formatReason])).toEqual([[1, true, null], [0, false, FORMAT[1]!.reason], [1, true, null], [0, false, FORMAT[3]!.reason]]);
      // batch.jsonl says which rounds were reading rounds (and the batch reader takes the field)
      expect(records.map((r) => r.rounds.map((x) => x.reading === true))).toEqual(SCRIPT.map((steps) => steps.map((x) => x.reading)));
      for (const r of records) expect(batchRecordSchema.parse(JSON.parse(JSON.stringify(r))).rounds.map((x) => x.reading ?? false)).toEqual(r.rounds.map((x) => x.reading ?? false));
      SCRIPT.forEach((steps, s) => {
        steps.forEach((x, i) => {
          const r = i + 1;
          const got = records[s]!.rounds[i]!;
          if (r === 1) {
            expect(got.memReward).toBeNull();
            return;
          }
          const fullHas = (Q1.question + streamBefore(s, r)).includes(gold);
          const memHas = (memOf(x.text) + (withLast ? steps[r - 2]!.obs! : '')).includes(gold);
          expect(got.pFull).toBeCloseTo(p(fullHas), 6);
          expect(got.pMem).toBeCloseTo(p(memHas), 6);
          expect(got.memReward).toBeCloseTo(p(memHas) - p(fullHas), 6);
        });
      });
      // Sample 1 never wrote the fact down: round 3 follows chunk 2 (it counts only with the last observation), round 4 follows chunk 3.
      expect(records[1]!.rounds[2]!.memReward).toBeCloseTo(withLast ? 0 : -Math.exp(lp), 6);
      expect(records[1]!.rounds[3]!.memReward).toBeCloseTo(-Math.exp(lp), 6);
      // Sample 0 copied it in the reading round that followed chunk 2.
      expect(records[0]!.rounds[3]!.memReward).toBeCloseTo(0, 6);
      expect(records[0]!.rounds[4]!.memReward).toBeCloseTo(0, 6);
    }
  });

  test('memory policy: a queued chunk is whole in the round that reads it, then its short text, then nothing (window 1 and 2)', async () => {
    const tok = await tokenizer();
    const head: ChatMessage[] = [{ role: 'system', content: ACCESS_PROMPT }, { role: 'user', content: Q1.question }];
    for (const window of [1, 2]) {
      const o = options({ rollout: { context: 'memory' }, memory: { windowToolResults: window } });
      const { trajectories } = await runAgentLoop({ questions: [Q1], generator: await generator(), retriever: localRetriever(), options: o });
      SCRIPT.forEach((steps, s) => {
        const t: RolloutTrajectory = trajectories[s]!;
        expect(t.rounds.map((r) => r.text)).toEqual(steps.map((x) => x.text));
        steps.forEach((_x, i) => {
          const r = i + 1;
          const ctx = t.rounds[i]!.contextIds!;
          if (r === 1) {
            expect(tok.decode(ctx)).toBe(renderPrompt(Q1.question));
            return;
          }
          const msgs: ChatMessage[] = [...head];
          for (let k = Math.max(0, r - 1 - window); k < r - 1; k++) {
            msgs.push({ role: 'assistant', content: steps[k]!.text });
            msgs.push({ role: 'user', content: k === r - 2 ? steps[k]!.obs! : short(steps[k]!.obs!) });
          }
          expect(ctx).toEqual(tok.encode(renderChat(msgs, true)));
        });
      });
      // Sample 1, round 4 reads chunk 3: chunk 2 (the fact) is its short text in a window of 2, gone in a window of 1.
      const text = tok.decode(trajectories[1]!.rounds[3]!.contextIds!);
      expect(text).not.toContain('Thersekle');
      expect(text.includes(`<information>Page 2 of 3 (${URL_M}): Mamek lies in the la</information>`)).toBe(window === 2);
    }
  });

  test('the continuous schedule reads the same queues: reading rounds in calls of their own, each request with its own seed', async () => {
    const gen = await generator();
    const run = (schedule: 'batch' | 'continuous', g: ScriptedGenerator) => runPipeline({
      questions: [Q1], generator: g, scorer: new FakeScorer(), retriever: localRetriever(), options: options({ rollout: { schedule } }),
    });
    const batch = await run('batch', await generator());
    const continuous = await run('continuous', gen);
    expect(continuous.records.map((r) => r.responseIds)).toEqual(batch.records.map((r) => r.responseIds));
    expect(continuous.records.map((r) => [r.score, r.formatValid])).toEqual([[1, true], [0, false], [1, true], [0, false]]);
    for (const c of gen.calls) {
      const reads = c.requests.map((q) => SCRIPT[q.tag.sample]![q.tag.round - 1]!.reading);
      expect(new Set(reads).size).toBe(1);
      expect(c.params.stop).toEqual(reads[0] ? ['</think>'] : ['</search>', '</access>', '</answer>']);
      for (const q of c.requests) expect(q.seed).toEqual(expect.any(Number));
    }
    expect(gen.calls.filter((c) => c.params.stop.length === 1)).toHaveLength(5);
  });

  test("ASearcher's observation format: the queued chunks as >>>> Page k >>>> blocks, a queued search as [Doc k](url)", async () => {
    const tok = await tokenizer();
    const o = options({ tool: { observationFormat: 'asearcher', docMaxChars: 5000 } });
    const { trajectories } = await runAgentLoop({ questions: [Q1], generator: await generator(), retriever: localRetriever(), options: o });
    const page = (k: number, c: string) => `<information>\n>>>> Page ${k} >>>>\n\n${c}\n</information>`;
    const doc = `<information>\n[Doc 1](${URL_M}):\n"Mamek"\n${DOC.contents}\n</information>`;
    expect(trajectories[1]!.rounds.map((r) => r.observation?.text ?? null)).toEqual([page(1, C1), page(2, C2), page(3, C3), doc, null]);
    expect(trajectories[1]!.rounds[1]!.observation!.shortText).toBe(page(2, C2.slice(0, 20)));
    expect(trajectories[2]!.rounds[0]!.observation!.text).toBe('<information>\nNo More Information is Found for this URL.\n</information>');
    const t = trajectories[0]!;
    expect(validateFormat(tok.decode(t.responseIds), { access: true, reading: readingRounds(0) })).toEqual({ valid: true });
  });

  test('a retrieval server with pages (POST /access on loopback) gives the same queued trajectories as the local tool', async () => {
    const server: Server = createRetrievalServer(localRetriever());
    const url = await listen(server, 0);
    try {
      const remote = new HttpRetriever(url, { retries: 0 });
      const viaHttp = await runAgentLoop({ questions: [Q1], generator: await generator(), retriever: remote, options: options() });
      const local = await runAgentLoop({ questions: [Q1], generator: await generator(), retriever: localRetriever(), options: options() });
      expect(viaHttp.trajectories.map((t) => t.responseIds)).toEqual(local.trajectories.map((t) => t.responseIds));
      expect(viaHttp.trajectories[0]!.rounds.map((r) => r.observation?.text ?? null)).toEqual(SCRIPT[0]!.map((x) => x.obs));
      expect(viaHttp.stats).toMatchObject({ accesses: 6, pagesOpened: 4, toolErrors: 0 });
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  test('an inference server (vLLM-shaped fake on loopback) is sent </think> alone for reading rounds and stops there', async () => {
    const tok = await tokenizer();
    // The "model" writes sample 0's rounds; the round is the number of observations in its prompt, plus one.
    const model: FakeModel = {
      vocabSize: tok.size,
      eosTokenIds: [tok.eosTokenId!],
      decode: (ids) => tok.decode(ids),
      complete: (prompt) => ({ ids: tok.encode(SCRIPT[0]![tok.decode(prompt).split('<information>').length - 1]!.script) }),
      promptLogprob: () => -1,
    };
    const server = await startVllmFake(model, { servedModelNames: ['fake'], maxModelLen: 4096 });
    try {
      const backend = await connectCompletionsServers({ urls: [server.url], api: 'vllm', modelDir: MODEL_DIR });
      const o = options({ rollout: { groupSize: 1 } });
      const { trajectories } = await runAgentLoop({ questions: [Q1], generator: backend, retriever: localRetriever(), options: o });
      const t = trajectories[0]!;
      expect(t.rounds.map((r) => [r.text, r.observation?.text ?? null, r.reading ?? false])).toEqual(SCRIPT[0]!.map((x) => [x.text, x.obs, x.reading]));
      expect(server.requests.map((b) => b['stop'])).toEqual(SCRIPT[0]!.map((x) => (x.reading ? ['</think>'] : ['</search>', '</access>', '</answer>'])));
      expect(validateFormat(tok.decode(t.responseIds), { access: true, reading: readingRounds(0) })).toEqual({ valid: true });
    } finally {
      await server.close();
    }
  });

  test('validateFormat and computeScore read reading rounds where they are named, and refuse a malformed list by name', () => {
    const text = `${access('none', URL_M)}\n${P1}\n${READ('x')}\n${P2}\n${READ('x')}\n${P3}\n${answer('x', 'Thersekle')}`;
    expect(validateFormat(text, { access: true, reading: [2, 3] })).toEqual({ valid: true });
    expect(computeScore(text, ['Thersekle'], { access: true, reading: [2, 3] })).toBe(1);
    expect(computeScore(text, ['Thersekle'], { access: true })).toBe(0);
    // A reading round with an action, or a round named reading that acts after </think>.
    expect(validateFormat(`${access('none', URL_M)}\n${P1}\n<mem>x</mem><think>y<search>q</search></think>\n${P2}\n`, { access: true, reading: [2] }))
      .toEqual({ valid: false, reason: 'round 2: <think> is not closed before <search>', round: 2 });
    // A round named reading ends at its </think>: an action after it opens no round.
    expect(validateFormat(`${access('none', URL_M)}\n${P1}\n${answer('x', 'Thersekle')}`, { access: true, reading: [2] }))
      .toEqual({ valid: false, reason: 'round 3: expected <mem> to open the round but found <answer>', round: 3 });
    // The same round read alone by the reading grammar (the per-round violations).
    expect(checkRound(answer('x', 'Thersekle'), grammarFor(true, true))).toMatchObject({
      violations: [{ code: 'action-while-reading', message: '<answer> in a reading round (chunks of a page are queued)' }],
      deviation: '<answer> after </think> in a reading round',
    });
    expect(checkRound(READ('x'), grammarFor(true, true))).toMatchObject({ violations: [], deviation: null });
    expect(checkRound(READ('x'), grammarFor(true)).violations.map((v) => v.code)).toEqual(['no-action']);
    expect(() => validateFormat(text, { access: true, reading: [0] })).toThrow('opts.reading');
    expect(() => validateFormat(text, { access: true, reading: 'all' as never })).toThrow('opts.reading');
  });
});


describe.each(REAL_NAMES)("the chunk queue with the %s tokenizer (tags spelled with several tokens)", (name) => {
  test('a reading round ends where the text of </think> completes; the chunks follow; snapshots and the format hold', async () => {
    const tok = await realTokenizer(name);
    const rounds = [
      `<mem>none</mem>\n<think>Open it.</think>\n<access>${URL_M}</access>`,
      `<mem>Mamek has a page.</mem>\n<think>Read on.</think>\n<access>${URL_M}</access>`,
      `<mem>${FACT}</mem>\n<think>Read on.</think>\n<answer>Thersekle</answer>`,
      `<mem>${FACT}</mem><think>ok</think><answer>Thersekle</answer>`,
    ];
    const gen = new CannedGenerator(tok, (tag) => rounds[tag.round - 1]!);
    const o = options({ rollout: { groupSize: 1, chatTemplate: 'chatml' } });
    const { trajectories } = await runAgentLoop({ questions: [Q1], generator: gen, retriever: localRetriever(), options: o });
    const t = trajectories[0]!;
    expect(t.doneReason).toBe('answer');
    expect(t.rounds.map((r) => [r.reading ?? false, r.action, r.observation?.text ?? null])).toEqual([[false, 'access', P1], [true, null, P2], [true, null, P3], [false, 'answer', null]]);
    expect(gen.stops).toEqual([['</search>', '</access>', '</answer>'], ['</think>'], ['</think>'], ['</search>', '</access>', '</answer>']]);
    // Reading rounds stopped inside the canned text: nothing after </think> but what its completing token carries.
    for (const i of [1, 2]) {
      const r = t.rounds[i]!;
      const cut = rounds[i]!.indexOf('</think>') + '</think>'.length;
      expect(r.finishReason).toBe('stop');
      expect(r.text.slice(0, cut)).toBe(rounds[i]!.slice(0, cut));
      expect(r.text.slice(cut).trim()).toBe('');
    }
    const texts = t.rounds.map((r) => r.text);
    expect(tok.decode(t.responseIds)).toBe(`${texts[0]}\n${P1}\n${texts[1]}\n${P2}\n${texts[2]}\n${P3}\n${texts[3]}`);
    expect(validateFormat(tok.decode(t.responseIds), { access: true, reading: [2, 3] })).toEqual({ valid: true });
    const snaps = buildSnapshots(trajectories, tok, o);
    expect(snaps.map((x) => x.round)).toEqual([2, 3, 4]);
    const prompt = renderPrompt(Q1.question);
    expect(tok.decode(snaps[2]!.fullContext)).toBe(`${prompt}${texts[0]}\n${P1}\n${texts[1]}\n${P2}\n${texts[2]}\n${P3}\n`);
    // The memory context ends with the token that completes </mem>, which may carry a character or two of what follows it.
    for (const [k, mem] of [[0, '<mem>Mamek has a page.</mem>'], [1, `<mem>${FACT}</mem>`], [2, `<mem>${FACT}</mem>`]] as const) {
      const text = tok.decode(snaps[k]!.memContext);
      expect(text.startsWith(prompt + mem)).toBe(true);
      const rest = text.slice((prompt + mem).length);
      expect(rest.length).toBeLessThan(3);
      expect(rounds[k + 1]!.slice(mem.length).startsWith(rest)).toBe(true);
    }
  });
});
