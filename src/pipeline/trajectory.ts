/**
 * A trajectory while it is rolled out (docs/algorithm.md §1-§2): the contract's `Trajectory`
 * plus the live state only the agent loop reads, its context window (docs/algorithm.md §7) and
 * the search query waiting for the tool; and the transition into DONE / ERROR.
 */
import { MEM_CLOSE, MEM_OPEN } from '../protocol/tags';
import { chatRendererFor, renderPrompt } from '../protocol/chat';
import { AgentMemory } from '../protocol/agent-memory';
import { resolveProtocolIds } from '../protocol/special-ids';
import { MempoError } from '../errors';
import type { DoneReason, Question, RoundTrace, TextCodec, Trajectory } from '../contracts';
import type { PipelineOptions } from '../options';

export interface RolloutTrajectory extends Trajectory {
  memory: AgentMemory;
  pendingQuery: string | null;
}

export interface AgentLoopHooks {
  onRound?(t: Trajectory, round: RoundTrace): void;
  onDone?(t: Trajectory): void;
}

/** Ids of the protocol tags the loop needs as single tokens. */
export interface ProtocolIds {
  memOpen: number;
  memClose: number;
  /** Ids that end a round without a stop tag (eos, end-of-turn): dropped before the round's text is parsed. */
  endOfRound: ReadonlySet<number>;
}

export function protocolIds(codec: TextCodec): ProtocolIds {
  const memOpen = codec.tokenId(MEM_OPEN);
  const memClose = codec.tokenId(MEM_CLOSE);
  if (memOpen === undefined || memClose === undefined) {
    throw new MempoError('ERR_TOKENIZER_PROTOCOL', `The tokenizer must have ${MEM_OPEN} and ${MEM_CLOSE} as single tokens (agent protocol)`);
  }
  return { memOpen, memClose, endOfRound: new Set(resolveProtocolIds(codec).endOfRoundIds) };
}

export function newTrajectory(question: Question, sample: number, codec: TextCodec, options: PipelineOptions): RolloutTrajectory {
  const m = options.memory;
  return {
    uid: question.id,
    sample,
    question,
    state: 'generating',
    doneReason: null,
    error: null,
    promptIds: codec.encode(renderPrompt(question.question, undefined, chatRendererFor(codec, options.rollout.chatTemplate))),
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

/** DONE, or ERROR for a tool or inference-server failure (excluded from advantages, docs/algorithm.md §5). */
export function handleDoneState(t: RolloutTrajectory, reason: DoneReason, hooks: AgentLoopHooks | undefined): void {
  t.state = reason === 'tool-error' || reason === 'backend-error' ? 'error' : 'done';
  t.doneReason = reason;
  t.pendingQuery = null;
  hooks?.onDone?.(t);
}
