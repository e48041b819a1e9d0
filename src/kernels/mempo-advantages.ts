import type { NativeAddon } from './addon';
import { nativeAddon } from './backend';
import { denseGroups, pairGroups, type DenseGroups } from './groups';
import { checkFiniteVector, checkOptions, checkSize, checkTyped, optBoolean, optEnum, optNumber, typeError } from '../validate';
import { checkGroupRange, groupNormalize } from './group-normalize';
import { checkSpans, type MemGrouping } from './memory-advantage';
import { checkOut, checkResultSize, newResult } from './result';

export interface MempoAdvantagesInput {
  /** Outcome scores of the B trajectories (docs/algorithm.md §3). */
  scores: Float32Array | Float64Array | number[];
  /** Group (uid) of each trajectory, length B. */
  groups: ArrayLike<number | string>;
  /** Response mask, Uint8Array[B*seqLen]. */
  responseMask: Uint8Array;
  seqLen: number;
  /** The M memory rewards (§4), their groups (uids) and their spans Int32Array[M*3] of (row, start, end). */
  memRewards: Float32Array | Float64Array | number[];
  memGroups: ArrayLike<number | string>;
  spans: Int32Array;
  /** Added to the std before dividing (default 1e-6). */
  eps?: number;
  /** Divide by the group's std (default true). */
  normByStd?: boolean;
  /** As memoryAdvantage's: 'question' (default) or 'question-round' (needs rounds). */
  memGrouping?: MemGrouping;
  rounds?: Int32Array;
  /** final = outcome + alpha · memory (default 1). */
  alpha?: number;
  /**
   * Caller-owned results, each a Float32Array[B*seqLen] overwritten whole and returned (a
   * trainer reuses them per micro-batch: no allocation). No two share memory, nor any with an input.
   */
  out?: MempoAdvantages;
}

/** The three advantages of a batch, each Float32Array[B*seqLen]. */
export interface MempoAdvantages {
  outcome: Float32Array;
  memory: Float32Array;
  final: Float32Array;
}

/** The native export behind this kernel (native/napi/advantage_stage.cc). */
type StageAddon = NativeAddon & {
  mempoAdvantages?(
    scores: Float64Array, groups: Int32Array, groupCount: number, responseMask: Uint8Array, rows: number, cols: number,
    memRewards: Float64Array, memGroups: Int32Array, memGroupCount: number, spans: Int32Array,
    eps: number, normByStd: boolean, alpha: number, outcome?: Float32Array, memory?: Float32Array, final?: Float32Array,
  ): MempoAdvantages;
};

const KNOWN = ['scores', 'groups', 'responseMask', 'seqLen', 'memRewards', 'memGroups', 'spans', 'eps', 'normByStd', 'memGrouping', 'rounds', 'alpha', 'out'];

/** input.out checked: three Float32Array[n], apart from each other and from the inputs. */
function givenResults(o: Record<string, unknown>, n: number, shape: string): MempoAdvantages | undefined {
  if (o.out === undefined) return undefined;
  if (typeof o.out !== 'object' || o.out === null || ArrayBuffer.isView(o.out) || Array.isArray(o.out)) throw typeError('an object { outcome, memory, final } of Float32Arrays', 'input.out', o.out);
  const r = checkOptions(o.out, 'input.out', ['outcome', 'memory', 'final']);
  const inputs = { scores: o.scores, groups: o.groups, responseMask: o.responseMask, memRewards: o.memRewards, memGroups: o.memGroups, spans: o.spans, 'input.rounds': o.rounds };
  const outcome = checkOut(r.outcome, 'input.out.outcome', n, shape, inputs);
  const memory = checkOut(r.memory, 'input.out.memory', n, shape, { ...inputs, 'input.out.outcome': outcome });
  const final = checkOut(r.final, 'input.out.final', n, shape, { ...inputs, 'input.out.outcome': outcome, 'input.out.memory': memory });
  return { outcome, memory, final };
}

