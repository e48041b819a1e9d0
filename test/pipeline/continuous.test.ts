/**
 * The 'continuous' schedule (pipeline.ts): a group joins the engine as soon as there is room for
 * it, whatever its batch, is scored as soon as it is done, and the records still arrive batch by
 * batch in batch order. Each request carries its own seed, so on an engine whose answer to a
 * request does not depend on its batch-mates (the scripted one) the records are exactly those of
 * the 'batch' schedule, at any width; on the embedded model the same seed reproduces the run.
 */
import { ScriptedGenerator } from '../../src/engines/scripted';
import { Bm25Retriever } from '../../src/retrieval/bm25';
import { readQuestions } from '../../src/io/questions';
import { pipelineBatches, runPipeline } from '../../src/pipeline/pipeline';
import { mixSeed } from '../../src/rng';
import { resolveOptions } from '../../src/options';
import { addPipelineOptions, pipelineOptionsFromFlags } from '../../src/cli/options';
import { Command } from 'commander';
import { connectCompletionsServers } from '../../src/engines/http/connect';
import { streamSeed } from '../../src/engines/http/client';
import { startVllmFake } from '../fakes/vllm-fake';
import { fakeModel } from '../fakes/rollout-check';
import type { BatchRecord, GenerateParams, GenerationOutput, GenerationRequest, Generator, RequestTag } from '../../src/contracts';
import { CORPUS, FakeRetriever, FakeScorer, MODEL_DIR, Q1, Q2, answer, search, tokenizer, useEmbeddedModel } from './helpers';
import { resolve } from 'node:path';

const DEV = resolve(__dirname, '..', '..', 'data', 'world', 'dev.jsonl');
const Q3 = { id: 'q3', question: 'Who founded Ostrel?', golds: ['Ada Venn'] };
const Q4 = { id: 'q4', question: 'Where was Ada Venn born?', golds: ['Mamek'] };

/** q2's group searches three times, q3's once, the others answer at once; sample 0 answers right. */
const script = (tag: RequestTag) =>
  (tag.uid === 'q2' && tag.round <= 3) || (tag.uid === 'q3' && tag.round === 1) ? search(`step ${tag.round}`, `query ${tag.round}`) : answer('fact', tag.sample === 0 ? 'Thersekle' : 'Wrong');

/** The scripted generator, recording which trajectories each call held. */
class Recording implements Generator {
  calls: string[][] = [];
  requests: GenerationRequest[] = [];
  constructor(private readonly inner: ScriptedGenerator) {}
  get codec() { return this.inner.codec; }
  get maxContextTokens() { return this.inner.maxContextTokens; }
  generate(requests: readonly GenerationRequest[], params: GenerateParams): Promise<GenerationOutput[]> {
    this.calls.push(requests.map((r) => `${r.tag.uid}/${r.tag.sample}`));
    this.requests.push(...requests);
    return this.inner.generate(requests, params);
  }
}

