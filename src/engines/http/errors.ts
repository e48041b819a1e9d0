/** Errors of the HTTP engine client (src/engines/http). */

/** An answer that is wrong rather than missing, or retries exhausted: not retried. */
export class CompletionsBackendError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CompletionsBackendError';
  }
}

/** A failure that another try (maybe on another endpoint) could fix: 429, 5xx, connection error, timeout. */
export class RetryableError extends Error {}
