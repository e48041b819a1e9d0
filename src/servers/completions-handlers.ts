/**
 * The handlers of `mempo serve` over `LocalModel`: vLLM `/v1/completions` and SGLang `/generate`
 * answers (shapes in src/servers/completions-server.ts), built from one sampling call and one
 * teacher-forced scoring call per request. A request's signal (its client went away) stops the
 * sampling between decode steps; a scoring call in progress finishes, then the request stops.
 * `/v1/completions` with `stream: true` sends each token as it is sampled (OpenAI's chunks).
 */
import { randomBytes } from 'node:crypto';
import type { LocalModel } from '../engines/local/local-model';
import type { GenerationResult } from '../engines/local/generate';
import { bad, type CompletionRequest, type GenerateRequest, type SamplingRequest } from './completions-requests';
import { safeText, TokenTap, type EventStream, type TapToken } from './openai-stream';
import type { CallCapture } from './capture-hook';

export type SamplingSettings = Omit<SamplingRequest, 'prompts' | 'batch' | 'n'> & {
  stopTokenIds: number[];
  /** Ids that end a sequence besides the request's: the model's protocol stop ids unless given (chat gives its end-of-turn ids). */
  baseStopTokenIds?: readonly number[];
};

type VllmPromptLogprobs = (null | Record<string, { logprob: number; rank: number; decoded_token: string }>)[];

export const isLength = (g: GenerationResult) => g.finishReason === 'length' || g.finishReason === 'context';


export class CompletionsHandlers {
  constructor(private readonly model: LocalModel, readonly modelName: string) {}

  private get lm() {
    return this.model.model;
  }

  piece(id: number): string {
    const codec = this.model.codec;
    return codec.piece ? codec.piece(id) : codec.decode([id]);
  }

  decode(ids: number[], skipSpecial: boolean): string {
    const tok = this.lm.tokenizer;
    return tok ? tok.decode(ids, { skipSpecialTokens: skipSpecial }) : this.model.codec.decode(ids);
  }

  /** Per prompt: lp[i] = log π(prompt[i + 1] | prompt[..i]), all prompts in one scorer call. */
  private async promptLogprobs(prompts: number[][], signal: AbortSignal | undefined): Promise<Float32Array[]> {
    signal?.throwIfAborted();
    const idx = prompts.map((p, k) => (p.length > 1 ? k : -1)).filter((k) => k >= 0);
    const out: Float32Array[] = prompts.map(() => new Float32Array(0));
    if (idx.length === 0) return out;
    const lps = await this.lm.scoreTargets(idx.map((k) => ({ contextIds: prompts[k]!.slice(0, 1), targetIds: prompts[k]!.slice(1) })), { sharePrefixes: false });
    idx.forEach((k, i) => { out[k] = lps[i]!; });
    signal?.throwIfAborted();
    return out;
  }

  /**
   * results[p][j]: sample j of prompt p, from stream p·n + j of the seed. A `tap` sees each
   * sequence (index p·n + j) token by token; it never changes what is sampled.
   */
  async sample(prompts: number[][], n: number, s: SamplingSettings, signal: AbortSignal | undefined, tap?: TokenTap): Promise<GenerationResult[][]> {
    if (s.maxTokens === 0) {
      const empty = prompts.map((p) => Array.from({ length: n }, () => ({ tokenIds: [], logprobs: new Float32Array(0), finishReason: 'length' as const, promptLength: p.length })));
      empty.flat().forEach((g, k) => tap?.finish(k, g));
      return empty;
    }
    const flat = await this.lm.generate(
      prompts.flatMap((p) => Array.from({ length: n }, () => ({ ids: p }))),
      {
        maxNewTokens: s.maxTokens,
        temperature: s.temperature,
        topP: s.topP,
        topK: s.topK,
        seed: s.seed ?? randomBytes(4).readUInt32LE(0),
        stop: s.stop,
        stopTokenIds: [...(s.baseStopTokenIds ?? this.model.stopTokenIds), ...s.stopTokenIds],
        decode: false,
        signal,
        ...(tap === undefined ? {} : { logitsProcessor: tap.processor, onResult: (k: number, g: GenerationResult) => tap.finish(k, g) }),
      },
    );
    return prompts.map((_, p) => flat.slice(p * n, (p + 1) * n));
  }

  /** A 400 naming the model when the request asks for another one. */
  checkModel(model: string | null): void {
    if (model !== null && model !== this.modelName) throw bad('model', `this server serves "${this.modelName}", not ${JSON.stringify(model)}`);
  }

