import { checkOptions, checkTyped, optNumber, typeError } from '../validate';

/**
 * Final advantage (docs/algorithm.md §5): outcome + alpha · memory on response tokens (mask ≠ 0), 0 elsewhere.
 * All three arrays are [B*T]; alpha defaults to 1.
 */
export function finalAdvantage(
  outcome: Float32Array,
  memory: Float32Array,
  responseMask: Uint8Array,
  opts?: { alpha?: number },
): Float32Array {
  if (!(outcome instanceof Float32Array)) throw typeError('Float32Array of length B*T', 'outcome', outcome);
  const n = outcome.length;
  checkTyped(memory, Float32Array, 'memory', n, `B*T = ${n} (the length of outcome)`);
  checkTyped(responseMask, Uint8Array, 'responseMask', n, `B*T = ${n} (the length of outcome)`);
  const o = checkOptions(opts, 'opts', ['alpha']);
  const alpha = optNumber(o, 'alpha', 'opts', 1, Number.isFinite, 'a finite number');
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) if (responseMask[i] !== 0) out[i] = outcome[i]! + alpha * memory[i]!;
  return out;
}
