// A trainer's code against the published types of mempo: scripts/consumer-check.mjs copies it into
// a project where the packed tarball is installed and type-checks it (never runs it) under each
// tsconfig of its matrix, without skipLibCheck, so the declarations are checked as a consumer
// compiles them. Written to compile as CommonJS and as an ES module alike (no top-level await, no
// import.meta, named imports only); each `@ts-expect-error` line checks that the types reject a misuse.
import {
  backend, setBackend, nativeLoadErrors, computeScore, gatherLogProbs, memoryRewards, mempoAdvantages, ppoPolicyLoss, AGG_MODES,
  EMBEDDED, LocalModel, Bm25Retriever, readQuestions, runPipeline, pipelineBatches, toTensorBatch, resolveProtocolIds,
  resolveOptions, resolveTrainOptions, spawnLearner, runTraining, HttpLearner, MempoError, PartialResultsError,
  type Backend, type AggMode, type MempoAdvantages, type MempoAdvantagesInput, type PpoPolicyLossResult,
  type Generator, type TargetScorer, type TextCodec, type GenerationRequest, type GenerateParams, type GenerationOutput, type ScoringItem,
  type Retriever, type RetrievedDoc, type Question, type BatchRecord, type PipelineBatch, type PipelineResult, type TensorBatch,
  type PipelineOptions, type Learner, type StepMetrics, type TrainContext, type MempoErrorCode,
} from 'mempo';

/** Kernels on a trainer's own arrays. */
export function kernels(): number {
  const b: Backend = backend();
  setBackend(b);
  const errors: string[] = nativeLoadErrors();
  const input: MempoAdvantagesInput = {
    scores: [1, 0], groups: ['q1', 'q1'], responseMask: new Uint8Array([1, 1, 1, 0]), seqLen: 2,
    memRewards: memoryRewards(new Float32Array([-0.2, -0.1]), new Uint8Array([1, 1]), 1, 1).memRewards,
    memGroups: ['q1'], spans: new Int32Array([0, 0, 1]),
  };
  const adv: MempoAdvantages = mempoAdvantages(input);
  const logp = gatherLogProbs(new Float32Array(4 * 3), new Int32Array([0, 1, 2, 0]), 4, 3);
  const aggMode: AggMode = AGG_MODES[0];
  const r: PpoPolicyLossResult = ppoPolicyLoss({ logp, oldLogp: logp, advantages: adv.final, mask: input.responseMask, rows: 2, cols: 2, aggMode });
  // @ts-expect-error logits are a Float32Array
  gatherLogProbs(new Float64Array(3), new Int32Array(1), 1, 3);
  // @ts-expect-error the mask is a Uint8Array
  ppoPolicyLoss({ logp, oldLogp: logp, advantages: adv.final, mask: [1, 1, 1, 0], rows: 2, cols: 2 });
  return r.loss + r.grad[0]! + computeScore('<answer>x</answer>', ['x']) + errors.length;
}

/** A Generator and a TargetScorer of the trainer's own (as examples/own-engine.ts over HTTP). */
class ConstantEngine implements Generator, TargetScorer {
  readonly maxContextTokens = 512;
  constructor(readonly codec: TextCodec) {}
  async generate(requests: readonly GenerationRequest[], params: GenerateParams): Promise<GenerationOutput[]> {
    return requests.map((r) => ({ tokenIds: this.codec.encode(`${params.stop[0] ?? ''}${r.tag.uid}`), logprobs: null, finishReason: 'stop' as const }));
  }
  async score(items: readonly ScoringItem[]): Promise<Float32Array[]> {
    return items.map((it) => new Float32Array(it.targetIds.length).fill(-0.5));
  }
}

class ListRetriever implements Retriever {
  readonly name = 'list';
  constructor(private readonly docs: RetrievedDoc[]) {}
  async search(queries: readonly string[], topk: number): Promise<RetrievedDoc[][]> {
    return queries.map(() => this.docs.slice(0, topk));
  }
}

/** The pipeline on the embedded model, consumed as a stream of batches. */
export async function rollout(): Promise<TensorBatch[]> {
  const local = await LocalModel.load(EMBEDDED.model());
  const questions: Question[] = readQuestions(EMBEDDED.split('dev')).slice(0, 2);
  const { padTokenId } = resolveProtocolIds(local.codec, local.model.config);
  if (padTokenId === undefined) throw new Error('the model declares no pad or eos token');
  const out: TensorBatch[] = [];
  try {
    for await (const batch of pipelineBatches({ questions, generator: local, scorer: local, retriever: Bm25Retriever.fromJsonl(EMBEDDED.corpus()), options: { rollout: { groupSize: 4 } } })) {
      const b: PipelineBatch = batch;
      out.push(toTensorBatch(b.records, padTokenId));
    }
  } finally {
    await local.dispose();
  }
  return out;
}

/** The pipeline with the trainer's own engines; the options are typed. */
export async function ownEngines(codec: TextCodec): Promise<BatchRecord[]> {
  const engine = new ConstantEngine(codec);
  const options: PipelineOptions = resolveOptions({ rollout: { groupSize: 2 } });
  const retriever = new ListRetriever([{ title: 't', contents: 'c', score: 1 }]);
  const res: PipelineResult = await runPipeline({ questions: [{ id: 'q', question: 'Q?', golds: ['A'] }], generator: engine, scorer: engine, retriever, options });
  // @ts-expect-error groupSize is a number
  await runPipeline({ questions: [], generator: engine, scorer: null, retriever, options: { rollout: { groupSize: 'eight' } } });
  return res.records;
}

/** The training loop with the torch learner, or any Learner. */
export async function training(url?: string): Promise<StepMetrics[]> {
  const local = await LocalModel.load(EMBEDDED.model());
  const learner: Learner = url === undefined ? await spawnLearner({ model: EMBEDDED.model(), seed: 0 }) : new HttpLearner(url, { token: 't' });
  try {
    const { maxContext } = await learner.info();
    const ctx: TrainContext = {
      generator: local, scorer: local, retriever: Bm25Retriever.fromJsonl(EMBEDDED.corpus()), learner,
      sync: async (dir: string) => { await local.reload(dir); },
      pipeline: resolveOptions({}), train: resolveTrainOptions({ steps: 1 }), dev: [],
      // Spread, not `maxContext: maxContext`: TrainContext.maxContext is `?: number`, which exactOptionalPropertyTypes keeps from undefined.
      ...(maxContext === undefined ? {} : { maxContext }),
    };
    return await runTraining(ctx, { out: 'out/consumer', order: readQuestions(EMBEDDED.split('train')), resume: false });
  } finally {
    await learner.close();
    await local.dispose();
  }
}

/** Errors: one class with a code; a partial failure of a generator or scorer. */
export function errorCode(err: unknown): MempoErrorCode | 'partial' | null {
  if (err instanceof MempoError) return err.code;
  if (err instanceof PartialResultsError) return err.failures.size > 0 ? 'partial' : null;
  return null;
}
