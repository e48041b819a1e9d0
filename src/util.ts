/** The largest of `init` and `values` (a loop: spreading a large array into Math.max overflows the stack). */
export function maxOf(init: number, values: Iterable<number>): number {
  let m = init;
  for (const v of values) if (v > m) m = v;
  return m;
}

/** Runs `f` and adds its wall time (ms) to `ms[key]`, also when it throws. */
export async function timed<T>(ms: Record<string, number>, key: string, f: () => Promise<T>): Promise<T> {
  const t = performance.now();
  try {
    return await f();
  } finally {
    ms[key] = (ms[key] ?? 0) + performance.now() - t;
  }
}
