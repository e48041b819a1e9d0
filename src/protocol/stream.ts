/**
 * The `full` policy response stream (docs/algorithm.md §2):
 * `round1 + "\n" + obs1 + "\n" + round2 + "\n" + obs2 + "\n" + … + roundR`, i.e. the observation
 * segment with response_mask 0 is `"\n" + obs + "\n"`; the context of round r is
 * `promptIds + ids(stream so far)`.
 */
import { SYSTEM_PROMPT, renderPrompt } from './chat';

/** Text inserted before an observation in the `full` policy response stream. */
export const OBSERVATION_PREFIX = '\n';
/** Text inserted after an observation in the `full` policy response stream. */
export const OBSERVATION_SUFFIX = '\n';

/** The `full`-policy stream segment for an observation: `"\n" + obs + "\n"`. */
export function observationSegment(observation: string): string {
  return `${OBSERVATION_PREFIX}${observation}${OBSERVATION_SUFFIX}`;
}

/**
 * Response stream text (`full` policy) from round texts and the observations that followed
 * them (`observations[i]` follows `rounds[i]`; the last round may have none).
 */
export function renderFullStream(rounds: readonly string[], observations: readonly string[]): string {
  let s = '';
  rounds.forEach((r, i) => {
    s += r;
    const o = observations[i];
    if (o !== undefined) s += observationSegment(o);
  });
  return s;
}

/** Text of the `full` policy context at a round: prompt + stream so far. */
export function renderFullContext(
  question: string,
  prevRounds: readonly string[],
  prevObservations: readonly string[],
  systemPrompt: string = SYSTEM_PROMPT,
): string {
  return renderPrompt(question, systemPrompt) + renderFullStream(prevRounds, prevObservations);
}
