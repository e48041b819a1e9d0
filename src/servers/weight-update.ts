/**
 * `POST /update_weights_from_disk` of `mempo serve`, in SGLang's shapes (python/sglang/srt/
 * managers/io_struct.py UpdateWeightFromDiskReqInput / UpdateWeightFromDiskReqOutput,
 * http_server.py update_weights_from_disk):
 *
 *   { model_path: str, load_format?: null | "auto", abort_all_requests?: bool, weight_version?,
 *     flush_cache?, ... }  →  200 { success: true, message, num_paused_requests }
 *                           or 400 { success: false, message, num_paused_requests }
 *
 * The model takes the directory's weights with `LocalModel.reload` (same architecture and
 * tokenizer, else the old weights stay). Requests accepted before the update (running or queued)
 * finish on the old weights; requests arriving meanwhile wait until the reload is done
 * (`num_paused_requests` counts them). With `abort_all_requests` the accepted ones are ended
 * instead, with 503 (a client that retries gets the new weights).
 */
import type { LocalModel } from '../engines/local/local-model';
import { parseJsonObject, RequestError } from './http';

export interface UpdateWeightsRequest {
  modelPath: string;
  abortAll: boolean;
}

/** UpdateWeightFromDiskReqInput's fields; those mempo serve cannot honour are accepted at their defaults only. */
const DEFAULTS: Record<string, unknown> = {
  weight_version: null, is_async: false, torch_empty_cache: false, keep_pause: false, recapture_cuda_graph: false,
  token_step: null, flush_cache: true, manifest: null, rid: null,
};

const bad = (field: string, msg: string) => new RequestError(400, `field "${field}": ${msg}`);

/** Checks a /update_weights_from_disk body; every message names the field at fault. */
export function parseUpdateWeightsRequest(text: string): UpdateWeightsRequest {
  const b = parseJsonObject(text);
  for (const k of Object.keys(b)) {
    if (k !== 'model_path' && k !== 'load_format' && k !== 'abort_all_requests' && !(k in DEFAULTS)) throw bad(k, 'not a field of SGLang\'s UpdateWeightFromDiskReqInput');
  }
  const path = b['model_path'];
  if (typeof path !== 'string' || path.length === 0) throw bad('model_path', `expected a non-empty string (a model directory), received ${JSON.stringify(path)}`);
  const lf = b['load_format'];
  if (lf !== undefined && lf !== null && lf !== 'auto') throw bad('load_format', `mempo serve loads ONNX model directories only: leave it out or send "auto", received ${JSON.stringify(lf)}`);
  const abort = b['abort_all_requests'];
  if (abort !== undefined && abort !== null && typeof abort !== 'boolean') throw bad('abort_all_requests', `expected a boolean, received ${JSON.stringify(abort)}`);
  const version = b['weight_version'];
  if (version !== undefined && version !== null && typeof version !== 'string') throw bad('weight_version', 'expected a string');
  for (const k of ['is_async', 'torch_empty_cache', 'keep_pause', 'recapture_cuda_graph', 'flush_cache']) {
    const v = b[k];
    if (v === undefined || v === null) continue;
    if (typeof v !== 'boolean') throw bad(k, `expected a boolean, received ${JSON.stringify(v)}`);
    if (v !== DEFAULTS[k]) throw bad(k, `only ${String(DEFAULTS[k])} is supported by mempo serve`);
  }
  const step = b['token_step'];
  if (step !== undefined && step !== null && (typeof step !== 'number' || !Number.isInteger(step))) throw bad('token_step', 'expected an integer');
  return { modelPath: path, abortAll: abort === true };
}

/**
 * Orders requests and weight updates: an update waits until the requests accepted before it
 * have finished (or aborts them), then reloads; requests arriving meanwhile wait for it.
 */
export class WeightGate {
  private readonly running = new Set<AbortController>();
  private updating: Promise<unknown> | undefined;
  private drained: (() => void) | undefined;
  /** Requests that have waited for an update, in all. */
  private held = 0;

  /** Runs one request once no update is in progress; `ctl` aborts it on abort_all_requests. */
  async run<T>(ctl: AbortController, fn: () => Promise<T>): Promise<T> {
    while (this.updating !== undefined) {
      this.held++;
      await this.updating.catch(() => undefined);
    }
    this.running.add(ctl);
    try {
      return await fn();
    } finally {
      this.running.delete(ctl);
      if (this.running.size === 0) this.drained?.();
    }
  }

  /** One update at a time: drains (or aborts) the requests running, then runs `reload`; never throws. */
  async update<T>(abortAll: boolean, reload: () => Promise<T>): Promise<{ result: PromiseSettledResult<T>; paused: number }> {
    while (this.updating !== undefined) await this.updating.catch(() => undefined);
    const heldBefore = this.held;
    const work = (async () => {
      if (abortAll) {
        for (const c of this.running) c.abort(new RequestError(503, 'aborted: the server is taking new weights (POST /update_weights_from_disk with abort_all_requests)'));
      }
      if (this.running.size > 0) await new Promise<void>((r) => (this.drained = r));
      this.drained = undefined;
      return reload();
    })();
    this.updating = work;
    const [result] = await Promise.allSettled([work]);
    this.updating = undefined;
    return { result: result!, paused: this.held - heldBefore };
  }
}

/** The answer of POST /update_weights_from_disk: SGLang's status and body. */
export async function updateWeightsFromDisk(model: LocalModel, gate: WeightGate, text: string): Promise<{ status: number; payload: unknown }> {
  let r: UpdateWeightsRequest;
  try {
    r = parseUpdateWeightsRequest(text);
  } catch (e) {
    if (!(e instanceof RequestError)) throw e;
    return { status: e.status, payload: { success: false, message: e.message, num_paused_requests: 0 } };
  }
  const { result, paused } = await gate.update(r.abortAll, () => model.reload(r.modelPath));
  if (result.status === 'fulfilled') {
    const { modelPath, ms } = result.value;
    return { status: 200, payload: { success: true, message: `Succeeded to update model weights from ${modelPath} (${ms.toFixed(0)} ms).`, num_paused_requests: paused } };
  }
  const why = (result.reason as Error).message;
  return { status: 400, payload: { success: false, message: `Failed to update weights from ${r.modelPath}: ${why} (the old weights are kept)`, num_paused_requests: paused } };
}
