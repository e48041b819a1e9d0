/**
 * Weight sync of the HTTP engine: SGLang's `POST /update_weights_from_disk` { model_path } on
 * every endpoint at once (SGLang and `mempo serve` serve it; python/sglang/srt/entrypoints/
 * http_server.py answers { success, message, num_paused_requests }, 400 on failure). vLLM's
 * OpenAI server has no endpoint that loads weights from a directory (docs/servers.md, "Taking new
 * weights"): an endpoint without this one fails with an error saying so.
 */
import { serverError } from '../../errors';
import type { CompletionsApi } from './options';
import { serverBaseUrl } from './url';

export interface WeightUpdateResult {
  /** The endpoint's base URL. */
  url: string;
  message: string;
  numPausedRequests: number;
  ms: number;
}

const VLLM_HINT =
  'vLLM serves no reload from a directory: restart it with --model DIR, or drive its RL endpoints (VLLM_SERVER_DEV_MODE=1) yourself; see docs/servers.md "Taking new weights"';

/** The message of a non-200 answer: SGLang's `message`, the OpenAI-style `error.message`, FastAPI's `detail`, else the text. */
function answerMessage(text: string): string {
  try {
    const j = JSON.parse(text) as Record<string, unknown>;
    if (typeof j['message'] === 'string') return j['message'];
    const e = j['error'] as Record<string, unknown> | undefined;
    if (e && typeof e['message'] === 'string') return e['message'];
    if (j['detail'] !== undefined) return typeof j['detail'] === 'string' ? j['detail'] : JSON.stringify(j['detail']);
  } catch {
    // not JSON: the text itself
  }
  return text.slice(0, 300);
}

async function updateOne(base: string, body: string, api: CompletionsApi, timeoutMs: number, f: typeof fetch): Promise<WeightUpdateResult> {
  const at = `${base}/update_weights_from_disk`;
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), timeoutMs);
  const t0 = performance.now();
  let status: number;
  let text: string;
  try {
    const res = await f(at, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: ctl.signal });
    status = res.status;
    text = await res.text();
  } catch (err) {
    const c = (err as Error & { cause?: { code?: string; message?: string } }).cause;
    throw new Error(ctl.signal.aborted ? `no answer within ${timeoutMs} ms` : `connection failed: ${c?.code ?? c?.message ?? (err as Error).message}`, { cause: err });
  } finally {
    clearTimeout(timer);
  }
  if (status === 404 || status === 405) throw new Error(`HTTP ${status}: the server has no POST /update_weights_from_disk${api === 'vllm' ? ` (${VLLM_HINT})` : ''}`);
  let j: Record<string, unknown> | undefined;
  try {
    j = JSON.parse(text) as Record<string, unknown>;
  } catch {
    j = undefined;
  }
  if (status !== 200 || j?.['success'] !== true) throw new Error(`HTTP ${status}: ${answerMessage(text)}`);
  const paused = j['num_paused_requests'];
  return { url: base, message: typeof j['message'] === 'string' ? j['message'] : '', numPausedRequests: typeof paused === 'number' ? paused : 0, ms: performance.now() - t0 };
}

/**
 * Posts { model_path } to every endpoint in parallel, each with `timeoutMs`; resolves when all
 * succeeded, else throws ERR_SERVER naming each endpoint that failed and its message.
 */
export async function updateWeightsFromDisk(
  urls: readonly string[],
  modelPath: string,
  o: { api: CompletionsApi; timeoutMs: number; fetch: typeof fetch },
): Promise<WeightUpdateResult[]> {
  if (typeof modelPath !== 'string' || modelPath.length === 0) throw serverError(`updateWeightsFromDisk: expected a model directory path, received ${JSON.stringify(modelPath)}`);
  const body = JSON.stringify({ model_path: modelPath });
  const bases = urls.map(serverBaseUrl);
  const settled = await Promise.allSettled(bases.map((b) => updateOne(b, body, o.api, o.timeoutMs, o.fetch)));
  const failed = settled.flatMap((s, i) => (s.status === 'rejected' ? [`${bases[i]}/update_weights_from_disk: ${(s.reason as Error).message}`] : []));
  if (failed.length > 0) {
    throw serverError(`weight update from ${modelPath} failed on ${failed.length} of ${bases.length} endpoint${bases.length > 1 ? 's' : ''}: ${failed.join('; ')}`);
  }
  return settled.map((s) => (s as PromiseFulfilledResult<WeightUpdateResult>).value);
}
