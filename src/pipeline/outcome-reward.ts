/**
 * Outcome reward of each trajectory (docs/algorithm.md §3): the format-gated score of its
 * decoded response. Trajectories that failed (tool or inference server) get none and are
 * excluded from advantages.
 */
import { EOS_TOKEN, IM_END, IM_START } from '../protocol/tags';
import { computeScore, validateFormat } from '../kernels/outcome-reward';
import type { ScoredTrajectory, TextCodec, Trajectory } from '../contracts';
import type { PipelineOptions } from '../options';

const SPECIAL_TEXT_RE = new RegExp([EOS_TOKEN, IM_END, IM_START].map((s) => s.replace(/[|]/g, '\\|')).join('|'), 'g');

/** The response text the outcome reward reads: the decoded response without eos / chat markers. */
export function scoringText(text: string): string {
  return text.replace(SPECIAL_TEXT_RE, '');
}

/** The trajectory with its outcome reward and format check; memory rewards and advantages still empty. */
export function outcomeReward(t: Trajectory, codec: TextCodec, options: PipelineOptions): ScoredTrajectory {
  const text = codec.decode(t.responseIds);
  const clean = scoringText(text);
  const access = options.tool.access;
  // Reading rounds (tool.pageReading 'queue') are known to the rollout, not to the text.
  const reading = t.rounds.flatMap((r) => (r.reading === true ? [r.index] : []));
  const fmt = validateFormat(clean, { requireAnswer: options.reward.requireAnswer, access, reading });
  const excluded = t.state === 'error';
  const { budgetScore, ...reward } = options.reward;
  // A budget cut leaves its last tag (often an observation) open: with budgetScore it is scored as the
  // unfinished answer it is, apart from the model's own format breaks (formatScore).
  const cut = budgetScore !== null && t.doneReason === 'response-budget';
  const score = excluded ? null : cut ? budgetScore : computeScore(clean, t.question.golds, { ...reward, access, reading });
  const n = t.responseIds.length;
  return {
    trajectory: t,
    text,
    score,
    formatValid: fmt.valid,
    formatReason: fmt.valid ? null : fmt.reason,
    formatRound: fmt.valid ? null : fmt.round,
    roundRewards: t.rounds.map(() => null),
    outcomeAdvantage: new Float32Array(n),
    memoryAdvantage: new Float32Array(n),
    advantages: new Float32Array(n),
    excluded,
  };
}
