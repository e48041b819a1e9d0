/**
 * `HttpCompletionsBackend`: the pipeline's `Generator` and `TargetScorer` over one or more
 * inference servers (engines), in one of two dialects: `'vllm'` (default, `POST /v1/completions`,
 * src/engines/http/vllm.ts) or `'sglang'` (`POST /generate`, src/engines/http/sglang.ts).
 * Requests go through the endpoint pool (src/engines/http/pool.ts): round robin, bounded in
 * flight, timeouts, retries with backoff, failing endpoints out of rotation. `stats()` counts
 * requests, failures and retries per endpoint.
 *
 * A request that fails for good — an answer that is wrong rather than missing (HTTP 4xx,
 * malformed JSON, missing log-probs, token ids that do not match the request, another model's
 * name), or retries exhausted — fails only its own generation request or scoring items: when any
 * did, `generate` / `score` throw `PartialResultsError` with the results of the others and an
 * error per failed index, and the rollout records only those trajectories as failed.
 *
 * Seeds: request i of a `generate` call carries `streamSeed(params.seed, i)`, the seed whose
 * stream 0 is stream i of `params.seed` in mempo's sampler (`createRng`); `mempo serve` samples a
 * single-sequence request from stream 0 of its seed, so a seeded run over `mempo serve` draws the
 * same random numbers per trajectory as the in-process `LocalModel`.
 */
import { PartialResultsError, type GenerateParams, type GenerationOutput, type GenerationRequest, type Generator, type ScoringItem, type TargetScorer, type TextCodec } from '../../contracts';
import { resolveProtocolIds } from '../../protocol/special-ids';
import type { CompletionsDialect } from './dialect';
import { isServerError } from '../../errors';
import { resolveEngineOptions, type CompletionsApi, type HttpCompletionsOptions } from './options';
import { EndpointPool, type EndpointStats } from './pool';
import { groupJobs, planScoring, scoreGroup, scoringItemName } from './scoring';
import { sglangDialect } from './sglang';
import { endpointUrl } from './url';
import { vllmDialect } from './vllm';
import { updateWeightsFromDisk, type WeightUpdateResult } from './weights';

export { CompletionsBackendError } from './errors';
export { COMPLETIONS_APIS, type CompletionsApi, type HttpCompletionsOptions } from './options';
export type { EndpointStats } from './pool';
export type { WeightUpdateResult } from './weights';
export { endpointUrl, serverBaseUrl } from './url';

export interface BackendStats {
  api: CompletionsApi;
  model: string;
  requests: number;
  /** Tries repeated after a retryable failure. */
  retries: number;
  /** Requests that failed for good (after every retry, or with an error that is not retried). */
  failedRequests: number;
  /** Generation requests and scoring items that failed for good (their trajectories are recorded as failed). */
  failedGenerations: number;
  failedItems: number;
  generationRequests: number;
  scoringRequests: number;
  scoredItems: number;
  endpoints: EndpointStats[];
}

/**
 * The seed whose stream 0 equals stream `stream` of `seed` in mempo's sampler: `createRng(seed,
 * stream)` starts from `low32(seed) ^ imul(stream + 1, K) ^ high(seed)`, so this seed, below 2^32,
 * starts `createRng(·, 0)` at the same state (src/rng.ts; test/engines/http/serve-e2e.test.ts checks it).
 */
export function streamSeed(seed: number, stream: number): number {
  const K = 0x27d4eb2f;
  return (Math.floor(seed) ^ Math.imul(stream + 1, K) ^ Math.floor(seed / 4294967296) ^ K) >>> 0;
}

export class HttpCompletionsBackend implements Generator, TargetScorer {
  readonly codec: TextCodec;
  readonly maxContextTokens: number;
  readonly api: CompletionsApi;
  readonly model: string;
  private readonly pool: EndpointPool;
  private readonly dialect: CompletionsDialect;
  private readonly scoreBatchSize: number;
  private readonly sendSeed: boolean;
  private readonly http: { timeoutMs: number; fetch: typeof fetch };
  private readonly counts = { failedGenerations: 0, failedItems: 0, generationRequests: 0, scoringRequests: 0, scoredItems: 0 };

