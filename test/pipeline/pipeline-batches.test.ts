/**
 * `pipelineBatches`, the async-iterator form of the pipeline: the same records as `runPipeline`
 * in the same order (on the embedded model, sampled with a seed), one batch per step of the
 * loop after `onBatch`; a loop that breaks or throws leaves no work running and no rejection
 * unhandled; errors reach the loop.
 */
import { ScriptedGenerator } from '../../src/engines/scripted';
import { Bm25Retriever } from '../../src/retrieval/bm25';
import { readQuestions } from '../../src/io/questions';
import { pipelineBatches, runPipeline, type PipelineBatch, type PipelineStats } from '../../src/pipeline/pipeline';
import type { BatchRecord, GenerateParams, GenerationOutput, GenerationRequest, Generator } from '../../src/contracts';
import { CORPUS, FakeRetriever, FakeScorer, Q1, Q2, answer, search, tokenizer, useEmbeddedModel } from './helpers';
import { resolve } from 'node:path';

const DEV = resolve(__dirname, '..', '..', 'data', 'world', 'dev.jsonl');
const Q3 = { id: 'q3', question: 'Who founded Ostrel?', golds: ['Ada Venn'] };

/** The stats without wall times (which differ between two runs). */
const counts = ({ times: _t, ...rest }: PipelineStats) => rest;

describe('pipelineBatches (embedded model)', () => {
  const local = useEmbeddedModel();

  test('yields the records runPipeline returns, batch by batch in the same order, each after onBatch', async () => {
    const input = {
      questions: readQuestions(DEV).slice(0, 3),
      generator: local(), scorer: local(), retriever: Bm25Retriever.fromJsonl(CORPUS),
      options: { rollout: { groupSize: 3, questionsPerBatch: 2, seed: 5 } },
    };
    const whole = await runPipeline(input);
    const events: string[] = [];
    const yielded: PipelineBatch[] = [];
    const run = pipelineBatches({ ...input, onBatch: (recs: BatchRecord[], b: number) => void events.push(`onBatch ${b}: ${recs.length}`) });
    for await (const batch of run) {
      events.push(`yield ${batch.batchIndex}: ${batch.records.length}`);
      yielded.push(batch);
    }
    expect(events).toEqual(['onBatch 0: 6', 'yield 0: 6', 'onBatch 1: 3', 'yield 1: 3']);
    expect(yielded.flatMap((b) => b.records)).toEqual(whole.records);
    expect(yielded.map((b) => b.records.map((r) => r.uid))).toEqual([[...Array(3).fill(input.questions[0]!.id), ...Array(3).fill(input.questions[1]!.id)], Array(3).fill(input.questions[2]!.id)]);
    // The stats are running totals: batch 0's are its own, the last batch's are the run's.
    expect(yielded[0]!.stats.batches).toBe(1);
    expect(yielded[0]!.stats.scorerCalls).toBe(1);
    expect(counts(yielded[1]!.stats)).toEqual(counts(whole.stats));
    expect(whole.stats.snapshots).toBeGreaterThan(0); // the memory reward was in play
  });
});

/** A generator that counts its calls and the calls still running (each answers after a timer). */
class CountingGenerator implements Generator {
  calls: string[] = [];
  inFlight = 0;
  constructor(private readonly inner: ScriptedGenerator) {}
  get codec() { return this.inner.codec; }
  get maxContextTokens() { return this.inner.maxContextTokens; }
  async generate(requests: readonly GenerationRequest[], params: GenerateParams): Promise<GenerationOutput[]> {
    this.calls.push([...new Set(requests.map((r) => r.tag.uid))].join(','));
    this.inFlight++;
    try {
      await new Promise((r) => setTimeout(r, 5));
      return await this.inner.generate(requests, params);
    } finally {
      this.inFlight--;
    }
  }
}

