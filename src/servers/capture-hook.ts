/**
 * The endpoint's side of capture (issue 45): `createCompletionsServer(model, { recorder })`
 * records every call tagged with an episode on /v1/chat/completions and /v1/completions,
 * streamed or not, into an `EpisodeRecorder` (src/agents/capture.ts), token-exact: the prompt ids
 * the model was conditioned on, the ids it sampled, the sampler's log-probs, the finish reason
 * the client was shown, the weight version that served it.
 *
 * The tag: header `x-mempo-episode`, else the body's `metadata.mempo_episode`, else its `user`.
 * A tagged call is one sample of its episode: `n` > 1 or several prompts are 400s naming the
 * field. A call is admitted when it starts to run (the recorder's limits: 429 for too many open
 * episodes, 413 for an episode's tokens, 400 for its calls or a finished episode) and recorded
 * when its sampling completes, before the answer (or a stream's usage chunk and [DONE]) is sent. A client that goes away before
 * that stops the sampling (the server's abort) and its call is not recorded: the episode keeps
 * only complete calls, and the agent may retry. A call whose episode was finished (or expired)
 * while it ran is answered 409 and not recorded.
 *
 *   POST /v1/episodes/{id}/finish → { id, object: 'episode', finished: true, calls, tokens }
 *     (404 for an episode that is not open); `onEpisodeFinished` runs before the answer, so a
 *     200 means it has run (mempo serve --record: the episode's line is on disk).
 */
import type * as http from 'node:http';
import { checkEpisodeId, EPISODE_HEADER, type Admission, type CapturedEpisode, type EpisodeRecorder, type Refused } from '../agents/capture';
import type { GenerationResult } from '../engines/local/generate';
import { FieldError } from './completions-requests';
import { RequestError } from './http';

export { EPISODE_HEADER };

export interface CaptureServerOptions {
  /** Records tagged calls; without it tags are ignored and /v1/episodes is 404. */
  recorder?: EpisodeRecorder;
  /** The weight version a call is served by, read when it starts (default: successful POST /update_weights_from_disk so far). */
  weightVersion?: () => number;
  /** Runs when POST /v1/episodes/{id}/finish finishes an episode; a throw answers 500 and leaves the episode finished in the recorder. */
  onEpisodeFinished?: (episode: CapturedEpisode) => void | Promise<void>;
}

const STATUS: Record<Refused['limit'], number> = { maxEpisodes: 429, maxTokensPerEpisode: 413, maxCallsPerEpisode: 400, finished: 400, closed: 409 };

/** One call of an episode: admitted when it runs, recorded when its sampling completes, released otherwise. */
export class CallCapture {
  private admission: Admission | undefined;
  private version = 0;

  constructor(private readonly hook: CaptureHook, readonly episode: string) {}

  /** Before sampling: holds the call's budget, or throws the refusal as a RequestError (4xx). */
  admit(promptTokens: number, maxNewTokens: number): void {
    const a = this.hook.recorder.tryAdmit(this.episode, promptTokens, maxNewTokens);
    if ('limit' in a) throw new RequestError(STATUS[a.limit], a.message);
    this.admission = a;
    this.version = this.hook.weightVersion();
  }

  /** After sampling completed: the call as the sampler made it; a 409 when its episode closed meanwhile. */
  record(promptIds: readonly number[], g: GenerationResult, finishReason: string): void {
    const a = this.admission;
    if (a === undefined) throw new Error('CallCapture.record before admit');
    this.admission = undefined;
    const r = this.hook.recorder.tryRecord(this.episode, { promptIds: [...promptIds], sampledIds: [...g.tokenIds], logprobs: Array.from(g.logprobs), finishReason, weightVersion: this.version }, a);
    if ('limit' in r) throw new RequestError(STATUS[r.limit === 'finished' ? 'closed' : r.limit], r.message);
  }

  /** The call ended without a record (refused, failed, client gone): its budget goes back. */
  release(): void {
    if (this.admission !== undefined) this.hook.recorder.release(this.admission);
    this.admission = undefined;
  }
}

const FINISH = /^\/v1\/episodes\/(.+)\/finish$/;

export class CaptureHook {
  readonly recorder: EpisodeRecorder;
  readonly weightVersion: () => number;

