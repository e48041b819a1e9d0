/** The GENERATING state of the agent loop (rollout.ts, docs/algorithm.md §1): every live trajectory's request in one generator call. */
import { STOP_STRINGS } from '../protocol/tags';
import { READING_STOP_STRINGS } from '../protocol/grammar';
import { PartialResultsError, type GenerationOutput, type GenerationRequest } from '../contracts';
import { mixSeed } from '../rng';
import { applyGeneration, isReadingRound, roundContext } from './round';
import { handleDoneState, type RolloutTrajectory } from './trajectory';
import type { Loop } from './loop-state';

/** One request per GENERATING trajectory with room left (`reading`: which are reading rounds); the others enter DONE. */
function roundRequests(loop: Loop): { live: RolloutTrajectory[]; requests: GenerationRequest[]; reading: boolean[] } {
  const { codec, options, hooks } = loop;
  const r = options.rollout;
  const live: RolloutTrajectory[] = [];
  const requests: GenerationRequest[] = [];
  const reading: boolean[] = [];
  for (const t of loop.trajectories) {
    if (t.state !== 'generating') continue;
    const ctx = roundContext(t, codec, options);
    const budget = Math.min(r.maxRoundTokens, r.maxResponseTokens - t.responseIds.length, loop.generator.maxContextTokens - ctx.length);
    if (budget <= 0) {
      handleDoneState(t, r.maxResponseTokens - t.responseIds.length <= 0 ? 'response-budget' : 'context', hooks);
      continue;
    }
    live.push(t);
    const round = t.rounds.length + 1;
    const req: GenerationRequest = { ids: ctx, maxNewTokens: budget, tag: { uid: t.uid, sample: t.sample, round } };
    if (loop.requestSeed !== undefined) req.seed = loop.requestSeed(t, round);
    requests.push(req);
    reading.push(isReadingRound(t, options));
  }
  return { live, requests, reading };
}

type Generated = { outs: ReadonlyArray<GenerationOutput | undefined>; failures: ReadonlyMap<number, string> };

/** One generator call with `stop`; undefined (with its error in `failures`) where a request failed for good. */
async function generateCall(loop: Loop, requests: GenerationRequest[], seed: number, stop: readonly string[]): Promise<Generated> {
  const r = loop.options.rollout;
  let outs: ReadonlyArray<GenerationOutput | undefined>;
  let failures: ReadonlyMap<number, string> = new Map();
  try {
    outs = await loop.generator.generate(requests, {
      temperature: r.sampling.temperature,
      topP: r.sampling.topP,
      topK: r.sampling.topK,
      seed,
      stop,
      maxBatchSize: r.maxGenerateBatch,
    });
  } catch (err) {
    // Some requests failed for good (a server's answer missing or wrong): only their trajectories fail.
    if (!(err instanceof PartialResultsError) || err.results.length !== requests.length) throw err;
    outs = err.results as ReadonlyArray<GenerationOutput | undefined>;
    failures = err.failures;
  }
  if (outs.length !== requests.length) throw new Error(`The generator returned ${outs.length} results for ${requests.length} requests`);
  return { outs, failures };
}

/**
 * The generator's results in request order. Stop strings are per call, so reading rounds
 * (`tool.pageReading: 'queue'`, stop at `</think>`) go in a second call with a seed of their own;
 * without them there is one call, as before the queue existed.
 */
async function generateAll(loop: Loop, requests: GenerationRequest[], reading: readonly boolean[], step: number): Promise<Generated> {
  const seed = mixSeed(loop.options.rollout.seed, loop.batchIndex, step);
  const t0 = performance.now();
  const acting = requests.flatMap((_q, i) => (reading[i] ? [] : [i]));
  const readers = requests.flatMap((_q, i) => (reading[i] ? [i] : []));
  let result: Generated;
  if (readers.length === 0) result = await generateCall(loop, requests, seed, STOP_STRINGS);
  else {
    const outs: Array<GenerationOutput | undefined> = new Array(requests.length);
    const failures = new Map<number, string>();
    for (const [idx, stop, s] of [[acting, STOP_STRINGS, seed], [readers, READING_STOP_STRINGS, mixSeed(seed, 1)]] as const) {
      if (idx.length === 0) continue;
      const got = await generateCall(loop, idx.map((i) => requests[i]!), s, stop);
      idx.forEach((i, k) => {
        outs[i] = got.outs[k];
        const f = got.failures.get(k);
        if (f !== undefined) failures.set(i, f);
      });
    }
    result = { outs, failures };
  }
  loop.stats.generateMs += performance.now() - t0;
  return result;
}

/** GENERATING: one request per live trajectory, all in one generator call (reading rounds in a second). False when none is left. */
export async function handleGeneratingState(loop: Loop, step: number): Promise<boolean> {
  const { live, requests, reading } = roundRequests(loop);
  if (live.length === 0) return false;
  const { stats, hooks } = loop;
  stats.steps++;
  const { outs, failures } = await generateAll(loop, requests, reading, step);
  live.forEach((t, i) => {
    const out = outs[i];
    if (out === undefined || failures.has(i)) {
      t.error = failures.get(i) ?? `the generator returned no result for request ${i} (${t.uid} sample ${t.sample} round ${t.rounds.length + 1})`;
      stats.backendErrors++;
      handleDoneState(t, 'backend-error', hooks);
      return;
    }
    stats.rounds++;
    stats.generatedTokens += out.tokenIds.length;
    applyGeneration(t, out, requests[i]!.ids, loop.codec, loop.ids, loop.options, hooks);
  });
  return true;
}

