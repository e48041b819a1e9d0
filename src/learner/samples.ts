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

/** What one /forward may hold (the learner's /info `limits`; docs/learner.md, "Limits of a request"). */
export interface RequestLimits {
  maxForwardTokens: number;
  maxForwardSamples: number;
  /** Padded tokens (rows × longest) a forward with grad keeps until backward. */
  maxGraphTokens: number;
}

/** The `limits` of an /info answer, or undefined for a learner that announces none. */
export function checkLimits(j: Record<string, unknown>, name: string): RequestLimits | undefined {
  const l = j['limits'];
  if (l === undefined || l === null) return undefined;
  const what = `${name} GET /info: limits`;
  if (typeof l !== 'object' || Array.isArray(l)) throw new MempoError('ERR_LEARNER', `${what}: expected an object, received ${JSON.stringify(l)}`);
  const o = l as Record<string, unknown>;
  const size = (k: string) => {
    const v = o[k];
    if (!Number.isInteger(v) || (v as number) < 1) throw new MempoError('ERR_LEARNER', `${what}.${k}: expected a positive integer, received ${JSON.stringify(v)}`);
    return v as number;
  };
  return { maxForwardTokens: size('max_forward_tokens'), maxForwardSamples: size('max_forward_samples'), maxGraphTokens: size('max_graph_tokens') };
}

/**
 * Consecutive groups of samples each within the learner's limits: at most `maxForwardSamples`
 * samples and `maxForwardTokens` ids, and with `grad` at most `maxGraphTokens` padded tokens,
 * counted as rows × longest (the learner's own chunks pad no more). A sample that fits in no group
 * is an error naming it and the limit.
 */
export function splitToLimits<T extends { ids: ArrayLike<number> }>(samples: readonly T[], limits: RequestLimits, grad: boolean): T[][] {
  const out: T[][] = [];
  let cur: T[] = [];
  let tokens = 0;
  let longest = 0;
  samples.forEach((s, i) => {
    const n = s.ids.length;
    if (n > limits.maxForwardTokens || (grad && n > limits.maxGraphTokens)) {
      const [limit, name] = grad && limits.maxGraphTokens < limits.maxForwardTokens ? [limits.maxGraphTokens, 'max_graph_tokens'] : [limits.maxForwardTokens, 'max_forward_tokens'];
      throw new MempoError('ERR_INVALID_ARGUMENT', `Expected at most ${limit} ids (the learner's ${name}) for sample ${i} but received ${n}`);
    }
    const top = Math.max(longest, n);
    if (cur.length > 0 && (cur.length + 1 > limits.maxForwardSamples || tokens + n > limits.maxForwardTokens || (grad && top * (cur.length + 1) > limits.maxGraphTokens))) {
      out.push(cur);
      cur = [];
      tokens = 0;
    }
    cur.push(s);
    tokens += n;
    longest = cur.length === 1 ? n : Math.max(longest, n);
  });
  if (cur.length > 0) out.push(cur);
  return out;
}