describe('pipelineBatches (scripted model)', () => {
  const script = (tag: { round: number; sample: number }) => (tag.round === 1 ? search('none', 'q') : answer('fact', tag.sample === 0 ? 'Thersekle' : 'Wrong'));
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  let unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => void unhandled.push(reason);
  beforeEach(() => {
    unhandled = [];
    process.on('unhandledRejection', onUnhandled);
  });
  afterEach(() => {
    process.off('unhandledRejection', onUnhandled);
  });

  async function counting() {
    return new CountingGenerator(new ScriptedGenerator(await tokenizer(), script));
  }
  const input = (generator: Generator) => ({
    questions: [Q1, Q2, Q3], generator, scorer: new FakeScorer(), retriever: new FakeRetriever(),
    options: { rollout: { groupSize: 2, questionsPerBatch: 1 } },
  });

  test('a batch starts only when the loop asks for it; breaking out leaves nothing running and the iterator done', async () => {
    const gen = await counting();
    const run = pipelineBatches(input(gen));
    for await (const batch of run) {
      expect(batch.records.map((r) => r.uid)).toEqual(['q1', 'q1']);
      await sleep(30); // a slow trainer step: the next batch must not have started meanwhile
      expect(gen.calls).toEqual(['q1', 'q1']); // rounds 1 and 2 of batch 0 only
      break;
    }
    await sleep(30);
    expect(gen.calls).toEqual(['q1', 'q1']);
    expect(gen.inFlight).toBe(0);
    expect(await run.next()).toEqual({ done: true, value: undefined });
    expect(unhandled).toEqual([]);
  });

  test('an error thrown in the loop body reaches the caller and stops the rollout', async () => {
    const gen = await counting();
    const consume = async () => {
      for await (const batch of pipelineBatches(input(gen))) {
        if (batch.batchIndex === 1) throw new Error('trainer step failed');
      }
    };
    await expect(consume()).rejects.toThrow('trainer step failed');
    await sleep(30);
    expect(gen.calls).toEqual(['q1', 'q1', 'q2', 'q2']);
    expect(gen.inFlight).toBe(0);
    expect(unhandled).toEqual([]);
  });

  test('an error of the pipeline rejects the loop after the batches before it were yielded; bad input at the first step', async () => {
    const tok = await tokenizer();
    const broken: Generator = {
      codec: tok, maxContextTokens: 2048,
      generate: (requests, params) => (requests[0]!.tag.uid === 'q2' ? Promise.reject(new Error('onnxruntime: out of memory')) : new ScriptedGenerator(tok, script).generate(requests, params)),
    };
    const seen: string[] = [];
    const consume = async () => {
      for await (const batch of pipelineBatches(input(broken))) seen.push(...batch.records.map((r) => r.uid));
    };
    await expect(consume()).rejects.toThrow('onnxruntime: out of memory');
    expect(seen).toEqual(['q1', 'q1']);

    const bad = pipelineBatches({ ...input(broken), questions: [Q1, { id: 'q1', question: 'again?', golds: ['x'] }] });
    await expect(bad.next()).rejects.toMatchObject({ code: 'ERR_INVALID_INPUT', message: 'questions[1]: field "id": "q1" repeats questions[0]' });
    expect(unhandled).toEqual([]);
  });

  test('a batch whose questions were all done (skipUids) is skipped, as in runPipeline; the return value holds the stats', async () => {
    const run = pipelineBatches({ ...input(await counting()), skipUids: new Set(['q1', 'q3']) });
    const first = await run.next();
    expect(first.done).toBe(false);
    expect((first.value as PipelineBatch).batchIndex).toBe(1);
    expect((first.value as PipelineBatch).records.map((r) => r.uid)).toEqual(['q2', 'q2']);
    const last = await run.next();
    expect(last.done).toBe(true);
    expect(last.value).toMatchObject({ stats: { batches: 1, skippedBatches: 2 }, options: { rollout: { groupSize: 2 } } });
  });
});
