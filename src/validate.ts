/**
 * Argument checks shared by every kernel. Both backends run these before any work, so the
 * JS twin and the native addon throw the very same TypeError/RangeError for the same input.
 * Wording follows one pattern: "Expected <what> for <argument> but received <value>".
 */

export type NumericArray = Float32Array | Float64Array | number[];

/** A received value already written out for the message (spans, ranges): shown as is. */
export class Shown {
  constructor(readonly text: string) {}
}

export function describe(value: unknown): string {
  if (value instanceof Shown) return value.text;
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (ArrayBuffer.isView(value)) {
    const name = value.constructor.name;
    const len = (value as unknown as { length?: number }).length;
    return len === undefined ? name : `${name} of length ${len}`;
  }
  if (Array.isArray(value)) return `Array of length ${value.length}`;
  if (typeof value === 'string') return JSON.stringify(value.length > 80 ? value.slice(0, 80) + '…' : value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (typeof value === 'function') return 'a function';
  return typeof value === 'object' ? 'an object' : typeof value;
}

export function expected(what: string, argument: string, value: unknown): string {
  return `Expected ${what} for ${argument} but received ${describe(value)}`;
}

export function typeError(what: string, argument: string, value: unknown): TypeError {
  return new TypeError(expected(what, argument, value));
}

export function rangeError(what: string, argument: string, value: unknown): RangeError {
  return new RangeError(expected(what, argument, value));
}

/** A positive (or, with allowZero, non-negative) safe integer: shapes and sizes. */
export function checkSize(value: unknown, argument: string, allowZero = false): number {
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw typeError(allowZero ? 'a non-negative integer' : 'a positive integer', argument, value);
  }
  if (value < (allowZero ? 0 : 1) || value > 2 ** 31 - 1) {
    throw rangeError(allowZero ? 'a non-negative integer below 2^31' : 'a positive integer below 2^31', argument, value);
  }
  return value;
}

type TypedCtor<T> = { new (n: number): T; name: string };

// %TypedArray%.prototype getters read the internal slots: a Proxy or a look-alike object has none.
const typedArrayProto = Object.getPrototypeOf(Uint8Array.prototype) as object;
const kindOf = Object.getOwnPropertyDescriptor(typedArrayProto, Symbol.toStringTag)!.get!;
const lengthOf = Object.getOwnPropertyDescriptor(typedArrayProto, 'length')!.get!;

/**
 * An exact typed-array class with an exact length ("Float32Array of length B*T = 12"). A Proxy
 * over a typed array is refused, as the native addon refuses it, and the length is the array's own.
 */
export function checkTyped<T extends ArrayBufferView & { length: number }>(
  value: unknown,
  ctor: TypedCtor<T>,
  argument: string,
  length: number,
  shape: string,
): T {
  if (!(value instanceof (ctor as unknown as new (...args: never[]) => unknown)) || !ArrayBuffer.isView(value) || kindOf.call(value) !== ctor.name) {
    throw typeError(`${ctor.name} of length ${shape}`, argument, value);
  }
  const arr = value as T;
  if (lengthOf.call(arr) !== length) {
    throw rangeError(`${ctor.name} of length ${shape}`, argument, value);
  }
  return arr;
}

/** Scores and rewards: Float32Array, Float64Array or plain number array, all finite. */
export function checkFiniteVector(value: unknown, argument: string, length: number | null, shape: string): Float64Array {
  if (!(value instanceof Float32Array || value instanceof Float64Array || Array.isArray(value))) {
    throw typeError(`Float32Array, Float64Array or number[] of length ${shape}`, argument, value);
  }
  if (length !== null && value.length !== length) {
    throw rangeError(`Float32Array, Float64Array or number[] of length ${shape}`, argument, value);
  }
  const out = new Float64Array(value.length);
  for (let i = 0; i < value.length; i++) {
    const v = value[i];
    if (typeof v !== 'number' || !Number.isFinite(v)) {
      throw rangeError('a finite number', `${argument}[${i}]`, v);
    }
    out[i] = v;
  }
  return out;
}

export function checkOptions(value: unknown, argument: string, known: readonly string[]): Record<string, unknown> {
  if (value === undefined || value === null) return {};
  if (typeof value !== 'object' || Array.isArray(value)) throw typeError('an options object', argument, value);
  const opts = value as Record<string, unknown>;
  for (const key of Object.keys(opts)) {
    if (!known.includes(key)) {
      const hint = known.find((k) => k.toLowerCase() === key.toLowerCase());
      throw new TypeError(
        `Unknown option "${key}" in ${argument}` +
          (hint ? `: misspelled option "${key}" should be "${hint}"` : `; valid options are ${known.join(', ')}`),
      );
    }
  }
  return opts;
}

export function optNumber(
  opts: Record<string, unknown>,
  key: string,
  argument: string,
  fallback: number,
  check: (v: number) => boolean,
  what: string,
): number {
  const v = opts[key];
  if (v === undefined) return fallback;
  if (typeof v !== 'number' || Number.isNaN(v)) throw typeError(what, `${argument}.${key}`, v);
  if (!check(v)) throw rangeError(what, `${argument}.${key}`, v);
  return v;
}

export function optBoolean(opts: Record<string, unknown>, key: string, argument: string, fallback: boolean): boolean {
  const v = opts[key];
  if (v === undefined) return fallback;
  if (typeof v !== 'boolean') throw typeError('a boolean', `${argument}.${key}`, v);
  return v;
}

export function optEnum<T extends string>(
  opts: Record<string, unknown>,
  key: string,
  argument: string,
  values: readonly T[],
  fallback: T,
): T {
  const v = opts[key];
  if (v === undefined) return fallback;
  if (typeof v !== 'string' || !(values as readonly string[]).includes(v)) {
    throw (typeof v === 'string' ? rangeError : typeError)(
      `one of ${values.map((x) => `'${x}'`).join(', ')}`,
      `${argument}.${key}`,
      v,
    );
  }
  return v as T;
}

/** Whether `u` parses as an http: or https: URL (the one URL check: --server, --retriever, the engine client). */
export function isHttpUrl(u: string): boolean {
  try {
    const p = new URL(u);
    return p.protocol === 'http:' || p.protocol === 'https:';
  } catch {
    return false;
  }
}
