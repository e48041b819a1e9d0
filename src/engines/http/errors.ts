/** Errors of the HTTP engine client (src/engines/http). */
import { isServerError, MempoError, serverError } from '../../errors';

/**
 * An answer that is wrong rather than missing, or retries exhausted: not retried. A MempoError
 * with code ERR_SERVER (construct with serverError); this name is kept for `instanceof` checks.
 */
export const CompletionsBackendError = MempoError;
export type CompletionsBackendError = MempoError;
export { isServerError, serverError };

/** A failure that another try (maybe on another endpoint) could fix: 429, 5xx, connection error, timeout. */
export class RetryableError extends Error {}