  /** POST /v1/completions: one choice per prompt and sample, index = prompt × n + sample. */
  async complete(r: CompletionRequest, signal?: AbortSignal, events?: EventStream, capture?: CallCapture): Promise<unknown> {
    this.checkModel(r.model);
    if (r.stream) {
      if (events === undefined) throw new Error('a streamed request needs its event stream');
      if (r.echo) throw bad('echo', 'not supported with "stream": true by mempo serve');
      if (r.promptLogprobs !== null) throw bad('prompt_logprobs', 'not supported with "stream": true by mempo serve');
      capture?.admit(r.prompts[0]!.length, r.maxTokens);
      return this.completeStreamed(r, signal, events, capture);
    }
    // A tagged call has one prompt and n = 1 (src/servers/capture-hook.ts).
    capture?.admit(r.prompts[0]!.length, r.maxTokens);
    let plp: VllmPromptLogprobs[] | undefined;
    if (r.promptLogprobs !== null) {
      const lps = await this.promptLogprobs(r.prompts, signal);
      // vLLM's Logprob { logprob, rank, decoded_token }; the scorer gives no rank, so 1 stands for it.
      plp = r.prompts.map((p, k) => [null, ...p.slice(1).map((id, i) => ({ [String(id)]: { logprob: lps[k]![i]!, rank: 1, decoded_token: this.piece(id) } }))]);
    }
    const results = await this.sample(r.prompts, r.n, { ...r, stopTokenIds: [] }, signal);
    if (capture !== undefined) capture.record(r.prompts[0]!, results[0]![0]!, isLength(results[0]![0]!) ? 'length' : 'stop');
    const choices: unknown[] = [];
    let generated = 0;
    results.forEach((rs, p) => rs.forEach((g, j) => {
      generated += g.tokenIds.length;
      choices.push(this.vllmChoice(r, p, j, g, plp?.[p]));
    }));
    const promptTokens = r.prompts.reduce((a, p) => a + p.length, 0);
    return {
      id: `cmpl-${randomBytes(8).toString('hex')}`,
      object: 'text_completion',
      created: Math.floor(Date.now() / 1000),
      model: this.modelName,
      choices,
      usage: { prompt_tokens: promptTokens, completion_tokens: generated, total_tokens: promptTokens + generated },
    };
  }

  /**
   * POST /v1/completions with stream: a chunk per token (text that is safe to show so far, its
   * log-prob, its id with return_token_ids), then each choice's last chunk with its finish reason,
   * then the usage chunk (stream_options.include_usage). The texts add up to the unstreamed text.
   */
  private async completeStreamed(r: CompletionRequest, signal: AbortSignal | undefined, events: EventStream, capture: CallCapture | undefined): Promise<undefined> {
    const id = `cmpl-${randomBytes(8).toString('hex')}`;
    const created = Math.floor(Date.now() / 1000);
    const ids: number[][] = [];
    const shown: string[] = [];
    const offsets: number[] = [];
    const chunk = (choice: Record<string, unknown>) => events.send({ id, object: 'text_completion', created, model: this.modelName, choices: [choice], ...(r.includeUsage ? { usage: null } : {}) });
    const tap = new TokenTap(r.prompts.length * r.n, r.temperature, r.logprobs !== null, 0, (k, toks, g) => {
      const seq = (ids[k] ??= []);
      seq.push(...toks.map((t) => t.id));
      const text = g === null ? safeText(this.model.codec.decode(seq), []) : this.model.codec.decode(seq);
      const before = shown[k] ?? '';
      const delta = text.startsWith(before) ? text.slice(before.length) : '';
      shown[k] = before + delta;
      const choice: Record<string, unknown> = { index: k, text: delta, logprobs: r.logprobs === null ? null : this.chunkLogprobs(toks, r.tokensAsIds, offsets, k), finish_reason: null };
      if (r.returnTokenIds) choice['token_ids'] = toks.map((t) => t.id);
      if (g !== null) {
        const last = g.tokenIds[g.tokenIds.length - 1];
        choice['finish_reason'] = isLength(g) ? 'length' : 'stop';
        choice['stop_reason'] = g.stop ?? (g.finishReason === 'stop' && last !== undefined ? last : null);
      }
      if (toks.length > 0 || g !== null) chunk(choice);
    });
    const results = await this.sample(r.prompts, r.n, { ...r, stopTokenIds: [] }, signal, tap);
    // Recorded before [DONE]: a client that saw the end of its stream saw a recorded call.
    if (capture !== undefined) capture.record(r.prompts[0]!, results[0]![0]!, isLength(results[0]![0]!) ? 'length' : 'stop');
    if (r.includeUsage) {
      const promptTokens = r.prompts.reduce((a, p) => a + p.length, 0);
      const generated = ids.reduce((a, s) => a + s.length, 0);
      events.send({ id, object: 'text_completion', created, model: this.modelName, choices: [], usage: { prompt_tokens: promptTokens, completion_tokens: generated, total_tokens: promptTokens + generated } });
    }
    events.done();
    return undefined;
  }

