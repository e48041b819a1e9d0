/**
 * The one URL check of mempo (`isHttpUrl`) and the mapping from a server address to the endpoint
 * a dialect posts to. Used by `--server` parsing, `connectCompletionsServers`, the engine client
 * and the HTTP retriever.
 */
import type { CompletionsApi } from './options';

/** Whether `u` parses as an http: or https: URL. */
export function isHttpUrl(u: string): boolean {
  try {
    const p = new URL(u);
    return p.protocol === 'http:' || p.protocol === 'https:';
  } catch {
    return false;
  }
}

/** Base URL of a server (scheme, host, port and any path prefix), without the API path. */
export function serverBaseUrl(u: string): string {
  return u.replace(/\/+$/, '').replace(/\/(v1\/completions|v1|generate)$/, '');
}

/** The endpoint a dialect posts to, from a base URL or a full endpoint URL. */
export function endpointUrl(u: string, api: CompletionsApi): string {
  const base = serverBaseUrl(u);
  return api === 'sglang' ? `${base}/generate` : `${base}/v1/completions`;
}
