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
