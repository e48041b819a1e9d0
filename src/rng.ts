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
