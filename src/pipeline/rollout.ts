/**
 * The agent loop (SPEC §1-§2): one state machine per trajectory,
 * GENERATING → TOOL_CALLING → GENERATING → … → DONE (or ERROR when the tool fails, or when an
 * inference server's answer to the trajectory's request is missing or wrong), `n`
 * samples per question sharing the question's uid, every question of a batch in flight at
 * once. Each step sends the generation requests of all live trajectories to the generator in
 * one call, then answers all their searches in one retriever call.
 */
import { MEM_CLOSE, MEM_OPEN, STOP_STRINGS } from '../protocol/tags';
import { EOS_TOKEN_ID, IM_END_ID } from '../protocol/embedded-ids';
import { renderChat, renderPrompt } from '../protocol/chat';
import { observationSegment } from '../protocol/stream';
import { AgentMemory } from '../protocol/agent-memory';
import { MempoPipelineError } from '../errors';
import { parseRoundOutput, type Violation } from '../protocol/round';
import { renderSearchObservation } from '../retrieval/observation';
import { type Retriever } from '../contracts';
import { PartialResultsError, type GenerationFinish, type GenerationOutput, type GenerationRequest, type Generator, type TextCodec } from '../contracts';
import type { PipelineOptions } from '../options';
import type { Question } from '../io/questions';
import { mixSeed } from '../seed';

export type TrajectoryState = 'generating' | 'tool-calling' | 'done' | 'error';

export type DoneReason =
  | 'answer'
  | 'max-turns'
  | 'response-budget'
  | 'round-length'
  | 'eos'
  | 'no-action'
  | 'context'
  | 'tool-error'
  /** The generator or scorer failed for good on this trajectory's request or item (see PartialResultsError). */
  | 'backend-error';

export interface ObservationTrace {
  /** [start, end) of the observation segment ("\n<information>…</information>\n") in the response. */
  start: number;
  end: number;
  /** The `<information>` block as the tool rendered it. */
  text: string;
  /** Cut to fit the response budget. */
  truncated: boolean;
}

export interface RoundTrace {
  /** 1-based. */
  index: number;
  /** [start, end) of the round's generated tokens in the response. */
  start: number;
  end: number;
  text: string;
  /** Tokens the model was conditioned on when the round started. */
  contextTokens: number;
  finishReason: GenerationFinish;
  action: 'search' | 'answer' | null;
  query: string | null;
  answer: string | null;
  violations: Violation[];
  /** Positions (in the response) of this round's `<mem>` and `</mem>` tokens, or null. */
  memOpen: number | null;
  memClose: number | null;
  observation: ObservationTrace | null;
}

export interface Trajectory {
  uid: string;
  sample: number;
  question: Question;
  state: TrajectoryState;
  doneReason: DoneReason | null;
  error: string | null;
  promptIds: number[];
  responseIds: number[];
  responseMask: number[];
  /** Log-prob of each response token under the sampling policy (0 on observation tokens). */
  oldLogp: number[];
  hasLogprobs: boolean;
  rounds: RoundTrace[];
  memory: AgentMemory;
  pendingQuery: string | null;
}

export interface AgentLoopStats {
  steps: number;
  rounds: number;
  generatedTokens: number;
  observationTokens: number;
  searches: number;
  toolErrors: number;
  /** Trajectories whose generation request failed for good on the inference server. */
  backendErrors: number;
  generateMs: number;
  toolMs: number;
}

