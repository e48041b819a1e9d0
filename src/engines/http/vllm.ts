/**
 * The vLLM dialect: the OpenAI completions API as vLLM serves it, `POST /v1/completions` with
 * token-id prompts. Generation reads the sampled ids from `choices[].token_ids`
 * (`return_token_ids`, vLLM >= 0.10.2) or, failing that, from `logprobs.tokens` written as
 * `token_id:N` (`return_tokens_as_token_ids`). Scoring sends context + target as one prompt with
 * `prompt_logprobs: 0` and reads `choices[k].prompt_logprobs` (several items per request:
 * `prompt` is then a list of token-id lists, one choice per item). Every answer must name the
 * model the request was sent to or one of its aliases (vLLM answers with the first
 * `--served-model-name` whichever alias was asked for). Fields vLLM leaves out of an answer come
 * as null (`token_ids`, `prompt_token_ids`, `prompt_logprobs` unless asked for); prompt log-prob
 * entries are `{ logprob, rank, decoded_token }` (vllm/entrypoints/openai/protocol.py).
 */
import type { GenerateParams, GenerationOutput, GenerationRequest } from '../../contracts';
import { finishOf, isTokenId, NEUTRAL_SCORING, serverTopK, type CompletionsDialect, type ScoringJob } from './dialect';
import { serverError } from '../../errors';

export function vllmDialect(model: string, eos: ReadonlySet<number>, aliases: readonly string[] = []): CompletionsDialect {
  const names = new Set([model, ...aliases]);
  return {
    generationBody: (r, params, seed) => generationBody(model, r, params, seed),
    parseGeneration: (j, where, r) => parseGeneration(answer(j, where, model, names), where, r, eos),
    scoringBody: (group) => ({ model, prompt: group.map((x) => x.prompt), ...NEUTRAL_SCORING.vllm, prompt_logprobs: 0, n: 1 }),
    scoringAnswers: (j, where, group) => scoringChoices(answer(j, where, model, names), where, group),
    targetLogprobs: (part, w, x, g) => targetLogprobs(part as Record<string, unknown> | undefined, w, x, g),
  };
}

function generationBody(model: string, r: GenerationRequest, params: GenerateParams, seed: number | undefined): unknown {
  return {
    model,
    prompt: [...r.ids],
    n: 1,
    temperature: params.temperature,
    top_p: params.topP,
    // top_k and repetition_penalty explicit, so that the model's generation_config.json defaults do not apply.
    top_k: serverTopK(params.topK),
    repetition_penalty: 1,
    max_tokens: r.maxNewTokens,
    stop: [...params.stop],
    include_stop_str_in_output: true,
    skip_special_tokens: false,
    logprobs: 0,
    ...(seed !== undefined ? { seed } : {}),
    return_tokens_as_token_ids: true,
    return_token_ids: true,
  };
}

/** A completions answer object from `model` (or an alias of it), with a "choices" array. */
function answer(j: unknown, where: string, model: string, names: ReadonlySet<string>): Record<string, unknown> {
  if (typeof j !== 'object' || j === null || Array.isArray(j)) throw serverError(`${where}: the answer is not a JSON object`);
  const o = j as Record<string, unknown>;
  if (typeof o['model'] !== 'string' || !names.has(o['model'])) {
    const also = names.size > 1 ? ` (or one of its aliases ${[...names].filter((n) => n !== model).map((n) => JSON.stringify(n)).join(', ')})` : '';
    throw serverError(`${where}: the answer comes from model ${JSON.stringify(o['model'])}, expected ${JSON.stringify(model)}${also}`);
  }
  if (!Array.isArray(o['choices'])) throw serverError(`${where}: the answer has no "choices" array`);
  return o;
}

