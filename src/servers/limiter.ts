/** Queue and concurrency of `mempo serve`: requests past `max` running wait in a queue of at most `maxQueue`; past that, 429. */
import { RequestError } from './http';

/** A counting semaphore with a bounded wait queue. */
export class Limiter {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(private readonly max: number, private readonly maxQueue: number) {}
  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.max) {
      if (this.waiting.length >= this.maxQueue) throw new RequestError(429, `server busy: ${this.active} requests running and ${this.waiting.length} queued`);
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else this.active++;
    try {
      return await fn();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    }
  }
}
