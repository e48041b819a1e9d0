/**
 * Snapshots (docs/algorithm.md §2): for every round r ≥ 2 with a closed `<mem>`, the full
 * context (everything before the round) and the memory context (the prompt and the round up to
 * `</mem>`), with the answer target both are scored against (docs/algorithm.md §4).
 */
import type { RoundTrace, Snapshot, TextCodec, Trajectory } from '../contracts';
import type { PipelineOptions } from '../options';

/** docs/algorithm.md §4 target: template with the gold filled in, the gold's tokens marked (prefix/answer/suffix tokenised apart). */
export function answerTarget(gold: string, template: string, codec: TextCodec): { targetIds: number[]; ansMask: Uint8Array } {
  const [prefix = '', suffix = ''] = template.split('{answer}');
  const p = prefix.length ? codec.encode(prefix) : [];
  const a = codec.encode(gold);
  const s = suffix.length ? codec.encode(suffix) : [];
  const targetIds = [...p, ...a, ...s];
  const ansMask = new Uint8Array(targetIds.length);
  ansMask.fill(1, p.length, p.length + a.length);
  return { targetIds, ansMask };
}

/** [decided] docs/algorithm.md §4: which gold fills the target. */
export function pickGold(golds: readonly string[], rule: 'first' | 'shortest' | 'longest'): string {
  if (rule === 'first') return golds[0]!;
  return golds.reduce((best, g) => ((rule === 'shortest' ? g.length < best.length : g.length > best.length) ? g : best));
}

/** [decided] docs/algorithm.md §2: the round's mem span in the response, [start, end), or null when `<mem>` is not closed. */
export function memSpan(r: RoundTrace, mode: 'inclusive' | 'content'): [number, number] | null {
  if (r.memOpen === null || r.memClose === null) return null;
  return mode === 'inclusive' ? [r.memOpen, r.memClose + 1] : [r.memOpen + 1, r.memClose];
}

/** Snapshots of one batch: rounds r ≥ 2 with a closed, non-empty mem span, of trajectories that did not fail. */
export function buildSnapshots(trajectories: readonly Trajectory[], codec: TextCodec, options: PipelineOptions): Snapshot[] {
  const m = options.memory;
  const out: Snapshot[] = [];
  trajectories.forEach((t, row) => {
    if (t.state === 'error') return;
    const target = answerTarget(pickGold(t.question.golds, m.gold), m.answerTemplate, codec);
    for (const r of t.rounds) {
      const span = r.index < 2 ? null : memSpan(r, m.memSpan);
      if (span === null || span[1] <= span[0]) continue;
      const prev = t.rounds[r.index - 2]!;
      const lastObs = m.memContextIncludesLastObservation && prev.observation !== null
        ? t.responseIds.slice(prev.observation.start, prev.observation.end)
        : [];
      out.push({
        trajectory: t,
        row,
        round: r.index,
        fullContext: [...t.promptIds, ...t.responseIds.slice(0, r.start)],
        memContext: [...t.promptIds, ...lastObs, ...t.responseIds.slice(r.start, r.memClose! + 1)],
        span,
        targetIds: target.targetIds,
        ansMask: target.ansMask,
      });
    }
  });
  return out;
}
