/** Shared helpers of the rollout tests: the embedded tokenizer, scripted rounds, fakes. */
import { resolve } from 'node:path';
import { renderRound } from '../../src/protocol/round';
import type { GenerateParams, GenerationOutput, GenerationRequest, Generator, RequestTag, ScoringItem, TargetScorer } from '../../src/contracts';
import { StopMatcher } from '../../src/engines/local/stop';
import type { Question } from '../../src/contracts';
import type { RetrievedDoc, Retriever } from '../../src/contracts';
import { Tokenizer } from '../../src/engines/local/tokenizer';
import { CausalLM } from '../../src/engines/local/causal-lm';
import { LocalModel } from '../../src/engines/local/local-model';

export const MODEL_DIR = resolve(__dirname, '..', '..', 'models', 'mempo-tiny');
export const CORPUS = resolve(__dirname, '..', '..', 'data', 'world', 'corpus.jsonl');

let tok: Promise<Tokenizer> | null = null;
export function tokenizer(): Promise<Tokenizer> {
  tok ??= Tokenizer.load(MODEL_DIR);
  return tok;
}

export const Q1: Question = { id: 'q1', question: 'In which country is Mamek?', golds: ['Thersekle'], hops: 1, objectives: 1 };
export const Q2: Question = { id: 'q2', question: 'Who published The Hollow Winter?', golds: ['Faithhe Works'], hops: 1, objectives: 1 };

export const search = (mem: string, query: string) => renderRound(mem, 'Find it.', { kind: 'search', query });
export const answer = (mem: string, ans: string) => renderRound(mem, 'I have the answer.', { kind: 'answer', answer: ans });

/** A retriever with fixed documents per query; `fail` makes every call throw. */
export class FakeRetriever implements Retriever {
  readonly name = 'fake';
  calls: string[][] = [];
  fail: Error | null = null;
  search(queries: readonly string[], topk: number): Promise<RetrievedDoc[][]> {
    this.calls.push([...queries]);
    if (this.fail) return Promise.reject(this.fail);
    return Promise.resolve(queries.map((q) => [
      { title: 'Mamek', contents: `Mamek is a city in Thersekle. (${q})`, score: 2 },
      { title: 'Other', contents: 'Nothing here.', score: 1 },
    ].slice(0, topk)));
  }
}

/** Scorer fake: full-context items (first half) get logp -0.3 per token, memory items -0.1 — unless `byItem` says otherwise. */
export class FakeScorer implements TargetScorer {
  calls: ScoringItem[][] = [];
  constructor(private readonly byItem?: (item: ScoringItem, i: number, n: number) => number) {}
  score(items: readonly ScoringItem[]): Promise<Float32Array[]> {
    this.calls.push([...items]);
    const n = items.length;
    return Promise.resolve(items.map((it, i) => new Float32Array(it.targetIds.length).fill(this.byItem ? this.byItem(it, i, n) : i < n / 2 ? -0.3 : -0.1)));
  }
}

/** Group normalisation as docs/algorithm.md §5 states it (unbiased std, eps; a singleton → mean 0, std 1). */
export function normalise(xs: number[], eps = 1e-6): number[] {
  const n = xs.length;
  const mean = n > 1 ? xs.reduce((a, x) => a + x, 0) / n : 0;
  const std = n > 1 ? Math.sqrt(xs.reduce((a, x) => a + (x - mean) ** 2, 0) / (n - 1)) : 1;
  return xs.map((x) => (x - mean) / (std + eps));
}

/** The embedded model on one ORT thread for the enclosing describe block: loaded before its tests, disposed after. */
export function useEmbeddedModel(): () => LocalModel {
  let model: CausalLM | undefined;
  let local: LocalModel | undefined;
  beforeAll(async () => {
    model = await CausalLM.load(MODEL_DIR, { sessionOptions: { intraOpNumThreads: 1 } });
    local = new LocalModel(model);
  });
  afterAll(async () => {
    await model?.dispose();
  });
  return () => local!;
}

/**
 * A generator that writes canned text token by token and stops where the local engine's stop
 * matcher stops (or at the request's token budget); it records every request and each call's
 * stop strings. Log-probs: `logprob` at every token, or none.
 */
export class CannedGenerator implements Generator {
  readonly maxContextTokens = 4096;
  readonly sent: Array<{ tag: RequestTag; ids: number[] }> = [];
  readonly stops: string[][] = [];
  constructor(readonly codec: Tokenizer, private readonly script: (tag: RequestTag) => string, private readonly logprob?: number) {}
  generate(requests: readonly GenerationRequest[], params: GenerateParams): Promise<GenerationOutput[]> {
    this.stops.push([...params.stop]);
    const m = new StopMatcher(this.codec, params.stop, [this.codec.eosTokenId!]);
    return Promise.resolve(requests.map((req) => {
      this.sent.push({ tag: req.tag, ids: [...req.ids] });
      const all = this.codec.encode(this.script(req.tag));
      let finishReason: GenerationOutput['finishReason'] = 'length';
      let n = Math.min(all.length, req.maxNewTokens);
      for (let k = 1; k <= n; k++) {
        if (m.check(all.slice(0, k)) !== null) {
          n = k;
          finishReason = 'stop';
          break;
        }
      }
      return { tokenIds: all.slice(0, n), logprobs: this.logprob === undefined ? null : new Float32Array(n).fill(this.logprob), finishReason };
    }));
  }
}
