/** The pipeline's records, from a question to the trainer's batch (docs/algorithm.md §1-§8). Imports only ./engines. */
import type { GenerationFinish } from './engines';

/** One question (a questions.jsonl line); src/io/questions.ts checks its zod schema agrees. */
export interface Question {
  id: string;
  question: string;
  golds: string[];
  hops?: number;
  objectives?: number;
  kind?: string;
  /** A page question: the 0-based hop of `chains[0]` whose fact is stated on its subject's page only. */
  pageHop?: number;
  /** A page question: the 1-based chunk of that page which states the fact. */
  pageChunk?: number;
  /** The question's chains of hops (the embedded world's records name each hop's subject and object). */
  chains?: Array<Array<{ subject: string; relation: string; object: string }>>;
}

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

/** A breach of the round grammar (src/protocol/round.ts names the codes). */
export interface RoundViolation {
  code: string;
  message: string;
}

export interface ObservationTrace {
  /** [start, end) of the observation segment ("\n<information>…</information>\n") in the response. */
  start: number;
  end: number;
  /** The `<information>` block as the tool rendered it. */
  text: string;
  /** Cut to fit the response budget. */
  truncated: boolean;
  /** A webpage chunk's short text (docs/algorithm.md §7: what later memory windows show of it); absent after a search. */
  shortText?: string;
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
  /**
   * `--context memory` only: the exact ids the round was sampled from (docs/algorithm.md §7
   * window, not a prefix of the trajectory). Under `full` the context is promptIds + responseIds[0, start).
   */
  contextIds?: number[];
  finishReason: GenerationFinish;
  action: 'search' | 'access' | 'answer' | null;
  query: string | null;
  /** The URL of an `<access>` round (an agent with the page tool); absent otherwise. */
  url?: string;
  /** The chunk of the page the access showed (1-based; 1: the page was opened); absent when it showed none. Under `tool.pageReading: 'queue'` the chunk any round's observation showed. */
  page?: number;
  /**
   * `tool.pageReading: 'queue'`: the round started while chunks of a page were queued (docs/algorithm.md
   * §1, a reading round: `<mem>`, `<think>`, no action; it stops at `</think>` and its observation is
   * the next queued chunk). Absent otherwise.
   */
  reading?: true;
  answer: string | null;
  violations: RoundViolation[];
  /**
   * docs/algorithm.md §1 (tags are text): response positions of the first token of this round's
   * `<mem>` and of the token that completes its `</mem>` (the single tag tokens when the tags
   * are one token each), or null when the round has no closed `<mem>`.
   */
  memOpen: number | null;
  memClose: number | null;
  /** [start, end) of the tokens covering the text between the tags (empty when it is), or null. */
  memContent: [number, number] | null;
  observation: ObservationTrace | null;
}

/** One sample of a question's group: what the rollout produced (docs/algorithm.md §1-§2). */
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
}

/** The two contexts of round r ≥ 2 whose answer probabilities give its memory reward (docs/algorithm.md §2). */
export interface Snapshot {
  trajectory: Trajectory;
  /** Index into the batch's trajectory list. */
  row: number;
  /** 1-based round. */
  round: number;
  /** Prompt + all previous response tokens (a prefix of the trajectory). */
  fullContext: number[];
  /** promptIds + the round's tokens up to and including the token that completes `</mem>`. */
  memContext: number[];
  /** The mem span in the response, [start, end), per `memory.memSpan`. */
  span: [number, number];
  targetIds: number[];
  ansMask: Uint8Array;
}

/** docs/algorithm.md §4: the memory reward of one round and the two probabilities it is made of. */
export interface RoundRewards {
  memReward: number;
  pFull: number;
  pMem: number;
}

/** A trajectory with its outcome reward, memory rewards and advantages (before the batch record). */
export interface ScoredTrajectory {
  trajectory: Trajectory;
  text: string;
  score: number | null;
  formatValid: boolean;
  formatReason: string | null;
  /** The 1-based round of the first format error (0: no round at all); null when the format is valid. */
  formatRound: number | null;
  /** Per round (index r-1): the memory reward, or null. */
  roundRewards: Array<RoundRewards | null>;
  /** Per response token. Zero for excluded trajectories. */
  outcomeAdvantage: Float32Array;
  memoryAdvantage: Float32Array;
  advantages: Float32Array;
  excluded: boolean;
}

export interface BatchRound {
  /** 1-based. */
  index: number;
  /** [start, end) of the round's generated tokens in the response. */
  start: number;
  end: number;
  /** [start, end) of the round's mem span (per `memory.memSpan`), or null when not closed. */
  memSpan: [number, number] | null;
  memReward: number | null;
  pFull: number | null;
  pMem: number | null;
  action: 'search' | 'access' | 'answer' | null;
  query: string | null;
  /** The URL of an `<access>` round; absent otherwise. */
  url?: string;
  /** The chunk of the page the access showed (1-based); absent when it showed none. */
  page?: number;
  /** A reading round (`tool.pageReading: 'queue'`, docs/algorithm.md §1): it read a queued chunk and had no action to take. */
  reading?: true;
  answer: string | null;
  violations: RoundViolation[];
  finishReason: string;
  contextTokens: number;
  /** `--context memory` only: the exact ids the round was sampled from (see `roundContextIds`, src/pipeline/batch.ts). */
  contextIds?: number[];
  /** [start, end) of the observation segment that followed, or null. */
  observation: { start: number; end: number; truncated: boolean } | null;
}

/** One trajectory as the trainer reads it: a batch.jsonl line (docs/algorithm.md §8). */
export interface BatchRecord {
  uid: string;
  sample: number;
  question: string;
  golds: string[];
  hops: number | null;
  objectives: number | null;
  promptIds: number[];
  responseIds: number[];
  responseMask: number[];
  /** Sampling log-prob per response token (0 on observations); null when the generator gave none. */
  oldLogp: number[] | null;
  rounds: BatchRound[];
  /** Outcome reward (docs/algorithm.md §3); null when the trajectory was excluded. */
  score: number | null;
  formatValid: boolean;
  formatReason: string | null;
  outcomeAdvantage: number[];
  memoryAdvantage: number[];
  /** outcome + alpha · memory on response tokens (docs/algorithm.md §5). */
  advantages: number[];
  text: string;
  doneReason: DoneReason | null;
  /** A tool failure, or a failed request / scoring item on the inference server ('backend-error'), naming the server and the item: the trajectory is excluded from advantages. */
  error: string | null;
  excluded: boolean;
}
