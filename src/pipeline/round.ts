/**
 * One round of a trajectory (docs/algorithm.md §1-§2): the context it is generated from, its
 * generated tokens recorded as a `RoundTrace` (tags read from the decoded text, never from a
 * re-tokenisation; generated ids kept as returned) with the state they lead to, and the tool
 * observation appended after a search, an access or a reading round.
 */
import { chatRendererFor } from '../protocol/chat';
import { observationSegment } from '../protocol/stream';
import { parseRoundOutput } from '../protocol/round';
import { grammarFor } from '../protocol/grammar';
import { locateMem } from '../protocol/mem-tokens';
import type { GenerationFinish, GenerationOutput, RoundTrace, TextCodec } from '../contracts';
import type { PipelineOptions } from '../options';
import { handleDoneState, type AgentLoopHooks, type ProtocolIds, type RolloutTrajectory } from './trajectory';


/** The ids the model is conditioned on at the start of the trajectory's next round (docs/algorithm.md §7). */
export function roundContext(t: RolloutTrajectory, codec: TextCodec, options: PipelineOptions): number[] {
  if (options.rollout.context === 'full' || t.rounds.length === 0) return [...t.promptIds, ...t.responseIds];
  return codec.encode(chatRendererFor(codec, options.rollout.chatTemplate).render(t.memory.preparePrompt(), true));
}

/** docs/algorithm.md §1: under `tool.pageReading: 'queue'`, the trajectory's next round reads a queued chunk (no action; stops at `</think>`). */
export function isReadingRound(t: RolloutTrajectory, options: PipelineOptions): boolean {
  return options.tool.pageReading === 'queue' && t.queued.length > 0;
}

/** Appends generated ids (response_mask 1) with their sampling log-probs. */
function appendGenerated(t: RolloutTrajectory, out: GenerationOutput): void {
  const toks = out.tokenIds;
  for (let i = 0; i < toks.length; i++) {
    t.responseIds.push(toks[i]!);
    t.responseMask.push(1);
    const lp = out.logprobs === null ? undefined : out.logprobs[i];
    if (lp === undefined) t.hasLogprobs = false;
    t.oldLogp.push(lp ?? 0);
  }
}

/** The round's mem block in response positions (docs/algorithm.md §1): first and last token of `<mem>`…`</mem>`, and the content range. */
function memTags(toks: readonly number[], text: string, start: number, codec: TextCodec, ids: ProtocolIds): Pick<RoundTrace, 'memOpen' | 'memClose' | 'memContent'> {
  const m = locateMem(codec, toks, text, ids.memTags);
  if (m === null) return { memOpen: null, memClose: null, memContent: null };
  return { memOpen: start + m.inclusive[0], memClose: start + m.inclusive[1] - 1, memContent: [start + m.content[0], start + m.content[1]] };
}

/**
 * The state a round leads to: TOOL_CALLING after a search or access within the turn limit, and
 * after a reading round that stopped at `</think>` (its observation is the next queued chunk),
 * else DONE with its reason.
 */
function nextState(t: RolloutTrajectory, round: RoundTrace, finishReason: GenerationFinish, options: PipelineOptions, hooks?: AgentLoopHooks): void {
  const r = options.rollout;
  if (round.action === 'answer') handleDoneState(t, 'answer', hooks);
  else if (round.action === 'search' || round.action === 'access' || (round.reading === true && finishReason === 'stop')) {
    if (t.rounds.length >= r.maxTurns) handleDoneState(t, 'max-turns', hooks);
    else {
      t.state = 'tool-calling';
      if (round.action === 'search') t.pendingQuery = round.query ?? '';
      else if (round.action === 'access') t.pendingUrl = round.url ?? '';
    }
  } else if (finishReason === 'eos') handleDoneState(t, 'eos', hooks);
  else if (finishReason === 'context') handleDoneState(t, 'context', hooks);
  else if (t.responseIds.length >= r.maxResponseTokens) handleDoneState(t, 'response-budget', hooks);
  else if (finishReason === 'stop') handleDoneState(t, 'no-action', hooks);
  else handleDoneState(t, 'round-length', hooks);
}

/**
 * Applies one generation result to a trajectory: records the round and picks the next state.
 * `context` is what the generator was sent; under the memory policy the round keeps it
 * (docs/algorithm.md §7: it is not a prefix of the trajectory).
 */
export function applyGeneration(
  t: RolloutTrajectory,
  out: GenerationOutput,
  context: readonly number[],
  codec: TextCodec,
  ids: ProtocolIds,
  options: PipelineOptions,
  hooks?: AgentLoopHooks,
): RoundTrace {
  const start = t.responseIds.length;
  appendGenerated(t, out);
  // The terminating eos / <|im_end|> is part of the response but not of the round's text.
  const last = out.tokenIds[out.tokenIds.length - 1];
  const toks = last !== undefined && ids.endOfRound.has(last) ? out.tokenIds.slice(0, -1) : out.tokenIds;
  const text = codec.decode(toks);
  const reading = isReadingRound(t, options);
  const parsed = parseRoundOutput(text, grammarFor(options.tool.access, reading));
  const round: RoundTrace = {
    index: t.rounds.length + 1,
    start,
    end: t.responseIds.length,
    text,
    contextTokens: context.length,
    ...(options.rollout.context === 'memory' ? { contextIds: [...context] } : {}),
    finishReason: out.finishReason,
    action: parsed.action,
    query: parsed.search,
    ...(parsed.access !== null ? { url: parsed.access } : {}),
    ...(reading ? { reading: true as const } : {}),
    answer: parsed.answer,
    violations: parsed.violations,
    ...memTags(toks, text, start, codec, ids),
    observation: null,
  };
  t.rounds.push(round);
  t.memory.addGeneration(text);
  hooks?.onRound?.(t, round);
  nextState(t, round, out.finishReason, options, hooks);
  return round;
}

/**
 * Appends a tool observation ("\n" + obs + "\n", response_mask 0), cut to the response budget,
 * and records it in the trajectory's memory: a search result, or with `shortText` a webpage chunk
 * (docs/algorithm.md §7: whole in the round it arrives, afterwards only its short text). Under
 * `tool.pageReading: 'queue'` it is the head of the trajectory's queue, whatever round it follows.
 */
export function applyObservation(t: RolloutTrajectory, observation: string, codec: TextCodec, options: PipelineOptions, hooks?: AgentLoopHooks, shortText?: string): void {
  const round = t.rounds[t.rounds.length - 1]!;
  if (shortText === undefined) t.memory.addSearchResults(observation);
  else t.memory.addWebpage(observation, shortText);
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
  round.observation = { start, end: t.responseIds.length, text: observation, truncated, ...(shortText !== undefined ? { shortText } : {}) };
  t.pendingQuery = null;
  t.pendingUrl = null;
  if (t.responseIds.length >= options.rollout.maxResponseTokens) handleDoneState(t, 'response-budget', hooks);
  else t.state = 'generating';
}
