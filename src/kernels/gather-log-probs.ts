import { nativeAddon } from './backend';
import { checkSize, checkTyped, rangeError } from '../validate';
import { newResult } from './result';

/**
 * log_softmax(logits[r])[targets[r]] for each row r, in one numerically stable pass (online
 * max and sum of exponentials, accumulated in double).
 * logits Float32Array[R*V] row-major, targets Int32Array[R] → Float32Array[R].
 *
 * Non-finite logits follow torch.log_softmax: a row containing NaN or +Infinity, or made only of
 * −Infinity, gives NaN; a −Infinity target logit in an otherwise finite row gives −Infinity.
 */
export function gatherLogProbs(logits: Float32Array, targets: Int32Array, rows: number, vocab: number): Float32Array {
  const R = checkSize(rows, 'rows', true);
  const V = checkSize(vocab, 'vocab');
  checkTyped(logits, Float32Array, 'logits', R * V, `rows*vocab = ${R * V}`);
  checkTyped(targets, Int32Array, 'targets', R, `rows = ${R}`);
  for (let r = 0; r < R; r++) {
    const t = targets[r]!;
    if (t < 0 || t >= V) throw rangeError(`a token id in [0, vocab = ${V})`, `targets[${r}]`, t);
  }
  const addon = nativeAddon();
  if (addon) return addon.gatherLogProbs(logits, targets, R, V);

  const out = newResult(R);
  for (let r = 0; r < R; r++) {
    const base = r * V;
    let max = -Infinity;
    let sum = 0;
    for (let v = 0; v < V; v++) {
      const x = logits[base + v]!;
      if (x > max) {
        sum = sum * Math.exp(max - x) + 1;
        max = x;
      } else if (x !== -Infinity) {
        sum += Math.exp(x - max); // NaN propagates
      }
    }
    out[r] = max === Infinity || max === -Infinity ? NaN : logits[base + targets[r]!]! - max - Math.log(sum);
  }
  return out;
}