export interface AgentLoopHooks {
  onRound?(t: Trajectory, round: RoundTrace): void;
  onDone?(t: Trajectory): void;
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

/** Ids of the protocol tags the loop needs as single tokens. */
export interface ProtocolIds {
  memOpen: number;
  memClose: number;
}

export function protocolIds(codec: TextCodec): ProtocolIds {
  const memOpen = codec.tokenId(MEM_OPEN);
  const memClose = codec.tokenId(MEM_CLOSE);
  if (memOpen === undefined || memClose === undefined) {
    throw new MempoPipelineError('ERR_TOKENIZER_PROTOCOL', `The tokenizer must have ${MEM_OPEN} and ${MEM_CLOSE} as single tokens (agent protocol)`);
  }
  return { memOpen, memClose };
}

const END_IDS: ReadonlySet<number> = new Set([EOS_TOKEN_ID, IM_END_ID]);

export function newTrajectory(question: Question, sample: number, codec: TextCodec, options: PipelineOptions): Trajectory {
  const m = options.memory;
  return {
    uid: question.id,
    sample,
    question,
    state: 'generating',
    doneReason: null,
    error: null,
    promptIds: codec.encode(renderPrompt(question.question)),
    responseIds: [],
    responseMask: [],
    oldLogp: [],
    hasLogprobs: true,
    rounds: [],
    memory: new AgentMemory(question.question, {
      windowToolResults: m.windowToolResults,
      searchShortTextChars: m.searchShortTextChars,
      webpageShortTextChars: m.webpageShortTextChars,
    }),
    pendingQuery: null,
  };
}

/** The ids the model is conditioned on at the start of the trajectory's next round. */
export function roundContext(t: Trajectory, codec: TextCodec, options: PipelineOptions): number[] {
  if (options.rollout.context === 'full' || t.rounds.length === 0) return [...t.promptIds, ...t.responseIds];
  return codec.encode(renderChat(t.memory.preparePrompt(), true));
}

function finish(t: Trajectory, reason: DoneReason, hooks: AgentLoopHooks | undefined): void {
  t.state = reason === 'tool-error' || reason === 'backend-error' ? 'error' : 'done';
  t.doneReason = reason;
  t.pendingQuery = null;
  hooks?.onDone?.(t);
}

/** Applies one generation result to a trajectory: records the round and picks the next state. */
export function applyGeneration(
  t: Trajectory,
  out: GenerationOutput,
  contextTokens: number,
  codec: TextCodec,
  ids: ProtocolIds,
  options: PipelineOptions,
  hooks?: AgentLoopHooks,
): RoundTrace {
  const start = t.responseIds.length;
  const toks = out.tokenIds;
  for (let i = 0; i < toks.length; i++) {
    t.responseIds.push(toks[i]!);
    t.responseMask.push(1);
    const lp = out.logprobs === null ? undefined : out.logprobs[i];
    if (lp === undefined) t.hasLogprobs = false;
    t.oldLogp.push(lp ?? 0);
  }
  const end = t.responseIds.length;
  // The terminating eos / <|im_end|> is part of the response but not of the round's text.
  const last = toks[toks.length - 1];
  const textIds = last !== undefined && END_IDS.has(last) ? toks.slice(0, -1) : toks;
  const text = codec.decode(textIds);
  const parsed = parseRoundOutput(text);
  let memOpen: number | null = null;
  let memClose: number | null = null;
  const a = toks.indexOf(ids.memOpen);
  if (a >= 0) {
    const b = toks.indexOf(ids.memClose, a + 1);
    if (b >= 0) {
      memOpen = start + a;
      memClose = start + b;
    }
  }
  const round: RoundTrace = {
    index: t.rounds.length + 1,
    start,
    end,
    text,
    contextTokens,
    finishReason: out.finishReason,
    action: parsed.action,
    query: parsed.search,
    answer: parsed.answer,
    violations: parsed.violations,
    memOpen,
    memClose,
    observation: null,
  };
  t.rounds.push(round);
  t.memory.addGeneration(text);
  hooks?.onRound?.(t, round);
  const r = options.rollout;
  if (parsed.action === 'answer') finish(t, 'answer', hooks);
  else if (parsed.action === 'search') {
    if (t.rounds.length >= r.maxTurns) finish(t, 'max-turns', hooks);
    else {
      t.state = 'tool-calling';
      t.pendingQuery = parsed.search ?? '';
    }
  } else if (out.finishReason === 'eos') finish(t, 'eos', hooks);
  else if (out.finishReason === 'context') finish(t, 'context', hooks);
  else if (t.responseIds.length >= r.maxResponseTokens) finish(t, 'response-budget', hooks);
  else if (out.finishReason === 'stop') finish(t, 'no-action', hooks);
  else finish(t, 'round-length', hooks);
  return round;
}

/** Appends a tool observation ("\n" + obs + "\n", response_mask 0), cut to the response budget. */
export function applyObservation(t: Trajectory, observation: string, codec: TextCodec, options: PipelineOptions, hooks?: AgentLoopHooks): void {
  const round = t.rounds[t.rounds.length - 1]!;
  t.memory.addSearchResults(observation);
  let seg = codec.encode(observationSegment(observation));
  const room = options.rollout.maxResponseTokens - t.responseIds.length;
  const truncated = seg.length > room;
  if (truncated) seg = seg.slice(0, Math.max(0, room));
  const start = t.responseIds.length;
  for (const id of seg) {
    t.responseIds.push(id);
    t.responseMask.push(0);
    t.oldLogp.push(0);
  }
  round.observation = { start, end: t.responseIds.length, text: observation, truncated };
  t.pendingQuery = null;
  if (t.responseIds.length >= options.rollout.maxResponseTokens) finish(t, 'response-budget', hooks);
  else t.state = 'generating';
}

/** Runs every question's group to completion. Trajectories in question order, samples in order. */
export async function runAgentLoop(input: AgentLoopInput): Promise<{ trajectories: Trajectory[]; stats: AgentLoopStats }> {
  const { generator, retriever, options, hooks } = input;
  const codec = generator.codec;
  const ids = protocolIds(codec);
  const r = options.rollout;
  const trajectories: Trajectory[] = [];
  for (const q of input.questions) for (let s = 0; s < r.groupSize; s++) trajectories.push(newTrajectory(q, s, codec, options));
  const stats: AgentLoopStats = { steps: 0, rounds: 0, generatedTokens: 0, observationTokens: 0, searches: 0, toolErrors: 0, backendErrors: 0, generateMs: 0, toolMs: 0 };
  const batchIndex = input.batchIndex ?? 0;

  for (let step = 0; ; step++) {
    // GENERATING: one request per live trajectory, all in one generator call.
    const live: Trajectory[] = [];
    const requests: GenerationRequest[] = [];
    for (const t of trajectories) {
      if (t.state !== 'generating') continue;
      const ctx = roundContext(t, codec, options);
      const budget = Math.min(r.maxRoundTokens, r.maxResponseTokens - t.responseIds.length, generator.maxContextTokens - ctx.length);
      if (budget <= 0) {
        finish(t, r.maxResponseTokens - t.responseIds.length <= 0 ? 'response-budget' : 'context', hooks);
        continue;
      }
      live.push(t);
      requests.push({ ids: ctx, maxNewTokens: budget, tag: { uid: t.uid, sample: t.sample, round: t.rounds.length + 1 } });
    }
    if (live.length === 0) break;
    stats.steps++;
    const t0 = performance.now();
    let outs: ReadonlyArray<GenerationOutput | undefined>;
    let failures: ReadonlyMap<number, string> = new Map();
    try {
      outs = await generator.generate(requests, {
        temperature: r.sampling.temperature,
        topP: r.sampling.topP,
        topK: r.sampling.topK,
        seed: mixSeed(r.seed, batchIndex, step),
        stop: STOP_STRINGS,
        maxBatchSize: r.maxGenerateBatch,
      });
    } catch (err) {
      // Some requests failed for good (a server's answer missing or wrong): only their trajectories fail.
      if (!(err instanceof PartialResultsError) || err.results.length !== live.length) throw err;
      outs = err.results as ReadonlyArray<GenerationOutput | undefined>;
      failures = err.failures;
    }
    stats.generateMs += performance.now() - t0;
    if (outs.length !== live.length) throw new Error(`The generator returned ${outs.length} results for ${live.length} requests`);
    live.forEach((t, i) => {
      const out = outs[i];
      if (out === undefined || failures.has(i)) {
        t.error = failures.get(i) ?? `the generator returned no result for request ${i} (${t.uid} sample ${t.sample} round ${t.rounds.length + 1})`;
        stats.backendErrors++;
        finish(t, 'backend-error', hooks);
        return;
      }
      stats.rounds++;
      stats.generatedTokens += out.tokenIds.length;
      applyGeneration(t, out, requests[i]!.ids.length, codec, ids, options, hooks);
    });

    // TOOL_CALLING: every pending search of this step in one retriever call.
    const calling = trajectories.filter((t) => t.state === 'tool-calling');
    if (calling.length === 0) continue;
    const withQuery = calling.filter((t) => (t.pendingQuery ?? '').length > 0);
    const t1 = performance.now();
    let results: Map<Trajectory, string> | null = new Map();
    let failure: string | null = null;
    if (withQuery.length > 0) {
      try {
        const docs = await retriever.search(withQuery.map((t) => t.pendingQuery!), options.tool.topk);
        if (docs.length !== withQuery.length) throw new Error(`the retriever returned ${docs.length} result lists for ${withQuery.length} queries`);
        withQuery.forEach((t, i) => results!.set(t, renderSearchObservation(docs[i]!, { docMaxChars: options.tool.docMaxChars })));
        stats.searches += withQuery.length;
      } catch (err) {
        // Errors of the shipped retrievers already name the tool; others get its name in front.
        failure = err instanceof MempoPipelineError ? err.message : `${retriever.name}: ${(err as Error).message}`;
        results = null;
      }
    }
    stats.toolMs += performance.now() - t1;
    for (const t of calling) {
      const q = t.pendingQuery ?? '';
      if (q.length > 0 && results === null) {
        t.error = failure;
        stats.toolErrors++;
        finish(t, 'tool-error', hooks);
        continue;
      }
      // An empty query is a format violation of its round; the tool answers "No results.".
      const obs = q.length > 0 ? results!.get(t)! : renderSearchObservation([], {});
      const before = t.responseIds.length;
      applyObservation(t, obs, codec, options, hooks);
      stats.observationTokens += t.responseIds.length - before;
    }
  }
  return { trajectories, stats };
}
