/**
 * Queue and concurrency of `mempo serve`: requests past `max` running wait in a queue of at most
 * `maxQueue`; past that, 429. A request whose signal aborts (its client went away) leaves the
 * queue at once, so abandoned requests neither run nor hold a place.
 */
import { RequestError } from './http';

/** nginx's "client closed request": nobody reads it, it only ends the request's promise. */
const clientGone = () => new RequestError(499, 'client closed the request');

/** A counting semaphore with a bounded wait queue. */
export class Limiter {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(private readonly max: number, private readonly maxQueue: number) {}

  /** Runs `fn` in its turn, with `signal` passed on so that a running request can stop too. */
  async run<T>(fn: (signal: AbortSignal | undefined) => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) throw clientGone();
    if (this.active >= this.max) {
      if (this.waiting.length >= this.maxQueue) throw new RequestError(429, `server busy: ${this.active} requests running and ${this.waiting.length} queued`);
      await this.wait(signal);
    } else this.active++;
    try {
      return await fn(signal);
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    }
  }

  /** Resolves when a running request hands its slot over; rejects (and leaves the queue) on abort. */
  private wait(signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const wake = () => {
        signal?.removeEventListener('abort', drop);
        resolve();
      };
      const drop = () => {
        const i = this.waiting.indexOf(wake);
        if (i >= 0) this.waiting.splice(i, 1);
        reject(clientGone());
      };
      this.waiting.push(wake);
      signal?.addEventListener('abort', drop, { once: true });
    });
  }
}
