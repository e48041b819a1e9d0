/** Checks of what goes to and comes from a learner (docs/learner.md). */
import type { LearnerInfo, LearnerSample } from '../contracts';
import { MempoError } from '../errors';

export interface FlatSamples {
  ids: Int32Array;
  lengths: number[];
  targetStart: number[];
  /** Σ (length − targetStart): the number of log-probs the learner returns. */
  targets: number;
}

/**
 * Concatenates samples for /forward; a sample with no target or no context, or longer than
 * `maxContext` (the learner's, when known), is an error naming it.
 */
export function flattenSamples(samples: readonly LearnerSample[], maxContext?: number): FlatSamples {
  let total = 0;
  let targets = 0;
  samples.forEach((s, i) => {
    if (!Number.isInteger(s.targetStart) || s.targetStart < 1 || s.targetStart >= s.ids.length) {
      throw new MempoError('ERR_INVALID_ARGUMENT', `Expected 1 ≤ targetStart < ids.length for sample ${i} but received targetStart ${s.targetStart} with ${s.ids.length} ids`);
    }
    if (maxContext !== undefined && s.ids.length > maxContext) {
      throw new MempoError('ERR_INVALID_ARGUMENT', `Expected at most ${maxContext} ids (the learner's context) for sample ${i} but received ${s.ids.length}`);
    }
    total += s.ids.length;
    targets += s.ids.length - s.targetStart;
  });
  const ids = new Int32Array(total);
  let at = 0;
  samples.forEach((s, i) => {
    for (let k = 0; k < s.ids.length; k++) {
      const v = s.ids[k]!;
      if (!Number.isInteger(v) || v < 0 || v > 0x7fffffff) throw new MempoError('ERR_INVALID_ARGUMENT', `Expected token ids for sample ${i} but ids[${k}] is ${v}`);
      ids[at++] = v;
    }
  });
  return { ids, lengths: samples.map((s) => s.ids.length), targetStart: samples.map((s) => s.targetStart), targets };
}

export function checkNumber(v: unknown, what: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new MempoError('ERR_LEARNER', `${what}: expected a finite number, received ${JSON.stringify(v)}`);
  return v;
}

export function checkInfo(j: Record<string, unknown>, name: string): LearnerInfo {
  const what = `${name} GET /info`;
  if (j['protocol'] !== 1) throw new MempoError('ERR_LEARNER', `${what}: protocol ${JSON.stringify(j['protocol'])}, this mempo speaks protocol 1 (docs/learner.md)`);
  const str = (k: string) => (typeof j[k] === 'string' ? (j[k] as string) : String(j[k] ?? ''));
  const info: LearnerInfo = {
    protocol: 1,
    learner: str('learner'),
    model: str('model'),
    parameters: checkNumber(j['parameters'], `${what}: parameters`),
    device: str('device'),
    dtype: str('dtype'),
    step: checkNumber(j['step'], `${what}: step`),
  };
  if (typeof j['torch'] === 'string') info.torch = j['torch'];
  const context = j['max_context'];
  if (context !== undefined && context !== null) {
    if (!Number.isInteger(context) || (context as number) < 2) throw new MempoError('ERR_LEARNER', `${what}: max_context ${JSON.stringify(context)} is not a context length`);
    info.maxContext = context as number;
  }
  return info;
}
