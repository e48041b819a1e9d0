/**
 * The SGLang dialect: SGLang's native `POST /generate` (field shapes as of SGLang v0.5.3,
 * `python/sglang/srt/managers/io_struct.py::GenerateReqInput` and `tokenizer_manager.py`):
 * `{ input_ids, sampling_params: { temperature, top_p, top_k, max_new_tokens, stop, n,
 * sampling_seed, no_stop_trim, skip_special_tokens }, return_logprob, logprob_start_len }`,
 * answered by `{ text, output_ids, meta_info: { finish_reason: { type: 'stop' | 'length',
 * matched? }, prompt_tokens, completion_tokens, output_token_logprobs: [[logprob, id, text |
 * null], ...], input_token_logprobs: same shape } }` (an array of those for a batch of prompts).
 * The first `input_token_logprobs` entry is always `null` (SGLang pads it), so scoring asks from
 * `logprob_start_len = context length - 1` and reads entries 1.. as the target's log-probs.
 */
import type { GenerateParams, GenerationOutput, GenerationRequest } from '../../contracts';
import { finishOf, isTokenId, NEUTRAL_SCORING, serverTopK, type CompletionsDialect, type ScoringJob } from './dialect';
import { serverError } from '../../errors';

export function sglangDialect(eos: ReadonlySet<number>): CompletionsDialect {
  return {
    generationBody,
    parseGeneration: (j, where, r) => parseGeneration(answers(j, where, 1)[0]!, where, r, eos),
    scoringBody: (group) => ({
      input_ids: group.map((x) => x.prompt),
      sampling_params: NEUTRAL_SCORING.sglang,
      return_logprob: true,
      logprob_start_len: group.map((x) => x.ctx - 1),
      stream: false,
    }),
    scoringAnswers: (j, where, group) => answers(j, where, group.length),
    targetLogprobs: (part, w, x) => targetLogprobs(part as Record<string, unknown>, w, x),
  };
}

function generationBody(r: GenerationRequest, params: GenerateParams, seed: number | undefined): unknown {
  return {
    input_ids: [...r.ids],
    sampling_params: {
      temperature: params.temperature,
      top_p: params.topP,
      top_k: serverTopK(params.topK),
      // Explicit, so that the model's generation_config.json defaults (e.g. Qwen's 1.05) do not apply.
      repetition_penalty: 1,
      max_new_tokens: r.maxNewTokens,
      stop: [...params.stop],
      n: 1,
      no_stop_trim: true,
      skip_special_tokens: false,
      ...(seed !== undefined ? { sampling_seed: seed } : {}),
    },
    return_logprob: true,
    stream: false,
  };
}

/** SGLang answers one object per prompt and sample; a single prompt with n = 1 may come as an object or a one-element array. */
function answers(j: unknown, where: string, count: number): Record<string, unknown>[] {
  const arr = Array.isArray(j) ? j : [j];
  if (arr.length !== count) throw serverError(`${where}: ${arr.length} answers for ${count} prompts`);
  return arr.map((a, k) => {
    if (typeof a !== 'object' || a === null || Array.isArray(a)) throw serverError(`${where}: answer ${k} is not a JSON object`);
    const m = (a as Record<string, unknown>)['meta_info'];
    if (typeof m !== 'object' || m === null) throw serverError(`${where}: answer ${k} has no "meta_info" object`);
    return a as Record<string, unknown>;
  });
}

/** [[logprob, id, text], ...] → checked pairs; `nullFirst` allows a null log-prob in the first entry. */
function logprobTuples(v: unknown, where: string, field: string, nullFirst: boolean): { lp: number | null; id: number }[] {
  if (!Array.isArray(v)) throw serverError(`${where}: meta_info.${field} is missing (send return_logprob)`);
  return v.map((e, k) => {
    if (!Array.isArray(e) || e.length < 2 || !isTokenId(e[1]) || !(typeof e[0] === 'number' || (e[0] === null && nullFirst && k === 0))) {
      throw serverError(`${where}: meta_info.${field}[${k}] is not [logprob, token_id, text]: ${JSON.stringify(e)?.slice(0, 80)}`);
    }
    return { lp: e[0] as number | null, id: e[1] as number };
  });
}

function parseGeneration(a: Record<string, unknown>, where: string, r: GenerationRequest, eos: ReadonlySet<number>): GenerationOutput {
  const meta = a['meta_info'] as Record<string, unknown>;
  const tuples = logprobTuples(meta['output_token_logprobs'], where, 'output_token_logprobs', false);
  const ids = tuples.map((t) => t.id);
  const out = a['output_ids'];
  if (out !== undefined) {
    if (!Array.isArray(out) || !out.every(isTokenId)) throw serverError(`${where}: "output_ids" is not an array of token ids`);
    if (out.length !== ids.length || out.some((x, k) => x !== ids[k])) throw serverError(`${where}: "output_ids" and meta_info.output_token_logprobs disagree`);
  }
  if (ids.length > r.maxNewTokens) throw serverError(`${where}: ${ids.length} tokens returned, more than max_new_tokens ${r.maxNewTokens}`);
  const fr = meta['finish_reason'] as { type?: unknown } | null | undefined;
  const type = typeof fr === 'object' && fr !== null ? fr.type : fr;
  if (type !== 'stop' && type !== 'length') throw serverError(`${where}: meta_info.finish_reason ${JSON.stringify(fr)}, expected type 'stop' or 'length'`);
  return { tokenIds: ids, logprobs: Float32Array.from(tuples.map((t) => t.lp as number)), finishReason: finishOf(ids, type === 'stop', eos) };
}

/** input_token_logprobs from logprob_start_len = ctx - 1: entry 0 is SGLang's null pad, entries 1.. the target's. */
function targetLogprobs(a: Record<string, unknown>, w: string, x: ScoringJob): Float32Array {
  const meta = a['meta_info'] as Record<string, unknown>;
  const tuples = logprobTuples(meta['input_token_logprobs'], w, 'input_token_logprobs', true);
  if (tuples.length !== x.tgt.length + 1) throw serverError(`${w}: ${tuples.length} input_token_logprobs from logprob_start_len ${x.ctx - 1} of a ${x.prompt.length}-token prompt (expected ${x.tgt.length + 1})`);
  const lp = new Float32Array(x.tgt.length);
  for (let t = 0; t < lp.length; t++) {
    const e = tuples[t + 1]!;
    if (e.id !== x.tgt[t]) throw serverError(`${w}: input_token_logprobs[${t + 1}] is for token ${e.id}, the request has ${x.tgt[t]} there`);
    lp[t] = e.lp as number;
  }
  return lp;
}