describe('continuous schedule (scripted model)', () => {
  const run = async (schedule: 'batch' | 'continuous', maxGenerateBatch: number) => {
    const gen = new Recording(new ScriptedGenerator(await tokenizer(), script));
    const scorer = new FakeScorer();
    const delivered: number[] = [];
    const res = await runPipeline({
      questions: [Q1, Q2, Q3, Q4], generator: gen, scorer, retriever: new FakeRetriever(),
      options: { rollout: { groupSize: 2, questionsPerBatch: 2, maxGenerateBatch, schedule, seed: 11 } },
      onBatch: (_r: BatchRecord[], b: number) => void delivered.push(b),
    });
    return { gen, scorer, delivered, res };
  };

  test('a group joins when a finished one leaves room, and the records equal the batch schedule\'s', async () => {
    const batch = await run('batch', 4);
    const cont = await run('continuous', 4);
    // Batch schedule: q3/q4 wait until q2's three searches are done.
    expect(batch.gen.calls.map((c) => [...new Set(c.map((x) => x.split('/')[0]))].join(','))).toEqual(['q1,q2', 'q2', 'q2', 'q2', 'q3,q4', 'q3']);
    // Continuous: q1 answers in round 1, so q3 takes its place in step 2, and q4 takes q3's in step 4.
    expect(cont.gen.calls.map((c) => [...new Set(c.map((x) => x.split('/')[0]))].join(','))).toEqual(['q1,q2', 'q2,q3', 'q2,q3', 'q2,q4']);
    expect(cont.gen.calls.every((c) => c.length <= 4)).toBe(true);
    expect(cont.delivered).toEqual([0, 1]);
    expect(cont.res.records).toEqual(batch.res.records);
    expect(cont.res.stats.rounds).toBe(batch.res.stats.rounds);
    expect(cont.res.stats.batches).toBe(2);
    // Groups are scored as they finish (q3's snapshot before q2's, batch 1 before batch 0), not once per batch.
    expect(cont.scorer.calls.map((items) => [...new Set(items.map((i) => i.tag?.uid))].join(','))).toEqual(['q3', 'q2']);
    expect(batch.scorer.calls.map((items) => [...new Set(items.map((i) => i.tag?.uid))].join(','))).toEqual(['q2', 'q3']);
  });

  test('each request carries the seed of (batch, question, sample, round), whatever the width', async () => {
    const narrow = await run('continuous', 2);
    const wide = await run('continuous', 64);
    const seeds = (g: Recording) => new Map(g.requests.map((r) => [`${r.tag.uid}/${r.tag.sample}/${r.tag.round}`, r.seed]));
    expect(seeds(narrow.gen)).toEqual(seeds(wide.gen));
    expect(seeds(wide.gen).get('q3/1/1')).toBe(mixSeed(11, 1, 0, 1, 1));
    expect(seeds(wide.gen).get('q2/0/4')).toBe(mixSeed(11, 0, 1, 0, 4));
    expect(new Set(seeds(wide.gen).values()).size).toBe(wide.gen.requests.length);
    expect(narrow.res.records).toEqual(wide.res.records);
    expect(Math.max(...narrow.gen.calls.map((c) => c.length))).toBe(2);
    // The batch schedule keeps today's streams: no request seed.
    expect((await run('batch', 4)).gen.requests.every((r) => r.seed === undefined)).toBe(true);
  });

  test('with maxInFlight above maxGenerateBatch, each call holds up to maxInFlight requests for the engine to split into waves', async () => {
    const gen = new Recording(new ScriptedGenerator(await tokenizer(), script));
    const params: number[] = [];
    const spy: Generator = { codec: gen.codec, maxContextTokens: gen.maxContextTokens, generate: (r, p) => (params.push(p.maxBatchSize ?? 0), gen.generate(r, p)) };
    const res = await runPipeline({
      questions: [Q1, Q2, Q3, Q4], generator: spy, scorer: new FakeScorer(), retriever: new FakeRetriever(),
      options: { rollout: { groupSize: 2, questionsPerBatch: 1, maxGenerateBatch: 2, maxInFlight: 6, schedule: 'continuous' } },
    });
    expect(gen.calls[0]).toEqual(['q1/0', 'q1/1', 'q2/0', 'q2/1', 'q3/0', 'q3/1']);
    expect(Math.max(...gen.calls.map((c) => c.length))).toBe(6);
    expect(new Set(params)).toEqual(new Set([2]));
    expect(res.records.map((r) => r.uid)).toEqual(['q1', 'q1', 'q2', 'q2', 'q3', 'q3', 'q4', 'q4']);
  });

  test("the default is 'batch'; --schedule continuous and --max-in-flight select it, anything else is rejected", () => {
    expect(resolveOptions({}).rollout.schedule).toBe('batch');
    expect(resolveOptions({}).rollout.maxInFlight).toBeNull();
    const parse = (argv: string[]) => {
      const cmd = addPipelineOptions(new Command().exitOverride().configureOutput({ writeErr: () => {} }));
      cmd.parse(argv, { from: 'user' });
      return pipelineOptionsFromFlags(cmd.opts()).rollout;
    };
    expect(parse([]).schedule).toBe('batch');
    expect(parse(['--schedule', 'continuous', '--max-in-flight', '128'])).toMatchObject({ schedule: 'continuous', maxInFlight: 128 });
    expect(() => parse(['--schedule', 'eager'])).toThrow('Allowed choices are batch, continuous');
    expect(() => resolveOptions({ rollout: { maxInFlight: 0 } })).toThrow('Invalid option options.rollout.maxInFlight');
  });

  test('groups of questions done before (resume) are not generated; a fully done batch is skipped', async () => {
    const gen = new Recording(new ScriptedGenerator(await tokenizer(), script));
    const res = await runPipeline({
      questions: [Q1, Q2, Q3, Q4], generator: gen, scorer: new FakeScorer(), retriever: new FakeRetriever(),
      options: { rollout: { groupSize: 2, questionsPerBatch: 2, schedule: 'continuous' } }, skipUids: new Set(['q1', 'q2', 'q3']),
    });
    expect(res.records.map((r) => r.uid)).toEqual(['q4', 'q4']);
    expect(new Set(gen.requests.map((r) => r.tag.uid))).toEqual(new Set(['q4']));
    expect(res.stats.skippedBatches).toBe(1);
  });

  test('breaking out of pipelineBatches leaves no generator or scorer call running', async () => {
    let inFlight = 0;
    const tok = await tokenizer();
    const inner = new ScriptedGenerator(tok, script);
    const slow: Generator = {
      codec: tok, maxContextTokens: 2048,
      generate: async (requests, params) => {
        inFlight++;
        try {
          await new Promise((r) => setTimeout(r, 5));
          return await inner.generate(requests, params);
        } finally {
          inFlight--;
        }
      },
    };
    let scoring = 0;
    const scorer = new FakeScorer();
    const slowScorer = { score: async (items: Parameters<FakeScorer['score']>[0]) => { scoring++; await new Promise((r) => setTimeout(r, 20)); scoring--; return scorer.score(items); } };
    const it = pipelineBatches({
      questions: [Q1, Q2, Q3, Q4], generator: slow, scorer: slowScorer, retriever: new FakeRetriever(),
      options: { rollout: { groupSize: 2, questionsPerBatch: 1, schedule: 'continuous' } },
    });
    for await (const b of it) {
      expect(b.records.map((r) => r.uid)).toEqual(['q1', 'q1']);
      break;
    }
    expect(inFlight).toBe(0);
    expect(scoring).toBe(0);
  });

  test('a scorer failure stops the run with its error', async () => {
    const gen = new ScriptedGenerator(await tokenizer(), script);
    const broken = { score: () => Promise.reject(new Error('scorer: out of memory')) };
    await expect(runPipeline({
      questions: [Q1, Q2, Q3], generator: gen, scorer: broken, retriever: new FakeRetriever(),
      options: { rollout: { groupSize: 2, questionsPerBatch: 1, schedule: 'continuous' } },
    })).rejects.toThrow('scorer: out of memory');
  });
});