  /** The logprobs of a chunk's tokens in the unstreamed shape (text_offset continues across chunks). */
  private chunkLogprobs(toks: readonly TapToken[], asIds: boolean, offsets: number[], k: number): unknown {
    const tokens = toks.map((t) => (asIds ? `token_id:${t.id}` : this.piece(t.id)));
    const values = toks.map((t) => Math.max(t.logprob, -9999));
    const textOffset = tokens.map((t) => {
      const at = offsets[k] ?? 0;
      offsets[k] = at + [...t].length;
      return at;
    });
    return { text_offset: textOffset, token_logprobs: values, tokens, top_logprobs: tokens.map((t, i) => ({ [t]: values[i]! })) };
  }

  private vllmChoice(r: CompletionRequest, p: number, j: number, g: GenerationResult, plp: VllmPromptLogprobs | undefined): unknown {
    const codec = this.model.codec;
    const ids = g.tokenIds;
    const last = ids[ids.length - 1];
    // vLLM: the stop string, or the stop token id that ended it; null on eos and length.
    const stopReason = g.stop ?? (g.finishReason === 'stop' && last !== undefined ? last : null);
    // Every field of vLLM's CompletionResponseChoice, null unless asked for (FastAPI's model_dump()).
    return {
      index: p * r.n + j,
      text: (r.echo ? codec.decode(r.prompts[p]!) : '') + codec.decode(ids),
      logprobs: r.logprobs === null ? null : this.vllmLogprobs(ids, g.logprobs, r.tokensAsIds),
      finish_reason: isLength(g) ? 'length' : 'stop',
      stop_reason: stopReason,
      token_ids: r.returnTokenIds ? ids : null,
      prompt_logprobs: plp ?? null,
      prompt_token_ids: r.returnTokenIds ? r.prompts[p] : null,
    };
  }

  /** vLLM's CompletionLogProbs: text_offset advances by each token string's length; top_logprobs holds the chosen token (logprobs 0). */
  private vllmLogprobs(ids: readonly number[], lps: Float32Array, asIds: boolean): unknown {
    const tokens = ids.map((id) => (asIds ? `token_id:${id}` : this.piece(id)));
    const textOffset: number[] = [];
    tokens.forEach((_, k) => textOffset.push(k === 0 ? 0 : textOffset[k - 1]! + [...tokens[k - 1]!].length));
    const values = Array.from(lps, (x) => Math.max(x, -9999));
    return { text_offset: textOffset, token_logprobs: values, tokens, top_logprobs: tokens.map((t, k) => ({ [t]: values[k]! })) };
  }

  /** POST /generate: one answer per prompt and sample; a single prompt with n = 1 answers a bare object. */
  async generate(r: GenerateRequest, signal?: AbortSignal): Promise<unknown> {
    const lps = r.returnLogprob ? await this.promptLogprobs(r.prompts, signal) : null;
    const results = await this.sample(r.prompts, r.n, r, signal);
    const out: unknown[] = [];
    results.forEach((rs, p) => rs.forEach((g) => out.push(this.sglangAnswer(r, p, g, lps?.[p] ?? null))));
    return r.batch || r.n > 1 ? out : out[0];
  }

  private sglangAnswer(r: GenerateRequest, p: number, g: GenerationResult, promptLps: Float32Array | null): unknown {
    const tuple = (lp: number | null, id: number) => [lp, id, r.textInLogprobs ? this.piece(id) : null];
    const prompt = r.prompts[p]!;
    const ids = g.tokenIds;
    const last = ids[ids.length - 1];
    const finish = isLength(g) ? { type: 'length', length: ids.length } : { type: 'stop', matched: g.finishReason === 'eos' ? (last ?? null) : (g.stop ?? null) };
    let text = this.decode(ids, r.skipSpecialTokens);
    if (!r.noStopTrim && g.finishReason === 'stop' && g.stop !== undefined && text.endsWith(g.stop)) text = text.slice(0, text.length - g.stop.length);
    const meta: Record<string, unknown> = {
      id: randomBytes(16).toString('hex'),
      finish_reason: finish,
      prompt_tokens: prompt.length,
      completion_tokens: ids.length,
      cached_tokens: 0,
    };
    if (promptLps) {
      const start = r.logprobStart[p] === -1 ? prompt.length - 1 : r.logprobStart[p]!;
      // SGLang pads the first entry with null even when start > 0.
      meta['input_token_logprobs'] = prompt.slice(start).map((id, i) => tuple(i === 0 ? null : promptLps[start + i - 1]!, id));
      meta['output_token_logprobs'] = ids.map((id, i) => tuple(g.logprobs[i]!, id));
    }
    return { text, output_ids: ids, meta_info: meta };
  }
}
