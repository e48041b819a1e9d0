/**
 * What the OpenAI-style endpoints of `mempo serve` see of a generation while it runs: each token
 * as soon as it is sampled (a logits processor that only reads the rows), its log-prob and the
 * most likely alternatives, text that is safe to show before the generation ends, and the
 * server-sent events that carry it.
 *
 * The tap never changes a logits row, so a request samples the same tokens streamed or not (same
 * seed, same ids). A token's log-prob is computed from its row exactly as the sampler computes it
 * ('temperature' mode: log softmax(logits / T), the raw softmax when greedy), so the streamed
 * values equal the generator's to the last bit.
 */
import type * as http from 'node:http';
import type { GenerationResult } from '../engines/local/generate';

/** A sampled token: id, log-prob, and the `top` most likely ids of its row with their log-probs (most likely first). */
export interface TapToken {
  id: number;
  logprob: number;
  top: [number, number][] | null;
}

/** max and log Σ exp((l - max)·invT) of a row, summed in the sampler's order (src/engines/local/sampler.ts). */
function rowNorm(row: Float32Array, invT: number): { max: number; logSum: number } {
  let max = -Infinity;
  for (let i = 0; i < row.length; i++) if (row[i]! > max) max = row[i]!;
  let sum = 0;
  for (let i = 0; i < row.length; i++) sum += Math.exp((row[i]! - max) * invT);
  return { max, logSum: Math.log(sum) };
}

/** The `k` largest entries of a row (ties: the lower id first), as [id, logprob]. */
function topOf(row: Float32Array, k: number, invT: number, norm: { max: number; logSum: number }): [number, number][] {
  const ids: number[] = [];
  for (let i = 0; i < row.length; i++) {
    const v = row[i]!;
    if (ids.length === k && v <= row[ids[k - 1]!]!) continue;
    let at = ids.length === k ? k - 1 : ids.length;
    while (at > 0 && row[ids[at - 1]!]! < v) at--;
    ids.splice(at, 0, i);
    if (ids.length > k) ids.pop();
  }
  return ids.map((id) => [id, Math.fround((row[id]! - norm.max) * invT - norm.logSum)]);
}

/**
 * Watches one `generate` call of `sequences` sequences. Pass `processor` as its logitsProcessor
 * and call `finish` from its onResult; `onTokens(seq, tokens, result)` gets each token once, in
 * order: at the next decode step, or with the sequence's result for its last token.
 */
export class TokenTap {
  private readonly rows: (Float32Array | undefined)[];
  private readonly norms: ({ max: number; logSum: number } | undefined)[];
  private readonly tops: ([number, number][] | null)[];
  private readonly released: number[];
  private readonly invT: number;

  /** `wantLogprobs`: compute each token's log-prob from its row (else NaN until the result gives it); `top`: alternatives per token. */
  constructor(
    sequences: number,
    temperature: number,
    private readonly wantLogprobs: boolean,
    private readonly top: number,
    private readonly onTokens: (seq: number, tokens: TapToken[], result: GenerationResult | null) => void,
  ) {
    this.invT = temperature === 0 ? 1 : 1 / temperature;
    this.rows = new Array(sequences).fill(undefined);
    this.norms = new Array(sequences).fill(undefined);
    this.tops = new Array(sequences).fill(null);
    this.released = new Array(sequences).fill(0);
  }

  /** The logits processor: releases the token sampled at the previous step, then keeps what this row says. */
  readonly processor = (row: Float32Array, seq: number, generated: readonly number[]): void => {
    const k = generated.length;
    if (k > this.released[seq]!) {
      const id = generated[k - 1]!;
      const norm = this.norms[seq];
      const row = this.rows[seq];
      const lp = norm === undefined || row === undefined ? NaN : Math.fround((row[id]! - norm.max) * this.invT - norm.logSum);
      this.released[seq] = k;
      this.onTokens(seq, [{ id, logprob: lp, top: this.tops[seq]! }], null);
    }
    if (!this.wantLogprobs && this.top === 0) return;
    const norm = rowNorm(row, this.invT);
    this.norms[seq] = norm;
    if (this.wantLogprobs) {
      let copy = this.rows[seq];
      if (copy === undefined || copy.length !== row.length) copy = this.rows[seq] = new Float32Array(row.length);
      copy.set(row);
    }
    this.tops[seq] = this.top > 0 ? topOf(row, this.top, this.invT, norm) : null;
  };

  /** onResult: the tokens not released yet (the last one), with the generator's own log-probs. */
  finish(seq: number, result: GenerationResult): void {
    const ids = result.tokenIds;
    const rest: TapToken[] = [];
    for (let i = this.released[seq]!; i < ids.length; i++) rest.push({ id: ids[i]!, logprob: result.logprobs[i]!, top: i === ids.length - 1 ? this.tops[seq]! : null });
    this.released[seq] = ids.length;
    this.rows[seq] = undefined;
    this.onTokens(seq, rest, result);
  }
}

/** The longest end of `text` that begins one of `marks` (text that may yet become one). */
function partialMarkAtEnd(text: string, marks: readonly string[]): number {
  let best = 0;
  for (const m of marks) {
    for (let n = Math.min(m.length - 1, text.length); n > best; n--) {
      if (text.endsWith(m.slice(0, n))) {
        best = n;
        break;
      }
    }
  }
  return best;
}

/**
 * The text of a sequence that may be shown before it ends: its decoded tokens up to the first
 * `cut` mark (a stop string, a tool call's opening tag: what follows is not content), less an
 * incomplete UTF-8 character and any end that may still become a mark. Always a prefix of what
 * the finished sequence shows, so deltas of it add up to the final text.
 */
export function safeText(text: string, cuts: readonly string[]): string {
  let end = text.length;
  for (const c of cuts) {
    const i = text.indexOf(c);
    if (i >= 0 && i < end) end = i;
  }
  let t = text.slice(0, end);
  if (end === text.length) t = t.slice(0, t.length - partialMarkAtEnd(t, cuts));
  // A token may end inside a multi-byte character: the decoder shows U+FFFD until the rest comes.
  return t.replace(/\uFFFD+$/, '');
}

/**
 * Server-sent events on a response (OpenAI's stream: `data: <json>` lines, then `data: [DONE]`).
 * The headers go out with the first event, so a request refused before it starts still gets
 * its JSON error with the right status.
 */
export class EventStream {
  private started = false;
  constructor(private readonly res: http.ServerResponse) {}

  get isStarted(): boolean {
    return this.started;
  }

  private start(): void {
    if (this.started) return;
    this.res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
    this.started = true;
  }

  send(payload: unknown): void {
    if (this.res.destroyed || this.res.writableEnded) return;
    this.start();
    this.res.write(`data: ${JSON.stringify(payload)}\n\n`);
  }

  /** Ends the stream with `data: [DONE]`. */
  done(): void {
    if (this.res.destroyed || this.res.writableEnded) return;
    this.start();
    this.res.end('data: [DONE]\n\n');
  }
}
