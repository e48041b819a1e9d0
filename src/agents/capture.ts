/**
 * Capture (issue 45): every model call an agent makes through the OpenAI-compatible
 * endpoint, recorded token-exact under the episode it names — the prompt ids the model was
 * conditioned on, the ids it sampled and their log-probs, as the sampler produced them. Nothing
 * here re-tokenizes text: the ids recorded are the ids trained on.
 *
 * Bounded: calls and tokens per episode, episodes open at once; an episode nobody finishes
 * expires `idleMs` after its last call began or ended and is named in `expired`, never
 * trained on silently. The endpoint's side is src/servers/capture-hook.ts.
 */
import { MempoError } from '../errors';

/** One model call of an episode. */
export interface CapturedCall {
  /** 0-based order of the call within its episode (the order the endpoint received them). */
  index: number;
  promptIds: number[];
  sampledIds: number[];
  /** Sampling log-prob of each sampled id (the sampler's own, at the temperature it sampled with). */
  logprobs: number[];
  finishReason: string;
  /** The weight version that served the call (`mempo serve` counts weight updates from 0). */
  weightVersion: number;
}

export interface CapturedEpisode {
  id: string;
  calls: CapturedCall[];
  /** Prompt + sampled tokens over all calls, what `maxTokensPerEpisode` bounds. */
  tokens: number;
  finished: boolean;
  /** Clock time of the last call or of the episode's start. */
  lastSeen: number;
}

export interface CaptureLimits {
  /** Calls per episode (default 64). */
  maxCallsPerEpisode?: number;
  /** Prompt + sampled tokens per episode, all calls together (default 1,048,576). */
  maxTokensPerEpisode?: number;
  /** Episodes open (not yet taken) at once (default 4,096). */
  maxEpisodes?: number;
  /** An open episode with no call for this long expires (default 600,000 ms). */
  idleMs?: number;
}

export const CAPTURE_DEFAULTS: Required<CaptureLimits> = {
  maxCallsPerEpisode: 64,
  maxTokensPerEpisode: 1 << 20,
  maxEpisodes: 4096,
  idleMs: 600_000,
};

/** The header that names a call's episode (the endpoint's first choice of tag, src/servers/capture-hook.ts). */
export const EPISODE_HEADER = 'x-mempo-episode';

/** Episode ids: what a header or the request's `user` field may carry, short and printable. */
const EPISODE_ID = /^[A-Za-z0-9._:@/-]{1,128}$/;

export function checkEpisodeId(id: unknown, where: string): string {
  if (typeof id !== 'string' || !EPISODE_ID.test(id)) {
    throw new MempoError('ERR_INVALID_INPUT', `${where}: expected an episode id of 1-128 characters from [A-Za-z0-9._:@/-] but received ${JSON.stringify(id)?.slice(0, 80)}`);
  }
  return id;
}

/** An episode as callers see it (its calls array is the recorder's own: read it, do not change it). */
function view(e: OpenEpisode): CapturedEpisode {
  return { id: e.id, calls: e.calls, tokens: e.tokens, finished: e.finished, lastSeen: e.lastSeen };
}

function positiveInt(v: number | undefined, name: string, dflt: number): number {
  if (v === undefined) return dflt;
  if (!Number.isSafeInteger(v) || v < 1) throw new MempoError('ERR_INVALID_OPTION', `capture.${name}: expected an integer >= 1 but received ${v}`);
  return v;
}

/** Which bound refused a call: the endpoint answers maxEpisodes with 429 (retry once episodes are collected), maxTokensPerEpisode with 413, the rest with 400 (409 for a call that outlived its episode). */
export type CaptureRefusal = 'maxEpisodes' | 'maxCallsPerEpisode' | 'maxTokensPerEpisode' | 'finished' | 'closed';

/** A refused admission or record: `limit` says which bound, `message` names it. */
export interface Refused {
  limit: CaptureRefusal;
  message: string;
}

/** A call admitted and not yet recorded: it holds its budget (one call, prompt + max new tokens) until recorded or released. */
export interface Admission {
  readonly episode: string;
  readonly tokens: number;
}

interface OpenEpisode extends CapturedEpisode {
  /** Admitted calls still sampling: they count against the limits. */
  pending: Set<Admission>;
}

export class EpisodeRecorder {
  readonly limits: Required<CaptureLimits>;
  private readonly open = new Map<string, OpenEpisode>();
  private readonly expiredIds: string[] = [];

  constructor(limits: CaptureLimits = {}, private readonly now: () => number = Date.now) {
    this.limits = {
      maxCallsPerEpisode: positiveInt(limits.maxCallsPerEpisode, 'maxCallsPerEpisode', CAPTURE_DEFAULTS.maxCallsPerEpisode),
      maxTokensPerEpisode: positiveInt(limits.maxTokensPerEpisode, 'maxTokensPerEpisode', CAPTURE_DEFAULTS.maxTokensPerEpisode),
      maxEpisodes: positiveInt(limits.maxEpisodes, 'maxEpisodes', CAPTURE_DEFAULTS.maxEpisodes),
      idleMs: positiveInt(limits.idleMs, 'idleMs', CAPTURE_DEFAULTS.idleMs),
    };
  }

