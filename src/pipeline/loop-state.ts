/** What the agent loop (rollout.ts) takes, counts, and shares between its state handlers (generating.ts, tool-calling.ts). */
import type { Generator, Question, Retriever, TextCodec } from '../contracts';
import type { PipelineOptions } from '../options';
import type { AgentLoopHooks, ProtocolIds, RolloutTrajectory } from './trajectory';

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
export interface Loop {
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

export const newLoopStats = (): AgentLoopStats => ({ steps: 0, rounds: 0, generatedTokens: 0, observationTokens: 0, searches: 0, accesses: 0, pagesOpened: 0, toolErrors: 0, backendErrors: 0, generateMs: 0, toolMs: 0 });
