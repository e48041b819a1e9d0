/** The largest of `init` and `values` (a loop: spreading a large array into Math.max overflows the stack). */
export function maxOf(init: number, values: Iterable<number>): number {
  let m = init;
  for (const v of values) if (v > m) m = v;
  return m;
}
