/** From a server address to the endpoint a dialect posts to (the URL check itself: src/validate.ts `isHttpUrl`). */
import type { CompletionsApi } from './options';

/** Base URL of a server (scheme, host, port and any path prefix), without the API path. */
export function serverBaseUrl(u: string): string {
  return u.replace(/\/+$/, '').replace(/\/(v1\/completions|v1|generate)$/, '');
}

/** The endpoint a dialect posts to, from a base URL or a full endpoint URL. */
export function endpointUrl(u: string, api: CompletionsApi): string {
  const base = serverBaseUrl(u);
  return api === 'sglang' ? `${base}/generate` : `${base}/v1/completions`;
}
