/**
 * The native addon's surface (native/binding.cc). Arguments arrive already validated by the
 * TypeScript wrappers; the C++ side re-checks shapes as a backstop and never trusts them.
 */
export interface NativeAddon {
  gatherLogProbs(logits: Float32Array, targets: Int32Array, rows: number, vocab: number): Float32Array;
  answerProbability(logp: Float32Array, ansMask: Uint8Array, rows: number, cols: number, threshold: number): Float32Array;
  grpoOutcomeAdvantage(
    scores: Float64Array,
    groups: Int32Array,
    groupCount: number,
    responseMask: Uint8Array,
    rows: number,
    cols: number,
    eps: number,
    normByStd: boolean,
  ): Float32Array;
  memoryAdvantage(
    memRewards: Float64Array,
    groups: Int32Array,
    groupCount: number,
    spans: Int32Array,
    rows: number,
    cols: number,
    eps: number,
    normByStd: boolean,
  ): Float32Array;
  ppoPolicyLoss(
    logp: Float32Array,
    oldLogp: Float32Array,
    advantages: Float32Array,
    mask: Uint8Array,
    rows: number,
    cols: number,
    clipLow: number,
    clipHigh: number,
    clipC: number,
    aggMode: number,
    refLogp: Float32Array | null,
    klCoef: number,
    klType: number,
  ): { loss: number; grad: Float32Array; clipFrac: number; approxKl: number; kl: number };
  readBandwidth(buffer: Float32Array, repeats: number): number;
  info(): { simd: string; threads: number };
}