/** The sampled ids: `token_ids`, checked against logprobs.tokens when both are there, else logprobs.tokens as "token_id:N". */
function sampledIds(c: Record<string, unknown>, where: string): number[] {
  const lp = c['logprobs'] as { tokens?: unknown } | null | undefined;
  const fromTokens = Array.isArray(lp?.tokens) ? (lp!.tokens as unknown[]).map((t) => (typeof t === 'string' && /^token_id:\d+$/.test(t) ? Number(t.slice(9)) : null)) : null;
  if (Array.isArray(c['token_ids'])) {
    const t = c['token_ids'] as unknown[];
    if (!t.every(isTokenId)) throw serverError(`${where}: "token_ids" is not an array of token ids`);
    const ids = t as number[];
    if (fromTokens && fromTokens.every((x) => x !== null) && (fromTokens.length !== ids.length || fromTokens.some((x, k) => x !== ids[k]))) {
      throw serverError(`${where}: "token_ids" and logprobs.tokens disagree`);
    }
    return ids;
  }
  if (fromTokens && fromTokens.every((x) => x !== null)) return fromTokens as number[];
  throw serverError(`${where}: the choice has neither "token_ids" nor logprobs.tokens as "token_id:N" (start vLLM >= 0.10.2, or one that honours return_tokens_as_token_ids)`);
}

function parseGeneration(o: Record<string, unknown>, where: string, r: GenerationRequest, eos: ReadonlySet<number>): GenerationOutput {
  const c = (o['choices'] as Record<string, unknown>[])[0];
  if (c === undefined || typeof c !== 'object' || c === null) throw serverError(`${where}: the answer has no choice`);
  const ids = sampledIds(c, where);
  const pids = c['prompt_token_ids'];
  if (Array.isArray(pids) && (pids.length !== r.ids.length || pids.some((x, k) => x !== r.ids[k]))) {
    throw serverError(`${where}: "prompt_token_ids" do not match the ${r.ids.length} prompt tokens sent`);
  }
  if (ids.length > r.maxNewTokens) throw serverError(`${where}: ${ids.length} tokens returned, more than max_tokens ${r.maxNewTokens}`);
  const lps = (c['logprobs'] as { token_logprobs?: unknown } | null | undefined)?.token_logprobs;
  if (!Array.isArray(lps) || lps.length !== ids.length || lps.some((x) => typeof x !== 'number')) throw serverError(`${where}: missing or malformed logprobs.token_logprobs (expected ${ids.length} numbers)`);
  const fr = c['finish_reason'];
  if (fr !== 'length' && fr !== 'stop') throw serverError(`${where}: unknown finish_reason ${JSON.stringify(fr)}`);
  return { tokenIds: ids, logprobs: Float32Array.from(lps as number[]), finishReason: finishOf(ids, fr === 'stop', eos) };
}

/** One choice per item, matched by its `index` (else its position). */
function scoringChoices(o: Record<string, unknown>, where: string, group: readonly ScoringJob[]): (Record<string, unknown> | undefined)[] {
  const choices = o['choices'] as Record<string, unknown>[];
  if (choices.length !== group.length) throw serverError(`${where}: ${choices.length} choices for ${group.length} prompts`);
  const byIndex = new Map<number, Record<string, unknown>>();
  choices.forEach((c, n) => byIndex.set(typeof c?.['index'] === 'number' ? (c['index'] as number) : n, c));
  return group.map((_, g) => byIndex.get(g));
}

/** prompt_logprobs[ctx + t][target[t]].logprob for each target token. */
function targetLogprobs(c: Record<string, unknown> | undefined, w: string, x: ScoringJob, g: number): Float32Array {
  const pl = c?.['prompt_logprobs'];
  if (!Array.isArray(pl)) throw serverError(`${w}: choice ${g} has no "prompt_logprobs" array`);
  if (pl.length !== x.prompt.length) throw serverError(`${w}: ${pl.length} prompt_logprobs for a ${x.prompt.length}-token prompt`);
  const lp = new Float32Array(x.tgt.length);
  for (let t = 0; t < lp.length; t++) {
    const pos = x.ctx + t;
    const entry = pl[pos] as Record<string, { logprob?: unknown }> | null;
    const id = x.prompt[pos]!;
    const v = entry?.[String(id)]?.logprob;
    if (typeof v !== 'number') {
      const keys = entry && typeof entry === 'object' ? Object.keys(entry).join(', ') : String(entry);
      throw serverError(`${w}: prompt_logprobs[${pos}] has no log-prob for the requested token ${id} (has: ${keys})`);
    }
    lp[t] = v;
  }
  return lp;
}
