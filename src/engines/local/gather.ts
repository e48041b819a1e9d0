/** Signature of the log-prob gathering kernel (`gatherLogProbs` in src/scoring). */
export type GatherFn = (logits: Float32Array, targets: Int32Array, rows: number, vocab: number) => Float32Array;
