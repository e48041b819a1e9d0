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
import { MempoError } from '../errors';
import type { Question } from '../contracts';
import { mixSeed } from '../rng';
import { newTrajectory, protocolIds, type RolloutTrajectory } from './trajectory';
import { newLoopStats, type AgentLoopInput, type AgentLoopStats, type Loop } from './loop-state';
import { handleGeneratingState } from './generating';
import { handleToolCallingState } from './tool-calling';

export type { AgentLoopHooks, RolloutTrajectory } from './trajectory';
export { newLoopStats, type AgentLoopInput, type AgentLoopStats } from './loop-state';

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
