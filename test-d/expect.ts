// Type-level assertions for the API type test (test-d/tsconfig.json); nothing here runs.

/** true when A and B are the same type, not merely mutually assignable (any is not unknown). */
export type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

/** Compiles only for `true`: `type _ = Expect<Equal<X, Y>>`. */
export type Expect<T extends true> = T;

/** `expectType<T>()(value)` compiles only when value's type is exactly T. */
export function expectType<T>(): <V>(value: V & (Equal<T, V> extends true ? unknown : never)) => void {
  return () => undefined;
}
