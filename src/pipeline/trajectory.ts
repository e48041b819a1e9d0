/**
 * A trajectory while it is rolled out (docs/algorithm.md §1-§2): the contract's `Trajectory`
 * plus the live state only the agent loop reads, its context window (docs/algorithm.md §7) and
 * the search query or URL waiting for the tool, the pages it is reading (and, under
 * `tool.pageReading: 'queue'`, the chunks queued for its next rounds); and the transition into
 * DONE / ERROR.
 */
import {
  ACCESS_CLOSE, ACCESS_OPEN, ANSWER_CLOSE, ANSWER_OPEN, INFORMATION_CLOSE, INFORMATION_OPEN, MEM_CLOSE, MEM_OPEN, SEARCH_CLOSE, SEARCH_OPEN, THINK_CLOSE, THINK_OPEN,
} from '../protocol/tags';
import type { MemTagIds } from '../protocol/mem-tokens';
import { ACCESS_SYSTEM_PROMPT, SYSTEM_PROMPT, chatRendererFor, renderPrompt } from '../protocol/chat';
import { AgentMemory } from '../protocol/agent-memory';
import { resolveProtocolIds } from '../protocol/special-ids';
import { MempoError } from '../errors';
import type { DoneReason, Question, RoundTrace, TextCodec, Trajectory } from '../contracts';
import type { PipelineOptions } from '../options';

/** A page the trajectory has opened: its chunks and how many it has read (docs/algorithm.md §1). */
export interface PageCursor {
  chunks: string[];
  read: number;
}

/** An observation waiting to be shown (`tool.pageReading: 'queue'`): a page chunk (`shortText`, `page`) or a search result. */
export interface QueuedObservation {
  text: string;
  /** A page chunk's (or a no-page answer's) short text (docs/algorithm.md §7); absent for a search result. */
  shortText?: string;
  /** The chunk (1-based); null for a search result or a no-page answer. */
  page: number | null;
}

export interface RolloutTrajectory extends Trajectory {
  memory: AgentMemory;
  pendingQuery: string | null;
  /** The URL of the access waiting for the page tool. */
  pendingUrl: string | null;
  /** Pages opened so far, by URL: under 'cursor' each access of a URL reads its next chunk; under 'queue' the chunks are reused. */
  pages: Map<string, PageCursor>;
  /**
   * `tool.pageReading: 'queue'` (ASearcher's job queue): observations not shown yet, oldest first.
   * A round started while it is not empty is a reading round (docs/algorithm.md §1).
   */
  queued: QueuedObservation[];
}

export interface AgentLoopHooks {
  onRound?(t: Trajectory, round: RoundTrace): void;
  onDone?(t: Trajectory): void;
}

/** What the loop needs from the tokenizer to read rounds (docs/algorithm.md §1, "Tags are text"). */
export interface ProtocolIds {
  /** The ids of `<mem>` / `</mem>` when each is one token: the fast path of `locateMem`; else undefined (tags read as text). */
  memTags: MemTagIds | undefined;
  /** Ids that end a round without a stop tag (eos, end-of-turn): dropped before the round's text is parsed. */
  endOfRound: ReadonlySet<number>;
}

/** The tags the loop reads or writes; a tokenizer must encode each of them as text. */
const PROTOCOL_TAGS = [MEM_OPEN, MEM_CLOSE, THINK_OPEN, THINK_CLOSE, SEARCH_OPEN, SEARCH_CLOSE, ACCESS_OPEN, ACCESS_CLOSE, ANSWER_OPEN, ANSWER_CLOSE, INFORMATION_OPEN, INFORMATION_CLOSE];

/** A tag's id when it is one token that decodes to exactly the tag. */
function singleTokenId(codec: TextCodec, tag: string): number | undefined {
  const id = codec.tokenId(tag);
  return id !== undefined && codec.decode([id]) === tag ? id : undefined;
}

export function protocolIds(codec: TextCodec): ProtocolIds {
  for (const tag of PROTOCOL_TAGS) {
    const back = codec.decode(codec.encode(tag));
    if (back !== tag) {
      throw new MempoError('ERR_TOKENIZER_PROTOCOL', `The tokenizer cannot encode the agent protocol's tag ${tag}: its ids decode to ${JSON.stringify(back)}`);
    }
  }
  const open = singleTokenId(codec, MEM_OPEN);
  const close = singleTokenId(codec, MEM_CLOSE);
  return {
    memTags: open !== undefined && close !== undefined ? { open, close } : undefined,
    endOfRound: new Set(resolveProtocolIds(codec).endOfRoundIds),
  };
}

/** The agent's system message: the user's, else mempo's for the tools it has (docs/algorithm.md §1). */
export function agentSystemPrompt(options: Pick<PipelineOptions, 'rollout' | 'tool'>): string {
  return options.rollout.systemPrompt ?? (options.tool.access ? ACCESS_SYSTEM_PROMPT : SYSTEM_PROMPT);
}

export function newTrajectory(question: Question, sample: number, codec: TextCodec, options: PipelineOptions): RolloutTrajectory {
  const m = options.memory;
  const systemPrompt = agentSystemPrompt(options);
  return {
    uid: question.id,
    sample,
    question,
    state: 'generating',
    doneReason: null,
    error: null,
    promptIds: codec.encode(renderPrompt(question.question, systemPrompt, chatRendererFor(codec, options.rollout.chatTemplate))),
    responseIds: [],
    responseMask: [],
    oldLogp: [],
    hasLogprobs: true,
    rounds: [],
    memory: new AgentMemory(question.question, {
      systemPrompt,
      windowToolResults: m.windowToolResults,
      searchShortTextChars: m.searchShortTextChars,
      webpageShortTextChars: m.webpageShortTextChars,
    }),
    pendingQuery: null,
    pendingUrl: null,
    pages: new Map(),
    queued: [],
  };
}

/** DONE, or ERROR for a tool or inference-server failure (excluded from advantages, docs/algorithm.md §5). */
export function handleDoneState(t: RolloutTrajectory, reason: DoneReason, hooks: AgentLoopHooks | undefined): void {
  t.state = reason === 'tool-error' || reason === 'backend-error' ? 'error' : 'done';
  t.doneReason = reason;
  t.pendingQuery = null;
  t.pendingUrl = null;
  hooks?.onDone?.(t);
}