  constructor(urls: readonly string[], options: HttpCompletionsOptions) {
    const o = resolveEngineOptions(urls, options);
    this.api = o.api;
    this.model = options.model;
    this.pool = new EndpointPool(urls.map((u) => endpointUrl(u, o.api)), o.pool);
    this.codec = options.codec;
    this.maxContextTokens = options.maxContextTokens;
    const eos = new Set(options.eosTokenIds ?? resolveProtocolIds(options.codec).eosTokenIds);
    this.dialect = o.api === 'sglang' ? sglangDialect(eos) : vllmDialect(this.model, eos, options.modelAliases ?? []);
    this.scoreBatchSize = o.scoreBatchSize;
    this.sendSeed = o.sendSeed;
    this.http = { timeoutMs: o.pool.timeoutMs, fetch: o.pool.fetch };
  }

  /**
   * Every endpoint takes the weights of `modelPath` (a directory on the servers' machine): SGLang's
   * POST /update_weights_from_disk, served by SGLang and `mempo serve`, all endpoints in
   * parallel with the request timeout. Throws ERR_SERVER naming each endpoint that failed and its
   * message (vLLM has no such endpoint: see docs/servers.md "Taking new weights").
   */
  updateWeightsFromDisk(modelPath: string): Promise<WeightUpdateResult[]> {
    return updateWeightsFromDisk(this.pool.urls, modelPath, { api: this.api, ...this.http });
  }

  /** The endpoint URLs (normalised to .../v1/completions or .../generate). */
  get urls(): string[] {
    return this.pool.urls;
  }

  /** Requests, failures and retries so far, per endpoint. */
  stats(): BackendStats {
    const p = this.pool.counts;
    const c = this.counts;
    return {
      api: this.api, model: this.model, requests: p.requests, retries: p.retries, failedRequests: p.failedRequests,
      failedGenerations: c.failedGenerations, failedItems: c.failedItems, generationRequests: c.generationRequests,
      scoringRequests: c.scoringRequests, scoredItems: c.scoredItems, endpoints: this.pool.endpointStats(),
    };
  }

  /**
   * One request per generation request, all in flight together (bounded per endpoint). Throws
   * `PartialResultsError` when some failed for good, once every request has settled.
   */
  async generate(requests: readonly GenerationRequest[], params: GenerateParams): Promise<GenerationOutput[]> {
    const settled = await Promise.allSettled(
      requests.map((r, i) => {
        const what = `generation request ${i} (${r.tag.uid} sample ${r.tag.sample} round ${r.tag.round})`;
        this.counts.generationRequests++;
        const body = this.dialect.generationBody(r, params, this.sendSeed ? (r.seed !== undefined ? streamSeed(r.seed, 0) : streamSeed(params.seed, i)) : undefined);
        return this.pool.request(body, what, (j, where) => this.dialect.parseGeneration(j, where, r));
      }),
    );
    const results: (GenerationOutput | undefined)[] = new Array<GenerationOutput | undefined>(requests.length).fill(undefined);
    const failures = new Map<number, string>();
    settled.forEach((x, i) => {
      if (x.status === 'fulfilled') results[i] = x.value;
      else if (isServerError(x.reason)) failures.set(i, x.reason.message);
      else throw x.reason;
    });
    if (failures.size > 0) {
      this.counts.failedGenerations += failures.size;
      throw new PartialResultsError(results, failures, 'generation requests');
    }
    return results as GenerationOutput[];
  }

  /**
   * All items in one logical batch: groups of `scoreBatchSize` items per request, all in flight
   * together. Throws `PartialResultsError` when some items failed for good (each error names the
   * endpoint and the item), once every request has settled.
   */
  async score(items: readonly ScoringItem[]): Promise<Float32Array[]> {
    const { jobs, ...outcome } = planScoring(items, this.maxContextTokens);
    const name = (k: number) => scoringItemName(items, k);
    const settled = await Promise.allSettled(
      groupJobs(jobs, this.scoreBatchSize).map((group) => {
        this.counts.scoringRequests++;
        this.counts.scoredItems += group.length;
        return scoreGroup(this.pool, this.dialect, group, name, outcome);
      }),
    );
    for (const x of settled) if (x.status === 'rejected') throw x.reason;
    if (outcome.failures.size > 0) {
      this.counts.failedItems += outcome.failures.size;
      const ordered = new Map([...outcome.failures].sort((a, b) => a[0] - b[0]));
      throw new PartialResultsError(outcome.out, ordered, 'scoring items');
    }
    return outcome.out as Float32Array[];
  }
}
