/**
 * The agent loop (docs/algorithm.md §1-§2): one state machine per trajectory,
 * GENERATING → TOOL_CALLING → GENERATING → … → DONE (or ERROR when the tool fails, or when an
 * inference server's answer to the trajectory's request is missing or wrong), `n` samples per
 * question sharing the question's uid, every question of a batch in flight at once. Each step
 * runs the handler of each state over all trajectories in it: GENERATING sends the requests of
 * all live trajectories to the generator in one call (and those of reading rounds, under
 * `tool.pageReading: 'queue'`, in a second: they stop at `</think>`), TOOL_CALLING answers all their searches
 * in one retriever call and all their accesses in one page-tool call; DONE is entered through
 * `handleDoneState`.
 */
import { STOP_STRINGS } from '../protocol/tags';
import { READING_STOP_STRINGS } from '../protocol/grammar';
import { MempoError } from '../errors';
import { chunkPage, renderNoPage, renderSearchObservation, renderWebpage, type WebpageObservation } from '../retrieval/observation';
import { PartialResultsError, type GenerationOutput, type GenerationRequest, type Generator, type Question, type Retriever, type TextCodec } from '../contracts';
import type { PipelineOptions } from '../options';
import { mixSeed } from '../rng';
import { applyGeneration, applyObservation, isReadingRound, roundContext } from './round';
import { handleDoneState, newTrajectory, protocolIds, type AgentLoopHooks, type ProtocolIds, type QueuedObservation, type RolloutTrajectory } from './trajectory';

export type { AgentLoopHooks, RolloutTrajectory } from './trajectory';

export interface AgentLoopStats {
  steps: number;
  rounds: number;
  generatedTokens: number;
  observationTokens: number;
  searches: number;
  /** Access rounds answered (`<access>` with a URL) and the pages they opened (a URL with a page, once per trajectory). */
  accesses: number;
  pagesOpened: number;
  toolErrors: number;
  /** Trajectories whose generation request failed for good on the inference server. */
  backendErrors: number;
  generateMs: number;
  toolMs: number;
}

export interface AgentLoopInput {
  questions: readonly Question[];
  generator: Generator;
  retriever: Retriever;
  options: PipelineOptions;
  /** Index of this batch in the run (part of the sampling seed). */
  batchIndex?: number;
  hooks?: AgentLoopHooks;
}

