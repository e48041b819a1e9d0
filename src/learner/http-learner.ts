/**
 * A learner reached over HTTP (docs/learner.md): the torch reference learner that mempo spawns,
 * or any process speaking the protocol, on this host or another (`--learner URL`).
 */
import * as http from 'node:http';
import type { Learner, LearnerForwardOptions, LearnerInfo, LearnerSample, OptimParams } from '../contracts';
import { MempoError } from '../errors';
import { decodeFrame, encodeFrame, FRAME_CONTENT_TYPE } from './frame';
import { float32, int32 } from '../io/export-tensor';
import { checkInfo, checkLimits, checkNumber, flattenSamples, splitToLimits, type RequestLimits } from './samples';

export interface HttpLearnerOptions {
  /** Bearer token (also MEMPO_LEARNER_TOKEN). */
  token?: string;
  /** Per-request timeout (ms); forward/backward of a big batch on a CPU takes minutes. */
  timeoutMs?: number;
}

export const LEARNER_DEFAULTS = { timeoutMs: 30 * 60_000 } as const;

interface Reply {
  status: number;
  type: string;
  body: Buffer;
}

export class HttpLearner implements Learner {
  readonly name: string;
  private readonly base: URL;
  // A connection per request: the learner closes a connection idle for its --idle-timeout, and a
  // request written onto one it is closing would fail (training waits minutes between calls).
  private readonly agent = new http.Agent({ keepAlive: false, maxSockets: 1 });
  private failure: MempoError | null = null;
  private readonly inFlight = new Set<http.ClientRequest>();
  /**
   * The last forward with grad: the learner's pending forward, or (`pieces`) a batch over the
   * learner's graph limit, whose log-probs came from forwards without grad: backward runs forward
   * with grad and backward piece by piece, so the learner never holds more than one piece's graph.
   */
  private lastForward: { id: number; lengths: number[]; pieces?: LearnerSample[][] } | null = null;
  /** The learner's context once `info()` has reported it: longer samples are refused before sending. */
  private maxContext: number | undefined;
  /** What one /forward may hold, once `info()` has reported it: batches are split to fit. */
  private limits: RequestLimits | undefined;

