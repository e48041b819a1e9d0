/**
 * Snapshots (docs/algorithm.md §2): for every round r ≥ 2 with a closed `<mem>`, the full
 * context (everything before the round) and the memory context (the prompt and the round up to
 * the token that completes `</mem>`, whatever `memSpan` says), with the answer target both are scored against (docs/algorithm.md §4).
 */
import type { RoundTrace, Snapshot, TextCodec, Trajectory } from '../contracts';
import { CharTokenMap } from '../protocol/char-map';
import { MempoError } from '../errors';
import type { PipelineOptions } from '../options';

/**
 * docs/algorithm.md §4 target: the template with the gold filled in and the gold's tokens marked.
 * `apart` (default) tokenises prefix / gold / suffix separately so the mask is exact; `whole`
 * tokenises the whole target, as the model would write it, and marks every token whose text
 * overlaps the gold's characters (a token straddling the gold's edge is in the mask).
 */
export function answerTarget(gold: string, template: string, codec: TextCodec, tokenization: 'apart' | 'whole' = 'apart'): { targetIds: number[]; ansMask: Uint8Array } {
  const [prefix = '', suffix = ''] = template.split('{answer}');
  if (tokenization === 'whole') {
    const text = prefix + gold + suffix;
    const targetIds = codec.encode(text);
    const back = codec.decode(targetIds);
    if (back !== text) {
      throw new MempoError('ERR_TOKENIZER_PROTOCOL', `memory.targetTokenization 'whole': the tokenizer does not give back the target ${JSON.stringify(text)} (its ids decode to ${JSON.stringify(back)}); use 'apart'`);
    }
    const [a, b] = new CharTokenMap(codec, targetIds, text).tokenRange(prefix.length, prefix.length + gold.length);
    const ansMask = new Uint8Array(targetIds.length);
    ansMask.fill(1, a, b);
    return { targetIds, ansMask };
  }
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

/** [decided] docs/algorithm.md §1: the round's mem span in the response, [start, end), or null when `<mem>` is not closed. */
export function memSpan(r: RoundTrace, mode: 'inclusive' | 'content'): [number, number] | null {
  if (r.memOpen === null || r.memClose === null || r.memContent === null) return null;
  return mode === 'inclusive' ? [r.memOpen, r.memClose + 1] : [r.memContent[0], r.memContent[1]];
}

/** Snapshots of one batch: rounds r ≥ 2 with a closed, non-empty mem span, of trajectories that did not fail. */
export function buildSnapshots(trajectories: readonly Trajectory[], codec: TextCodec, options: PipelineOptions): Snapshot[] {
  const m = options.memory;
  const out: Snapshot[] = [];
  trajectories.forEach((t, row) => {
    if (t.state === 'error') return;
    const target = answerTarget(pickGold(t.question.golds, m.gold), m.answerTemplate, codec, m.targetTokenization);
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
