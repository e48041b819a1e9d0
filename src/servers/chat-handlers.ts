/**
 * POST /v1/chat/completions over `LocalModel` (OpenAI's shapes, with vLLM's return_token_ids):
 * the conversation rendered with the model's chat template (chat-template.ts), sampled as
 * /v1/completions samples (same seeds, same streams), and each sequence read back as the chat
 * API shows it: the content without the end-of-turn token or the stop string, tool calls parsed
 * out of it when the request has tools (chat-tools.ts), log-probs of every sampled token.
 * Streamed or not, a request gives the same tokens, text and log-probs.
 */
import { randomBytes } from 'node:crypto';
import type { GenerationResult } from '../engines/local/generate';
import type { LocalModel } from '../engines/local/local-model';
import { resolveProtocolIds } from '../protocol/special-ids';
import { bad, type Limits } from './completions-requests';
import { isLength, type CompletionsHandlers } from './completions-handlers';
import type { ChatRequest } from './chat-requests';
import type { ChatTemplater } from './chat-template';
import { parseToolCalls, TOOL_CALL_OPEN, type ToolCall } from './chat-tools';
import { safeText, TokenTap, type EventStream, type TapToken } from './openai-stream';
import type { CallCapture } from './capture-hook';

interface LogprobEntry {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

/** What a finished sequence shows. */
interface ChatOutput {
  content: string | null;
  toolCalls: ToolCall[];
  finishReason: 'stop' | 'length' | 'tool_calls';
  /** The stop string, or the id of the token that ended it; null at the length limit. */
  stopReason: string | number | null;
}

export class ChatHandlers {
  /** Ids that end a turn: the model's eos ids and the template's end-of-turn token (e.g. <|im_end|>). */
  private readonly endIds: Set<number>;
  private readonly endIdList: number[];

  constructor(
    model: LocalModel,
    private readonly core: CompletionsHandlers,
    private readonly templater: ChatTemplater,
    private readonly limits: Limits,
  ) {
    const tok = model.model.tokenizer!;
    const ids = resolveProtocolIds(tok, { eosTokenIds: model.model.config.eosTokenIds, padTokenId: model.model.config.padTokenId });
    this.endIdList = [...ids.eosTokenIds, ...ids.endOfTurnIds.filter((id) => !ids.eosTokenIds.includes(id))];
    this.endIds = new Set(this.endIdList);
  }

  private entry(t: TapToken, top: number): LogprobEntry {
    const piece = this.core.piece(t.id);
    const lp = Math.max(t.logprob, -9999);
    return {
      token: piece,
      logprob: lp,
      bytes: [...Buffer.from(piece, 'utf8')],
      top_logprobs: (t.top ?? []).slice(0, top).map(([id, v]) => {
        const p = this.core.piece(id);
        return { token: p, logprob: Math.max(v, -9999), bytes: [...Buffer.from(p, 'utf8')] };
      }),
    };
  }

  /** The text of a sequence's ids without the token that ended the turn. */
  private contentText(ids: readonly number[]): string {
    const last = ids[ids.length - 1];
    const body = last !== undefined && this.endIds.has(last) ? ids.slice(0, -1) : ids.slice();
    return this.core.decode(body, false);
  }

  /** Marks where content stops while a sequence runs: the request's stop strings, and a tool call's opening tag. */
  private cuts(r: ChatRequest): string[] {
    return this.toolMode(r) ? [...r.stop, TOOL_CALL_OPEN] : r.stop;
  }

  private toolMode(r: ChatRequest): boolean {
    return r.tools !== null && r.toolChoice === 'auto';
  }

  /** What a finished sequence shows: content up to its stop string, tool calls parsed from it. */
  private output(r: ChatRequest, g: GenerationResult): ChatOutput {
    let text = this.contentText(g.tokenIds);
    if (g.stop !== undefined) {
      const at = text.indexOf(g.stop);
      if (at >= 0) text = text.slice(0, at);
    }
    const last = g.tokenIds[g.tokenIds.length - 1];
    const stopReason = isLength(g) ? null : (g.stop ?? last ?? null);
    const parsed = this.toolMode(r) ? parseToolCalls(text) : null;
    if (parsed !== null && parsed.toolCalls.length > 0) return { content: parsed.content, toolCalls: parsed.toolCalls, finishReason: 'tool_calls', stopReason };
    return { content: text, toolCalls: [], finishReason: isLength(g) ? 'length' : 'stop', stopReason };
  }

  /** Prompt ids and the new-token budget; a 400 when they do not fit the model. */
  private prepare(r: ChatRequest): { prompt: number[]; maxTokens: number } {
    this.core.checkModel(r.model);
    const prompt = this.templater.encode(r.messages, r.tools);
    const room = this.limits.maxPositions - prompt.length;
    if (room <= 0) throw bad('messages', `the rendered conversation is ${prompt.length} tokens; the model attends to at most ${this.limits.maxPositions}`);
    if (r.maxTokens !== null && r.maxTokens > room) {
      throw bad(r.maxTokensField, `${r.maxTokens} new tokens after a prompt of ${prompt.length} exceed the model's ${this.limits.maxPositions} positions (at most ${room})`);
    }
    return { prompt, maxTokens: Math.min(r.maxTokens ?? room, this.limits.maxTokens) };
  }

  private settings(r: ChatRequest, maxTokens: number) {
    return { temperature: r.temperature, topP: r.topP, topK: r.topK, maxTokens, stop: r.stop, seed: r.seed, stopTokenIds: [], baseStopTokenIds: this.endIdList };
  }