  constructor(url: string, private readonly options: HttpLearnerOptions = {}) {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      throw new MempoError('ERR_INVALID_OPTION', `Expected an http:// URL for the learner but received ${JSON.stringify(url)}`);
    }
    if (u.protocol !== 'http:') throw new MempoError('ERR_INVALID_OPTION', `Expected an http:// URL for the learner but received ${JSON.stringify(url)}`);
    this.base = u;
    this.name = `learner ${u.origin}`;
  }

  /** Fails every request in flight and every later one with `err` (the spawner calls it when the process dies). */
  fail(err: MempoError): void {
    if (this.failure === null) this.failure = err;
    for (const r of this.inFlight) r.destroy(err);
  }

  private request(method: 'GET' | 'POST', path: string, body: Uint8Array | null, type: string): Promise<Reply> {
    if (this.failure !== null) return Promise.reject(this.failure);
    const token = this.options.token ?? process.env['MEMPO_LEARNER_TOKEN'];
    const headers: Record<string, string | number> = {};
    if (body !== null) Object.assign(headers, { 'content-type': type, 'content-length': body.length });
    if (token !== undefined && token !== '') headers['authorization'] = `Bearer ${token}`;
    const timeout = this.options.timeoutMs ?? LEARNER_DEFAULTS.timeoutMs;
    const what = `${this.name} ${method} ${path}`;
    return new Promise<Reply>((resolve, reject) => {
      const req = http.request(new URL(path, this.base), { method, headers, agent: this.agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type'] ?? ''), body: Buffer.concat(chunks) }));
        res.on('error', reject);
      });
      this.inFlight.add(req);
      req.setTimeout(timeout, () => req.destroy(new MempoError('ERR_LEARNER', `${what}: no answer within ${timeout} ms`)));
      req.on('error', (e) => reject(e instanceof MempoError ? e : new MempoError('ERR_LEARNER', `${what}: ${e.message}`)));
      req.on('close', () => this.inFlight.delete(req));
      req.end(body === null ? undefined : body);
    }).then((r) => {
      if (r.status >= 400) throw new MempoError('ERR_LEARNER', `${what}: HTTP ${r.status}: ${errorText(r)}`);
      return r;
    }, async (e: unknown) => {
      throw this.failure ?? (await this.explain(e));
    });
  }

  /** The error a failed connection is reported as (a spawned learner waits for its exit status). */
  protected explain(e: unknown): Promise<unknown> {
    return Promise.resolve(e);
  }

  /** The failure set by `fail`, if any. */
  protected get failed(): MempoError | null {
    return this.failure;
  }

  private async json(method: 'GET' | 'POST', path: string, body?: Record<string, unknown>): Promise<Record<string, unknown>> {
    const r = await this.request(method, path, body === undefined ? null : Buffer.from(JSON.stringify(body)), 'application/json');
    return parseJson(r, `${this.name} ${method} ${path}`);
  }

  async info(): Promise<LearnerInfo> {
    const j = await this.json('GET', '/info');
    const info = checkInfo(j, this.name);
    this.limits = checkLimits(j, this.name);
    this.maxContext = info.maxContext;
    return info;
  }

  async forward(samples: readonly LearnerSample[], options: LearnerForwardOptions = {}): Promise<Float32Array[]> {
    const grad = options.grad === true;
    const policy = options.policy ?? 'current';
    flattenSamples(samples, this.maxContext); // every sample checked before anything is sent
    const limits = this.limits;
    if (limits === undefined) return this.forwardOnce(samples, policy, grad);
    if (grad && policy !== 'current') throw new MempoError('ERR_INVALID_ARGUMENT', `forward with grad is only for the current policy (${this.name})`);
    const pieces = splitToLimits(samples, limits, grad);
    if (pieces.length === 1) return this.forwardOnce(samples, policy, grad);
    const out: Float32Array[] = [];
    for (const piece of pieces) out.push(...(await this.forwardOnce(piece, policy, false)));
    // copies: the caller may reuse its arrays before backward
    if (grad) this.lastForward = { id: 0, lengths: out.map((a) => a.length), pieces: pieces.map((p) => p.map((s) => ({ ids: Array.from(s.ids), targetStart: s.targetStart }))) };
    return out;
  }

  private async forwardOnce(samples: readonly LearnerSample[], policy: 'current' | 'reference', grad: boolean): Promise<Float32Array[]> {
    const flat = flattenSamples(samples, this.maxContext);
    const body = encodeFrame({ policy, grad }, [
      ['ids', int32([flat.ids.length], flat.ids)],
      ['lengths', int32([flat.lengths.length], flat.lengths)],
      ['target_start', int32([flat.targetStart.length], flat.targetStart)],
    ]);
    const what = `${this.name} POST /forward`;
    const r = await this.request('POST', '/forward', body, FRAME_CONTENT_TYPE);
    const frame = decodeFrame(r.body, what);
    const logp = frame.tensors.get('logp');
    if (!(logp instanceof Float32Array) || logp.length !== flat.targets) {
      throw new MempoError('ERR_LEARNER', `${what}: expected logp F32 [${flat.targets}], received ${logp === undefined ? 'none' : `${logp.constructor.name} [${logp.length}]`}`);
    }
    for (let i = 0; i < logp.length; i++) {
      if (!(logp[i]! <= 0)) throw new MempoError('ERR_LEARNER', `${what}: logp[${i}] = ${logp[i]} is not a log-probability`);
    }
    const counts = flat.lengths.map((n, i) => n - flat.targetStart[i]!);
    if (grad) this.lastForward = { id: checkNumber(frame.params['forward_id'], `${what}: forward_id`), lengths: counts };
    const out: Float32Array[] = [];
    let at = 0;
    for (const c of counts) {
      out.push(logp.slice(at, at + c));
      at += c;
    }
    return out;
  }

  async backward(grads: readonly Float32Array[]): Promise<void> {
    const last = this.lastForward;
    if (last === null) throw new MempoError('ERR_INVALID_ARGUMENT', `backward needs a forward({ grad: true }) before it (${this.name})`);
    if (grads.length !== last.lengths.length || grads.some((g, i) => g.length !== last.lengths[i])) {
      throw new MempoError('ERR_INVALID_ARGUMENT', `Expected one gradient per sample of the last forward (${last.lengths.length} samples, lengths ${last.lengths.slice(0, 4).join(', ')}…) for backward`);
    }
    this.lastForward = null;
    if (last.pieces === undefined) return this.backwardOnce(last.id, grads);
    let at = 0;
    for (const piece of last.pieces) {
      await this.forwardOnce(piece, 'current', true);
      const id = this.lastForward!.id;
      this.lastForward = null;
      await this.backwardOnce(id, grads.slice(at, at + piece.length));
      at += piece.length;
    }
  }

  private async backwardOnce(id: number, grads: readonly Float32Array[]): Promise<void> {
    const total = grads.reduce((a, g) => a + g.length, 0);
    const flat = new Float32Array(total);
    let at = 0;
    for (const g of grads) {
      flat.set(g, at);
      at += g.length;
    }
    await this.request('POST', '/backward', encodeFrame({ forward_id: id }, [['grad', float32([total], flat)]]), FRAME_CONTENT_TYPE);
  }

  async optimStep(p: OptimParams): Promise<{ gradNorm: number; step: number }> {
    const r = await this.json('POST', '/optim_step', { lr: p.lr, weight_decay: p.weightDecay, max_grad_norm: p.maxGradNorm, betas: [...p.betas], eps: p.eps });
    const what = `${this.name} POST /optim_step`;
    return { gradNorm: checkNumber(r['grad_norm'], `${what}: grad_norm`), step: checkNumber(r['step'], `${what}: step`) };
  }

  async saveWeights(dir: string): Promise<void> {
    await this.json('POST', '/save_weights', { dir });
  }

  async saveCheckpoint(dir: string): Promise<{ step: number }> {
    const r = await this.json('POST', '/save_checkpoint', { dir });
    return { step: checkNumber(r['step'], `${this.name} POST /save_checkpoint: step`) };
  }

  async loadCheckpoint(dir: string): Promise<{ step: number }> {
    const r = await this.json('POST', '/load_checkpoint', { dir });
    return { step: checkNumber(r['step'], `${this.name} POST /load_checkpoint: step`) };
  }

  /** Asks the learner to exit (a learner reached by URL keeps running unless `shutdown`). */
  async close(shutdown = false): Promise<void> {
    try {
      if (shutdown && this.failure === null) await this.json('POST', '/shutdown', {});
    } finally {
      this.agent.destroy();
    }
  }
}

function errorText(r: Reply): string {
  try {
    const j = JSON.parse(r.body.toString('utf8')) as { error?: { code?: string; message?: string } };
    if (j.error !== undefined) return `${j.error.code ?? 'error'}: ${j.error.message ?? ''}`;
  } catch {
    // not JSON: show its start
  }
  return JSON.stringify(r.body.subarray(0, 200).toString('utf8'));
}

function parseJson(r: Reply, what: string): Record<string, unknown> {
  try {
    const j = JSON.parse(r.body.toString('utf8')) as unknown;
    if (j !== null && typeof j === 'object' && !Array.isArray(j)) return j as Record<string, unknown>;
  } catch {
    // reported below
  }
  throw new MempoError('ERR_LEARNER', `${what}: the answer is not a JSON object: ${JSON.stringify(r.body.subarray(0, 200).toString('utf8'))}`);
}