test("over HTTP a request's own seed is sent as the seed of its stream 0, the others as stream i of the call's seed", async () => {
  const tok = await tokenizer();
  const server = await startVllmFake(fakeModel(tok), { servedModelNames: ['fake'], maxModelLen: 2048 });
  try {
    const backend = await connectCompletionsServers({ urls: [server.url], api: 'vllm', modelDir: MODEL_DIR });
    const ids = tok.encode('In which country is Mamek?');
    const req = (sample: number, seed?: number): GenerationRequest => ({ ids, maxNewTokens: 4, tag: { uid: 'q', sample, round: 1 }, ...(seed === undefined ? {} : { seed }) });
    await backend.generate([req(0), req(1, 77)], { temperature: 1, topP: 1, topK: 0, seed: 5, stop: [] });
    expect(server.requests.map((b) => b['seed']).sort()).toEqual([streamSeed(5, 0), streamSeed(77, 0)].sort());
  } finally {
    await server.close();
  }
});

describe('continuous schedule (embedded model)', () => {
  const local = useEmbeddedModel();

  test('a request with its own seed samples the same tokens and log-probs wherever it sits in the call', async () => {
    const tok = await tokenizer();
    const ids = tok.encode('<|im_start|>user\nIn which country is Mamek?<|im_end|>\n<|im_start|>assistant\n');
    const req = (seed: number, sample: number): GenerationRequest => ({ ids, maxNewTokens: 24, tag: { uid: 'q', sample, round: 1 }, seed });
    const params: GenerateParams = { temperature: 1, topP: 1, topK: 0, seed: 3, stop: [] };
    const [alone] = await local().generate([req(7, 0)], params);
    const among = await local().generate([req(9, 1), req(8, 2), req(7, 0)], params);
    expect(among[2]).toEqual(alone);
    expect(among[0]).not.toEqual(alone);
  });

  test('the same seed reproduces a continuous run; every question once, in batch order', async () => {
    const questions = readQuestions(DEV).slice(0, 5);
    const input = () => ({
      questions, generator: local(), scorer: local(), retriever: Bm25Retriever.fromJsonl(CORPUS),
      options: { rollout: { groupSize: 3, questionsPerBatch: 2, maxGenerateBatch: 6, schedule: 'continuous' as const, seed: 5 } },
    });
    const a = await runPipeline(input());
    const b = await runPipeline(input());
    expect(b.records).toEqual(a.records);
    expect(a.records.map((r) => r.uid)).toEqual(questions.flatMap((q) => [q.id, q.id, q.id]));
    expect(a.stats.snapshots).toBeGreaterThan(0);
    expect(a.stats.batches).toBe(3);
  });
});