/** What every state handler of one batch's loop reads and updates. */
interface Loop {
  trajectories: RolloutTrajectory[];
  generator: Generator;
  retriever: Retriever;
  codec: TextCodec;
  ids: ProtocolIds;
  options: PipelineOptions;
  hooks: AgentLoopHooks | undefined;
  batchIndex: number;
  stats: AgentLoopStats;
  /** The continuous schedule's per-request seed (the request's stream independent of the call); absent: stream i of the call's seed. */
  requestSeed?: (t: RolloutTrajectory, round: number) => number;
}

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
async function handleGeneratingState(loop: Loop, step: number): Promise<boolean> {
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

type SearchResults = { ok: true; observations: Map<RolloutTrajectory, string> } | { ok: false; failure: string };

/** Every non-empty query in one retriever call: the rendered observation per trajectory, or the tool's failure. */
async function searchAll(loop: Loop, withQuery: RolloutTrajectory[]): Promise<SearchResults> {
  const { retriever, options } = loop;
  const observations = new Map<RolloutTrajectory, string>();
  if (withQuery.length === 0) return { ok: true, observations };
  try {
    const docs = await retriever.search(withQuery.map((t) => t.pendingQuery!), options.tool.topk);
    if (docs.length !== withQuery.length) throw new Error(`the retriever returned ${docs.length} result lists for ${withQuery.length} queries`);
    withQuery.forEach((t, i) => observations.set(t, renderSearchObservation(docs[i]!, { docMaxChars: options.tool.docMaxChars, format: options.tool.observationFormat })));
    loop.stats.searches += withQuery.length;
    return { ok: true, observations };
  } catch (err) {
    // Errors of the shipped retrievers already name the tool; others get its name in front.
    return { ok: false, failure: err instanceof MempoError ? err.message : `${retriever.name}: ${(err as Error).message}` };
  }
}

type AccessResults = { ok: true; observations: Map<RolloutTrajectory, WebpageObservation[]> } | { ok: false; failure: string };

/**
 * Every access with a URL: what each trajectory is shown (docs/algorithm.md §1), with the URLs not
 * opened yet in one page-tool call; or the tool's failure. Under 'cursor' the chunk it reads next
 * (the first access of a URL opens its page, each later one reads its next chunk, then "No More
 * Information is Found"); under 'queue' every chunk of the page, in order, to be queued.
 */
async function accessAll(loop: Loop, withUrl: RolloutTrajectory[]): Promise<AccessResults> {
  const { retriever, options, stats } = loop;
  const tool = options.tool;
  const observations = new Map<RolloutTrajectory, WebpageObservation[]>();
  if (withUrl.length === 0) return { ok: true, observations };
  const toOpen = withUrl.filter((t) => !t.pages.has(t.pendingUrl!));
  if (toOpen.length > 0) {
    if (retriever.access === undefined) {
      throw new MempoError('ERR_INVALID_OPTION', `options.tool.access: the retriever ${retriever.name} has no pages (give it a pages file, --pages FILE, or a retrieval server started with --pages)`);
    }
    try {
      const pages = await retriever.access(toOpen.map((t) => t.pendingUrl!));
      if (pages.length !== toOpen.length) throw new Error(`the page tool returned ${pages.length} pages for ${toOpen.length} URLs`);
      toOpen.forEach((t, i) => {
        const page = pages[i];
        const chunks = page === null || page === undefined ? [] : chunkPage(page.contents, tool);
        t.pages.set(t.pendingUrl!, { chunks, read: 0 });
        if (chunks.length > 0) stats.pagesOpened++;
      });
    } catch (err) {
      return { ok: false, failure: err instanceof MempoError ? err.message : `${retriever.name}: ${(err as Error).message}` };
    }
  }
  const show = (chunks: readonly string[], k: number, url: string) => renderWebpage(chunks[k]!, k + 1, chunks.length, url, tool.observationFormat, options.memory.webpageShortTextChars);
  for (const t of withUrl) {
    const url = t.pendingUrl!;
    const cursor = t.pages.get(url)!;
    if (tool.pageReading === 'queue') {
      // ASearcher reads the page anew at each access: chunk 1 on, every chunk queued.
      observations.set(t, cursor.chunks.length === 0 ? [renderNoPage(tool.observationFormat)] : cursor.chunks.map((_c, k) => show(cursor.chunks, k, url)));
      continue;
    }
    if (cursor.read >= cursor.chunks.length) {
      observations.set(t, [renderNoPage(tool.observationFormat)]);
      continue;
    }
    observations.set(t, [show(cursor.chunks, cursor.read++, url)]);
  }
  stats.accesses += withUrl.length;
  return { ok: true, observations };
}

/** TOOL_CALLING: every pending search of this step in one retriever call, every access in one page-tool call, then back to GENERATING (or DONE / ERROR). */
async function handleToolCallingState(loop: Loop): Promise<void> {
  const calling = loop.trajectories.filter((t) => t.state === 'tool-calling');
  if (calling.length === 0) return;
  const { stats, hooks } = loop;
  const format = loop.options.tool.observationFormat;
  const t1 = performance.now();
  const [searched, accessed] = await Promise.all([
    searchAll(loop, calling.filter((t) => (t.pendingQuery ?? '').length > 0)),
    accessAll(loop, calling.filter((t) => (t.pendingUrl ?? '').length > 0)),
  ]);
  stats.toolMs += performance.now() - t1;
  for (const t of calling) {
    const q = t.pendingQuery ?? '';
    const url = t.pendingUrl ?? '';
    const failure = q.length > 0 && !searched.ok ? searched.failure : url.length > 0 && !accessed.ok ? accessed.failure : null;
    if (failure !== null) {
      t.error = failure;
      stats.toolErrors++;
      handleDoneState(t, 'tool-error', hooks);
      continue;
    }
    const before = t.responseIds.length;
    // What the tool gives (none after a reading round without an action). An empty URL or query is
    // a format violation of its round; the tool answers that there is no page, or "No results.".
    const results: QueuedObservation[] = t.pendingUrl !== null
      ? (url.length > 0 && accessed.ok ? accessed.observations.get(t)! : [renderNoPage(format)])
      : t.pendingQuery !== null
        ? [{ text: q.length > 0 && searched.ok ? searched.observations.get(t)! : renderSearchObservation([], { format }), page: null }]
        : [];
    // Under 'queue' every result waits its turn behind what is queued (ASearcher's job queue); under 'cursor' there is one, shown now.
    t.queued.push(...results);
    const obs = t.queued.shift()!;
    if (obs.page !== null) t.rounds[t.rounds.length - 1]!.page = obs.page;
    applyObservation(t, obs.text, loop.codec, loop.options, hooks, obs.shortText);
    stats.observationTokens += t.responseIds.length - before;
  }
}

export const newLoopStats = (): AgentLoopStats => ({ steps: 0, rounds: 0, generatedTokens: 0, observationTokens: 0, searches: 0, accesses: 0, pagesOpened: 0, toolErrors: 0, backendErrors: 0, generateMs: 0, toolMs: 0 });

/** Runs every question's group to completion. Trajectories in question order, samples in order. */
export async function runAgentLoop(input: AgentLoopInput): Promise<{ trajectories: RolloutTrajectory[]; stats: AgentLoopStats }> {
  const { generator, options } = input;
  const codec = generator.codec;
  const ids = protocolIds(codec);
  const trajectories: RolloutTrajectory[] = [];
  for (const q of input.questions) for (let s = 0; s < options.rollout.groupSize; s++) trajectories.push(newTrajectory(q, s, codec, options));
  const loop: Loop = { trajectories, generator, retriever: input.retriever, codec, ids, options, hooks: input.hooks, batchIndex: input.batchIndex ?? 0, stats: newLoopStats() };
  for (let step = 0; ; step++) {
    if (!(await loopStep(loop, step))) break;
  }
  return { trajectories, stats: loop.stats };
}

/**
 * One step of a loop over whatever trajectories it holds: GENERATING (one generator call), then
 * TOOL_CALLING (one retriever call). False when no trajectory was left to generate.
 */
async function loopStep(loop: Loop, step: number): Promise<boolean> {
  if (!(await handleGeneratingState(loop, step))) return false;
  await handleToolCallingState(loop);
  return true;
}

/**
 * The agent loop of the continuous schedule (pipeline.ts): groups join with `admit` whenever the
 * caller likes, each `step` runs one round of every live trajectory (in admission order, each
 * request with its own seed, so its samples do not depend on which groups share the call) and
 * returns the groups that are done, which leave the loop.
 */
export class ContinuousLoop {
  private readonly loop: Loop;
  private readonly groups = new Map<string, { batch: number; slot: number; trajectories: RolloutTrajectory[] }>();
  private step = 0;

  constructor(input: Omit<AgentLoopInput, 'questions' | 'batchIndex'>) {
    const { generator, options } = input;
    const seed = options.rollout.seed;
    this.loop = {
      trajectories: [], generator, retriever: input.retriever, codec: generator.codec, ids: protocolIds(generator.codec), options, hooks: input.hooks,
      batchIndex: 0, stats: newLoopStats(),
      requestSeed: (t, round) => { const g = this.groups.get(t.uid)!; return mixSeed(seed, g.batch, g.slot, t.sample, round); },
    };
  }

  /** Trajectories not done yet (those the engine still has work for). */
  get live(): number {
    let n = 0;
    for (const t of this.loop.trajectories) if (t.state === 'generating' || t.state === 'tool-calling') n++;
    return n;
  }

  get stats(): AgentLoopStats {
    return this.loop.stats;
  }

  /** Takes up question `q`'s group: question `slot` of batch `batch` (its sampling seeds' coordinates). */
  admit(q: Question, batch: number, slot: number): void {
    if (this.groups.has(q.id)) throw new MempoError('ERR_INVALID_ARGUMENT', `question ${q.id} is already in flight`);
    const trajectories: RolloutTrajectory[] = [];
    for (let s = 0; s < this.loop.options.rollout.groupSize; s++) trajectories.push(newTrajectory(q, s, this.loop.codec, this.loop.options));
    this.groups.set(q.id, { batch, slot, trajectories });
    this.loop.trajectories.push(...trajectories);
  }

  /** One round of every live trajectory; the groups all of whose trajectories are now done, in admission order. */
  async next(): Promise<Array<{ uid: string; trajectories: RolloutTrajectory[] }>> {
    await loopStep(this.loop, this.step++);
    const finished = new Set<string>();
    for (const [uid, g] of this.groups) if (g.trajectories.every((t) => t.state === 'done' || t.state === 'error')) finished.add(uid);
    if (finished.size === 0) return [];
    this.loop.trajectories = this.loop.trajectories.filter((t) => !finished.has(t.uid));
    return [...finished].map((uid) => {
      const g = this.groups.get(uid)!;
      this.groups.delete(uid);
      return { uid, trajectories: g.trajectories };
    });
  }
}
