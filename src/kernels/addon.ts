/**
 * The native addon's surface (registered in native/binding.cc, defined in native/napi).
 * Arguments arrive already validated by the TypeScript wrappers; the C++ side re-checks shapes
 * as a backstop and never trusts them.
 */

/**
 * The integer codes of the addon's enum arguments: the TypeScript half of the one table per side
 * of the addon boundary (the C++ half is native/enums.h; test/kernels/native-sources.test.ts
 * checks that the two agree). docs/algorithm.md §6.
 */
export const AGG_MODE_CODES = { 'token-mean': 0, 'seq-mean-token-sum': 1, 'seq-mean-token-mean': 2 } as const;
/** klType codes; 'none' when there is no reference policy, 'k3' and 'low_var_kl' are one estimator. */
export const KL_TYPE_CODES = { none: 0, k1: 1, k2: 2, k3: 3, low_var_kl: 3 } as const;
export type AggModeCode = (typeof AGG_MODE_CODES)[keyof typeof AGG_MODE_CODES];
export type KlTypeCode = (typeof KL_TYPE_CODES)[keyof typeof KL_TYPE_CODES];

export interface NativeAddon {
  /** `logits` may also be a DeviceBuffer (CUDA builds): logits kept in device memory across calls. */
  gatherLogProbs(logits: Float32Array | NativeDeviceBuffer, targets: Int32Array, rows: number, vocab: number): Float32Array;
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
    /** The caller's result, overwritten whole and returned; absent: a new array. */
    out?: Float32Array,
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
    /** The caller's result, overwritten whole and returned; absent: a new array. */
    out?: Float32Array,
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
    aggMode: AggModeCode,
    refLogp: Float32Array | null,
    klCoef: number,
    klType: KlTypeCode,
    /** The mini-batch's token or sequence count to divide by; absent or 0: this call's (§6). */
    globalNorm?: number,
  ): { loss: number; grad: Float32Array; clipFrac: number; approxKl: number; kl: number };
  readBandwidth(buffer: Float32Array, repeats: number): number;
  info(): NativeInfo;
  /**
   * Where the kernels run: 'cpu', 'cuda' (throws, with the CUDA error text, when no device is
   * usable or the build has no CUDA) or 'auto' (CUDA when usable and MEMPO_DEVICE is not 'cpu').
   * Absent from addons built before the CUDA work.
   */
  setDevice?(device: 'cpu' | 'cuda' | 'auto'): void;
  /** Present only in CUDA builds (CMakeLists.txt with MEMPO_CUDA=ON, scripts/build-cuda.sh). */
  DeviceBuffer?: new (data: Float32Array) => NativeDeviceBuffer;
}

export interface NativeInfo {
  /** CPU SIMD path of the CPU kernels ('avx512': gatherLogProbs and the advantages' writes, the others use AVX2 | 'avx2' | 'scalar'; MEMPO_SIMD caps it) and their thread count. */
  simd: string;
  threads: number;
  /** True when this is a CUDA build and a CUDA device is usable. */
  cuda: boolean;
  /** True for a CUDA build (whether or not a device is present). */
  cudaBuilt: boolean;
  /** Where the native kernels run now. */
  device: 'cpu' | 'cuda';
  /** Name of the CUDA device in use, when cuda is true. */
  deviceName?: string;
  /** Why CUDA is not usable (CUDA error text, or "this build has no CUDA support ..."), when cuda is false. */
  cudaError?: string;
}

/** A Float32Array uploaded once to device memory (native/cuda/README.md). */
export interface NativeDeviceBuffer {
  readonly length: number;
  readonly byteLength: number;
  /** True after free(). */
  readonly freed: boolean;
  /** Overwrite the device copy with data of the same length. */
  write(data: Float32Array): void;
  /** Copy the device data back to a new Float32Array. */
  toFloat32Array(): Float32Array;
  /** Release the device memory now (it is also released when the object is garbage-collected). */
  free(): void;
}