  /**
   * Checks, before any sampling, that `episode` may make one more call of `promptTokens` prompt
   * tokens and up to `maxNewTokens` sampled ones; opens the episode on its first call. Throws a
   * MempoError naming the limit otherwise (the endpoint answers it with a 4xx).
   */
  admit(episode: string, promptTokens: number, maxNewTokens: number): Admission {
    const a = this.tryAdmit(episode, promptTokens, maxNewTokens);
    if ('limit' in a) throw new MempoError('ERR_INVALID_INPUT', a.message);
    return a;
  }

  /**
   * `admit` without throwing: the admission, or which limit refused it. Calls of one episode
   * that run at once each hold their budget, so together they cannot pass a limit either.
   */
  tryAdmit(episode: string, promptTokens: number, maxNewTokens: number): Admission | Refused {
    this.expire();
    let e = this.open.get(episode);
    if (e === undefined) {
      if (this.open.size >= this.limits.maxEpisodes) {
        return { limit: 'maxEpisodes', message: `episode ${episode}: ${this.open.size} episodes are open, the most the endpoint records at once (capture.maxEpisodes); finish or collect some first` };
      }
      e = { id: episode, calls: [], tokens: 0, finished: false, lastSeen: this.now(), pending: new Set() };
      this.open.set(episode, e);
    }
    if (e.finished) return { limit: 'finished', message: `episode ${episode} is finished; a new call needs a new episode id` };
    const calls = e.calls.length + e.pending.size;
    if (calls >= this.limits.maxCallsPerEpisode) {
      return { limit: 'maxCallsPerEpisode', message: `episode ${episode} has made ${calls} calls, the most one episode may make (capture.maxCallsPerEpisode)` };
    }
    const held = e.tokens + [...e.pending].reduce((t, p) => t + p.tokens, 0);
    if (held + promptTokens + maxNewTokens > this.limits.maxTokensPerEpisode) {
      return { limit: 'maxTokensPerEpisode', message: `episode ${episode}: ${held} tokens so far + ${promptTokens} prompt + ${maxNewTokens} max new exceeds capture.maxTokensPerEpisode = ${this.limits.maxTokensPerEpisode}` };
    }
    e.lastSeen = this.now();
    const a: Admission = { episode, tokens: promptTokens + maxNewTokens };
    e.pending.add(a);
    return a;
  }

  /** Gives an admitted call's budget back (its sampling failed or its client went away); idempotent. */
  release(a: Admission): void {
    this.open.get(a.episode)?.pending.delete(a);
  }

  /**
   * Records a finished call of an admitted episode; returns it with its index (the order calls
   * completed in). `admission` is the one `admit` gave (default: the episode's oldest one).
   */
  record(episode: string, call: Omit<CapturedCall, 'index'>, admission?: Admission): CapturedCall {
    const r = this.tryRecord(episode, call, admission);
    if ('limit' in r) throw new MempoError('ERR_INVALID_INPUT', r.message);
    return r;
  }

  /** `record` without throwing on an episode that was finished, expired or collected while the call ran. */
  tryRecord(episode: string, call: Omit<CapturedCall, 'index'>, admission?: Admission): CapturedCall | Refused {
    if (call.logprobs.length !== call.sampledIds.length) {
      throw new MempoError('ERR_INVALID_INPUT', `episode ${episode}: ${call.logprobs.length} log-probs for ${call.sampledIds.length} sampled ids`);
    }
    const e = this.open.get(episode);
    if (admission !== undefined) e?.pending.delete(admission);
    else if (e !== undefined) {
      const first = e.pending.values().next();
      if (first.done !== true) e.pending.delete(first.value);
    }
    if (e === undefined) return { limit: 'closed', message: `episode ${episode} is not open (never admitted, expired or collected)` };
    if (e.finished) return { limit: 'finished', message: `episode ${episode} was finished while this call ran; the call is not recorded` };
    const c: CapturedCall = { index: e.calls.length, ...call, promptIds: [...call.promptIds], sampledIds: [...call.sampledIds], logprobs: [...call.logprobs] };
    e.calls.push(c);
    e.tokens += c.promptIds.length + c.sampledIds.length;
    e.lastSeen = this.now();
    return c;
  }

  /** Marks an episode complete: no more calls; `take` returns it. An unknown id is an error. */
  finish(episode: string): CapturedEpisode {
    this.expire();
    const e = this.open.get(episode);
    if (e === undefined) throw new MempoError('ERR_INVALID_INPUT', `episode ${episode} is not open (never called, expired or collected)`);
    e.finished = true;
    return view(e);
  }

  /** Removes and returns the episode (finished or not), or undefined. */
  take(episode: string): CapturedEpisode | undefined {
    const e = this.open.get(episode);
    this.open.delete(episode);
    return e === undefined ? undefined : view(e);
  }

  get(episode: string): CapturedEpisode | undefined {
    const e = this.open.get(episode);
    return e === undefined ? undefined : view(e);
  }

  /** Episodes still open, finished or not, in the order they opened. */
  episodes(): CapturedEpisode[] {
    return [...this.open.values()].map(view);
  }

  /** Ids of the episodes that expired unfinished since the recorder started (their calls are dropped). */
  get expired(): readonly string[] {
    this.expire();
    return this.expiredIds;
  }

  private expire(): void {
    const t = this.now();
    for (const [id, e] of this.open) {
      if (!e.finished && t - e.lastSeen > this.limits.idleMs) {
        this.open.delete(id);
        this.expiredIds.push(id);
      }
    }
  }
}