  constructor(options: CaptureServerOptions & { recorder: EpisodeRecorder }, updates: () => number) {
    this.recorder = options.recorder;
    this.weightVersion = options.weightVersion ?? updates;
    this.onFinished = options.onEpisodeFinished;
  }

  private readonly onFinished: CaptureServerOptions['onEpisodeFinished'];

  /**
   * The episode a call belongs to, or undefined when it is untagged. `sequences` is n × prompts:
   * a tagged call samples one sequence. `body` is the request text (already parsed as valid).
   */
  call(req: http.IncomingMessage, body: string, n: number, prompts: number): CallCapture | undefined {
    const episode = episodeTag(req, body);
    if (episode === undefined) return undefined;
    if (n !== 1) throw new FieldError(400, 'n', `field "n": a call tagged with episode ${episode} samples once (one call = one sample of the episode), received n = ${n}`);
    if (prompts !== 1) throw new FieldError(400, 'prompt', `field "prompt": a call tagged with episode ${episode} has one prompt, received ${prompts}`);
    return new CallCapture(this, episode);
  }

  /** A tagged call on an endpoint that does not record (/generate): refused rather than served unrecorded. */
  refuseTagged(req: http.IncomingMessage, path: string): void {
    if (req.headers[EPISODE_HEADER] !== undefined) throw new RequestError(400, `header ${EPISODE_HEADER}: ${path} is not recorded; send tagged calls to /v1/chat/completions or /v1/completions`);
  }

  /** True for the paths this hook answers. */
  static owns(path: string): boolean {
    return path.startsWith('/v1/episodes/');
  }

  /** POST /v1/episodes/{id}/finish. */
  async finish(path: string): Promise<{ status: number; payload: unknown }> {
    const m = FINISH.exec(path);
    if (m === null) throw new RequestError(404, `no such endpoint ${path}; use POST /v1/episodes/{id}/finish`);
    let id: string;
    try {
      id = decodeURIComponent(m[1]!);
    } catch {
      throw new RequestError(400, `episode id in ${path} is not valid percent-encoding`);
    }
    checkEpisodeIdOr400(id, 'path /v1/episodes/{id}/finish');
    const open = this.recorder.get(id);
    if (open === undefined) throw new RequestError(404, `episode ${id} is not open (never called, expired, or finished and collected)`);
    const already = open.finished;
    const e = this.recorder.finish(id);
    if (!already && this.onFinished !== undefined) {
      try {
        await this.onFinished(e);
      } catch (err) {
        throw new RequestError(500, `episode ${id} is finished but was not stored: ${(err as Error).message}`);
      }
    }
    return { status: 200, payload: { id, object: 'episode', finished: true, calls: e.calls.length, tokens: e.tokens } };
  }
}

function checkEpisodeIdOr400(id: unknown, where: string): string {
  try {
    return checkEpisodeId(id, where);
  } catch (err) {
    throw new RequestError(400, (err as Error).message);
  }
}

/** Header `x-mempo-episode` > body `metadata.mempo_episode` > body `user`; undefined when none is there. */
export function episodeTag(req: http.IncomingMessage, body: string): string | undefined {
  const h = req.headers[EPISODE_HEADER];
  if (h !== undefined) {
    if (Array.isArray(h)) throw new RequestError(400, `header ${EPISODE_HEADER}: sent ${h.length} times; send it once`);
    return checkEpisodeIdOr400(h, `header ${EPISODE_HEADER}`);
  }
  const b = JSON.parse(body) as Record<string, unknown>;
  const meta = b['metadata'];
  if (meta !== undefined && meta !== null && typeof meta === 'object' && !Array.isArray(meta)) {
    const tag = (meta as Record<string, unknown>)['mempo_episode'];
    if (tag !== undefined && tag !== null) return fieldId(tag, 'metadata.mempo_episode');
  }
  const user = b['user'];
  if (user !== undefined && user !== null) return fieldId(user, 'user');
  return undefined;
}

function fieldId(v: unknown, field: string): string {
  try {
    return checkEpisodeId(v, `field "${field}"`);
  } catch (err) {
    throw new FieldError(400, field, (err as Error).message);
  }
}