/** memGroups as memoryAdvantage groups them: by uid, or by (uid, round) for 'question-round'. */
function memoryGroups(o: Record<string, unknown>, M: number): DenseGroups {
  const g = denseGroups(o.memGroups, 'memGroups', M, `M = ${M}`);
  const grouping = optEnum(o, 'memGrouping', 'input', ['question', 'question-round'] as const, 'question');
  if (o.rounds === undefined && grouping !== 'question-round') return g;
  if (o.rounds === undefined) throw typeError(`Int32Array of length M = ${M} (memGrouping 'question-round' needs it)`, 'input.rounds', undefined);
  const rounds = checkTyped(o.rounds, Int32Array, 'input.rounds', M, `M = ${M}`);
  return grouping === 'question-round' ? pairGroups(g.ids, rounds) : g;
}

/**
 * The outcome, memory and final advantages of one batch in one call (docs/algorithm.md §5): the
 * results of grpoOutcomeAdvantage, memoryAdvantage and finalAdvantage on the same inputs, bit for
 * bit, with each [B, T] result written once (native: one pass per row, no zero-filled memory
 * array to add afterwards). input.out receives them in place of new arrays.
 */
export function mempoAdvantages(input: MempoAdvantagesInput): MempoAdvantages {
  if (typeof input !== 'object' || input === null) throw typeError('an object { scores, groups, responseMask, seqLen, memRewards, memGroups, spans, … }', 'input', input);
  const o = checkOptions(input, 'input', KNOWN);
  const T = checkSize(o.seqLen, 'seqLen');
  const s = checkFiniteVector(o.scores, 'scores', null, 'B');
  const B = s.length;
  checkResultSize(B * T, 'B*seqLen', `${B}*${T}`);
  const g = denseGroups(o.groups, 'groups', B, `B = ${B}`);
  const mask = checkTyped(o.responseMask, Uint8Array, 'responseMask', B * T, `B*T = ${B * T}`);
  const r = checkFiniteVector(o.memRewards, 'memRewards', null, 'M');
  const M = r.length;
  const spans = checkTyped(o.spans, Int32Array, 'spans', M * 3, `M*3 = ${M * 3}`);
  const mg = memoryGroups(o, M);
  const eps = optNumber(o, 'eps', 'input', 1e-6, (v) => v >= 0 && Number.isFinite(v), 'a finite number >= 0');
  const normByStd = optBoolean(o, 'normByStd', 'input', true);
  const alpha = optNumber(o, 'alpha', 'input', 1, Number.isFinite, 'a finite number');
  checkSpans(spans, M, B, T);
  const n = B * T;
  const given = givenResults(o, n, `B*T = ${n}`);
  checkGroupRange(s, g.ids, g.count, eps, normByStd, 'scores');
  checkGroupRange(r, mg.ids, mg.count, eps, normByStd, 'memRewards');

  const addon = nativeAddon() as StageAddon | null;
  if (addon?.mempoAdvantages) {
    return addon.mempoAdvantages(s, g.ids, g.count, mask, B, T, r, mg.ids, mg.count, spans, eps, normByStd, alpha, given?.outcome, given?.memory, given?.final);
  }

  // The JS twin: the three kernels' own loops, so it is the separate path by construction.
  const ao = groupNormalize(s, g.ids, g.count, eps, normByStd);
  const am = groupNormalize(r, mg.ids, mg.count, eps, normByStd);
  const outcome = given?.outcome ?? newResult(n);
  const memory = given?.memory.fill(0) ?? newResult(n);
  const final = given?.final ?? newResult(n);
  for (let b = 0; b < B; b++) {
    const a = ao[b]!;
    for (let t = b * T; t < (b + 1) * T; t++) outcome[t] = mask[t] !== 0 ? a : 0;
  }
  for (let m = 0; m < M; m++) {
    const base = spans[3 * m]! * T;
    memory.fill(am[m]!, base + spans[3 * m + 1]!, base + spans[3 * m + 2]!);
  }
  for (let i = 0; i < n; i++) final[i] = mask[i] !== 0 ? outcome[i]! + alpha * memory[i]! : 0;
  return { outcome, memory, final };
}
