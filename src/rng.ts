/**
 * Seeded random numbers for sampling: sfc32 seeded through splitmix32. Every sequence gets its
 * own stream derived from (seed, sequence index), so a sequence's samples do not depend on which
 * other sequences share its batch.
 */
export type Rng = () => number;

function splitmix32(state: { s: number }): number {
  state.s = (state.s + 0x9e3779b9) | 0;
  let z = state.s;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
}

/** A generator of floats in [0, 1) determined by `seed` and `stream`. */
export function createRng(seed: number, stream = 0): Rng {
  const st = { s: (Math.floor(seed) ^ Math.imul(stream + 1, 0x27d4eb2f)) | 0 };
  // Mix the high part of large seeds in as well.
  st.s = (st.s ^ Math.floor(seed / 4294967296)) | 0;
  let a = splitmix32(st);
  let b = splitmix32(st);
  let c = splitmix32(st);
  let d = 1;
  const next = (): number => {
    const t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return (t >>> 0) / 4294967296;
  };
  for (let i = 0; i < 12; i++) next();
  return next;
}

/**
 * mulberry32: one 32-bit state, floats in [0, 1). The generator of the world (tools/world), of
 * test inputs and of the benchmarks' inputs; its sequences are frozen because data/world and
 * models/mempo-tiny's tokenizer regenerate byte-identically from them.
 */
export function mulberry32(seed: number): Rng {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** mulberry32 with the draws the world generator makes: integers, picks, chances, shuffles. */
export class SeededRandom {
  /** Uniform in [0, 1); the same sequence as `mulberry32(seed)`. */
  readonly next: Rng;
  constructor(seed: number) {
    this.next = mulberry32(seed);
  }
  /** Integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(xs: readonly T[]): T {
    if (xs.length === 0) throw new Error('pick from empty array');
    return xs[this.int(xs.length)] as T;
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  /** Fisher–Yates in place. */
  shuffle<T>(xs: T[]): T[] {
    for (let i = xs.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      const t = xs[i] as T;
      xs[i] = xs[j] as T;
      xs[j] = t;
    }
    return xs;
  }
}

/** Derived seeds: one 32-bit seed per (run seed, batch, step), independent of wall time. */
export function mixSeed(...parts: number[]): number {
  let h = 0x811c9dc5 | 0;
  for (const p of parts) {
    let x = (Math.floor(p) ^ Math.floor(p / 4294967296)) | 0;
    x = Math.imul(x ^ (x >>> 16), 0x85ebca6b);
    x = Math.imul(x ^ (x >>> 13), 0xc2b2ae35);
    x ^= x >>> 16;
    h = Math.imul(h ^ x, 0x01000193);
    h ^= h >>> 15;
  }
  return h >>> 0;
}