  /** POST /v1/chat/completions; with `events` (stream: true) the answer goes out as chunks and this resolves to undefined. */
  async chat(r: ChatRequest, signal?: AbortSignal, events?: EventStream, capture?: CallCapture): Promise<unknown> {
    const { prompt, maxTokens } = this.prepare(r);
    capture?.admit(prompt.length, maxTokens);
    if (r.stream) {
      if (events === undefined) throw new Error('a streamed request needs its event stream');
      return this.streamed(r, prompt, maxTokens, signal, events, capture);
    }
    const entries: LogprobEntry[][] = [];
    // Alternatives come from a tap; the chosen tokens' log-probs from the generator.
    const tops: ([number, number][] | null)[][] = Array.from({ length: r.n }, () => []);
    const sampled = r.topLogprobs === 0 ? undefined : new TokenTap(r.n, r.temperature, false, r.topLogprobs, (k, toks) => tops[k]!.push(...toks.map((t) => t.top)));
    const [results] = await this.core.sample([prompt], r.n, this.settings(r, maxTokens), signal, sampled);
    if (capture !== undefined) capture.record(prompt, results![0]!, this.output(r, results![0]!).finishReason);
    let generated = 0;
    const choices = results!.map((g, k) => {
      generated += g.tokenIds.length;
      const out = this.output(r, g);
      if (r.logprobs) entries[k] = g.tokenIds.map((id, i) => this.entry({ id, logprob: g.logprobs[i]!, top: tops[k]![i] ?? null }, r.topLogprobs));
      const message: Record<string, unknown> = { role: 'assistant', content: out.content };
      if (out.toolCalls.length > 0) message['tool_calls'] = out.toolCalls;
      const choice: Record<string, unknown> = {
        index: k,
        message,
        logprobs: r.logprobs ? { content: entries[k], refusal: null } : null,
        finish_reason: out.finishReason,
        stop_reason: out.stopReason,
      };
      if (r.returnTokenIds) choice['token_ids'] = g.tokenIds;
      return choice;
    });
    const answer: Record<string, unknown> = {
      id: `chatcmpl-${randomBytes(12).toString('hex')}`,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: this.core.modelName,
      choices,
      usage: { prompt_tokens: prompt.length, completion_tokens: generated, total_tokens: prompt.length + generated },
    };
    if (r.returnTokenIds) answer['prompt_token_ids'] = prompt;
    return answer;
  }

  /**
   * stream: true. Per choice: a first chunk with the role, a chunk per sampled token (the content
   * that is safe to show so far, the token's log-probs and id), then the rest of the content or
   * the tool calls and the finish reason; after all choices the usage chunk when asked, then [DONE].
   */
  private async streamed(r: ChatRequest, prompt: number[], maxTokens: number, signal: AbortSignal | undefined, events: EventStream, capture: CallCapture | undefined): Promise<undefined> {
    const id = `chatcmpl-${randomBytes(12).toString('hex')}`;
    const created = Math.floor(Date.now() / 1000);
    const base = { id, object: 'chat.completion.chunk', created, model: this.core.modelName };
    const usageNull = r.includeUsage ? { usage: null } : {};
    const send = (choice: Record<string, unknown>, extra: Record<string, unknown> = {}) => events.send({ ...base, choices: [choice], ...usageNull, ...extra });
    for (let k = 0; k < r.n; k++) {
      send({ index: k, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }, k === 0 && r.returnTokenIds ? { prompt_token_ids: prompt } : {});
    }
    const ids: number[][] = Array.from({ length: r.n }, () => []);
    const shown: string[] = Array.from({ length: r.n }, () => '');
    const cuts = this.cuts(r);
    const tap = new TokenTap(r.n, r.temperature, r.logprobs, r.topLogprobs, (k, toks, g) => {
      ids[k]!.push(...toks.map((t) => t.id));
      let delta = '';
      let out: ChatOutput | null = null;
      if (g === null) {
        const safe = safeText(this.core.decode(ids[k]!, false), cuts);
        if (safe.startsWith(shown[k]!)) delta = safe.slice(shown[k]!.length);
      } else {
        out = this.output(r, g);
        const content = out.content ?? '';
        if (content.startsWith(shown[k]!)) delta = content.slice(shown[k]!.length);
      }
      shown[k] += delta;
      const choice: Record<string, unknown> = { index: k, delta: delta === '' ? {} : { content: delta }, logprobs: r.logprobs ? { content: toks.map((t) => this.entry(t, r.topLogprobs)), refusal: null } : null, finish_reason: null };
      if (r.returnTokenIds) choice['token_ids'] = toks.map((t) => t.id);
      if (out === null) {
        if (delta !== '' || r.logprobs || r.returnTokenIds) send(choice);
        return;
      }
      if (out.toolCalls.length > 0) {
        (choice['delta'] as Record<string, unknown>)['tool_calls'] = out.toolCalls.map((c, i) => ({ index: i, ...c }));
      }
      if (delta !== '' || out.toolCalls.length > 0 || toks.length > 0) send(choice);
      send({ index: k, delta: {}, logprobs: null, finish_reason: out.finishReason, stop_reason: out.stopReason });
    });
    const [results] = await this.core.sample([prompt], r.n, this.settings(r, maxTokens), signal, tap);
    // Recorded before [DONE]: a client that saw the end of its stream saw a recorded call.
    if (capture !== undefined) capture.record(prompt, results![0]!, this.output(r, results![0]!).finishReason);
    if (r.includeUsage) {
      const generated = ids.reduce((a, s) => a + s.length, 0);
      events.send({ ...base, choices: [], usage: { prompt_tokens: prompt.length, completion_tokens: generated, total_tokens: prompt.length + generated } });
    }
    events.done();
    return undefined;
  }
}
