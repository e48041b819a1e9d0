/**
 * A strict SGLang-shaped fake of the native `POST /generate` and `GET /v1/models`, on 127.0.0.1,
 * written from SGLang's definitions (github.com/sgl-project/sglang at 001067fffe33427bee0ed2f007fb7551a1d76b44):
 *   python/sglang/srt/managers/io_struct.py: GenerateReqInput (text | input_ids, sampling_params,
 *     return_logprob, logprob_start_len — default -1, "only return logprobs for output tokens" —,
 *     top_logprobs_num, return_text_in_logprobs, stream, rid)
 *   python/sglang/srt/sampling/sampling_params.py: SamplingParams(**sampling_params) — an unknown
 *     key is a TypeError there, so an error here too; ranges as SamplingParams.verify
 *   python/sglang/srt/managers/tokenizer_manager.py: the answer { text, output_ids, meta_info: { id,
 *     finish_reason: { type: 'stop', matched: str | id } | { type: 'length', length }, prompt_tokens,
 *     completion_tokens, cached_tokens, input_token_logprobs?, output_token_logprobs? } }, the
 *     log-prob lists only with return_logprob, entries [logprob, id, text | null] (text only with
 *     return_text_in_logprobs), input_token_logprobs from logprob_start_len with a null first
 *     log-prob; a bare object for one prompt with n = 1, else a list.
 * Stricter than SGLang on purpose: unknown top-level fields are refused (400) rather than ignored.
 * POST /update_weights_from_disk as python/sglang/srt/entrypoints/http_server.py serves it, the body
 * checked against io_struct.py UpdateWeightFromDiskReqInput (model_path required; a missing or
 * mistyped field is FastAPI's 422 { detail: [{ type, loc, msg }] }); a directory without
 * config.json fails to load: 400 { success: false, message, num_paused_requests: 0 }, else 200
 * { success: true, ... } and GET /get_model_info reports the new model_path.
 * Completions are canned (`FakeModel.complete`), cut where SGLang stops (see `cutCanned`); the
 * matched stop string is trimmed from `text` unless no_stop_trim.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Answer, BadRequest, cutCanned, serveJson, type FakeModel, type FakeServer } from './vllm-fake';

const TOP_LEVEL = new Set(['text', 'input_ids', 'sampling_params', 'return_logprob', 'logprob_start_len', 'top_logprobs_num', 'return_text_in_logprobs', 'stream', 'rid', 'model']);
const SAMPLING = new Set([
  'max_new_tokens', 'stop', 'stop_token_ids', 'stop_regex', 'temperature', 'top_p', 'top_k', 'min_p', 'frequency_penalty', 'presence_penalty',
  'repetition_penalty', 'min_new_tokens', 'n', 'json_schema', 'regex', 'ebnf', 'structural_tag', 'ignore_eos', 'skip_special_tokens',
  'spaces_between_special_tokens', 'no_stop_trim', 'custom_params', 'stream_interval', 'logit_bias', 'sampling_seed',
]);

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v);

function checkSampling(sp: Record<string, unknown>): void {
  for (const k of Object.keys(sp)) if (!SAMPLING.has(k)) throw new BadRequest(`SamplingParams.__init__() got an unexpected keyword argument '${k}'`);
  const t = sp['temperature'];
  if (t !== undefined && (typeof t !== 'number' || t < 0)) throw new BadRequest('temperature must be non-negative');
  const tp = sp['top_p'];
  if (tp !== undefined && (typeof tp !== 'number' || tp <= 0 || tp > 1)) throw new BadRequest('top_p must be in (0, 1]');
  const tk = sp['top_k'];
  if (tk !== undefined && (!isInt(tk) || (tk < 1 && tk !== -1))) throw new BadRequest('top_k must be -1 (disable), or at least 1');
  const mx = sp['max_new_tokens'];
  if (mx !== undefined && (!isInt(mx) || mx < 0)) throw new BadRequest('max_new_tokens must be at least 0');
  const rp = sp['repetition_penalty'];
  if (rp !== undefined && (typeof rp !== 'number' || rp < 0 || rp > 2)) throw new BadRequest('repetition_penalty must be in [0, 2]');
}

function generate(b: Record<string, unknown>, m: FakeModel): unknown {
  for (const k of Object.keys(b)) if (!TOP_LEVEL.has(k)) throw new BadRequest(`unknown field "${k}" (SGLang would ignore it)`);
  if (b['text'] !== undefined) throw new BadRequest('the fake takes input_ids only');
  if (b['stream'] === true) throw new BadRequest('the fake does not stream');
  const ii = b['input_ids'];
  const batch = Array.isArray(ii) && ii.length > 0 && Array.isArray(ii[0]);
  const prompts = (batch ? ii : [ii]) as unknown[];
  if (!Array.isArray(ii) || ii.length === 0 || !prompts.every((p) => Array.isArray(p) && p.length > 0 && p.every((x) => isInt(x) && x >= 0 && x < m.vocabSize))) {
    throw new BadRequest('input_ids: expected token ids or a list of them');
  }
  const sp = (b['sampling_params'] ?? {}) as Record<string, unknown>;
  if (typeof sp !== 'object' || Array.isArray(sp)) throw new BadRequest('sampling_params: the fake takes one object');
  checkSampling(sp);
  const n = (sp['n'] as number | undefined) ?? 1;
  const starts = prompts.map((p, k) => {
    const ls = b['logprob_start_len'];
    const v = Array.isArray(ls) ? ls[k] : ls;
    const len = (p as number[]).length;
    if (v === undefined || v === null || v === -1) return len - 1;
    if (!isInt(v) || v < 0 || v >= len) throw new BadRequest(`logprob_start_len ${JSON.stringify(v)} out of range for a ${len}-token prompt`);
    return v;
  });
  const withLp = b['return_logprob'] === true;
  const withText = b['return_text_in_logprobs'] === true;
  const stop = sp['stop'] === undefined ? [] : typeof sp['stop'] === 'string' ? [sp['stop']] : (sp['stop'] as string[]);
  const settings = { maxTokens: (sp['max_new_tokens'] as number | undefined) ?? 128, stop, stopTokenIds: (sp['stop_token_ids'] as number[] | undefined) ?? [], ignoreEos: sp['ignore_eos'] === true };
  const tuple = (lp: number | null, id: number) => [lp, id, withText ? m.decode([id]) : null];
  const out: unknown[] = [];
  (prompts as number[][]).forEach((p, k) => {
    for (let j = 0; j < n; j++) {
      const cut = cutCanned(m.complete(p), m, settings);
      let text = m.decode(cut.ids);
      if (typeof cut.stopReason === 'string' && sp['no_stop_trim'] !== true) text = text.slice(0, text.lastIndexOf(cut.stopReason));
      const last = cut.ids[cut.ids.length - 1];
      const meta: Record<string, unknown> = {
        id: Math.random().toString(16).slice(2),
        finish_reason: cut.finish === 'length' ? { type: 'length', length: cut.ids.length } : { type: 'stop', matched: cut.stopReason ?? last ?? null },
        prompt_tokens: p.length,
        completion_tokens: cut.ids.length,
        cached_tokens: 0,
      };
      if (withLp) {
        meta['input_token_logprobs'] = p.slice(starts[k]).map((id, i) => tuple(i === 0 ? null : m.promptLogprob(p.slice(0, starts[k]! + i), id), id));
        meta['output_token_logprobs'] = cut.ids.map((id, i) => tuple(cut.logprobs[i]!, id));
      }
      out.push({ text, output_ids: cut.ids, meta_info: meta });
    }
  });
  return batch || n > 1 ? out : out[0];
}

/** UpdateWeightFromDiskReqInput (with BaseReq's rid): each field's check, the JSON types pydantic accepts. */
const UPDATE_FIELDS: Record<string, [string, (v: unknown) => boolean]> = {
  model_path: ['string_type', (v) => typeof v === 'string'],
  load_format: ['string_type', (v) => v === null || typeof v === 'string'],
  abort_all_requests: ['bool_type', (v) => typeof v === 'boolean'],
  weight_version: ['string_type', (v) => v === null || typeof v === 'string'],
  is_async: ['bool_type', (v) => typeof v === 'boolean'],
  torch_empty_cache: ['bool_type', (v) => typeof v === 'boolean'],
  keep_pause: ['bool_type', (v) => typeof v === 'boolean'],
  recapture_cuda_graph: ['bool_type', (v) => typeof v === 'boolean'],
  token_step: ['int_type', isInt],
  flush_cache: ['bool_type', (v) => typeof v === 'boolean'],
  manifest: ['dict_type', (v) => v === null || (typeof v === 'object' && !Array.isArray(v))],
  rid: ['string_type', (v) => v === null || typeof v === 'string'],
};

function updateWeights(b: Record<string, unknown>, state: { modelPath: string }): Answer {
  for (const k of Object.keys(b)) if (!(k in UPDATE_FIELDS)) throw new BadRequest(`unknown field "${k}" (SGLang would ignore it)`);
  const detail: unknown[] = [];
  if (b['model_path'] === undefined) detail.push({ type: 'missing', loc: ['body', 'model_path'], msg: 'Field required', input: b });
  for (const [k, [type, ok]] of Object.entries(UPDATE_FIELDS)) {
    if (b[k] !== undefined && !ok(b[k])) detail.push({ type, loc: ['body', k], msg: `Input should be a valid ${type.replace('_type', '')}`, input: b[k] });
  }
  if (detail.length > 0) return new Answer(422, { detail });
  const path = b['model_path'] as string;
  if (!existsSync(join(path, 'config.json'))) return new Answer(400, { success: false, message: `Failed to get weights iterator: ${path} has no config.json.`, num_paused_requests: 0 });
  state.modelPath = path;
  return new Answer(200, { success: true, message: 'Succeeded to update model weights.', num_paused_requests: 0 });
}

export function startSglangFake(m: FakeModel, options: { modelPath?: string; maxModelLen?: number } = {}): Promise<FakeServer> {
  const name = options.modelPath ?? 'fake-model';
  const state = { modelPath: name };
  return serveJson((path, method, body) => {
    if (path === '/update_weights_from_disk' && method === 'POST') return updateWeights(body!, state);
    if (path === '/get_model_info' && method === 'GET') return { model_path: state.modelPath, tokenizer_path: name, is_generation: true };
    // SGLang's OpenAI-compatible /v1/models lists the served model with its context length.
    if (path === '/v1/models' && method === 'GET') return { object: 'list', data: [{ id: name, object: 'model', created: 0, owned_by: 'sglang', root: name, max_model_len: options.maxModelLen ?? 4096 }] };
    if (path === '/generate' && method === 'POST') return generate(body!, m);
    throw new BadRequest(`no route ${method} ${path}`);
  }, [], ['/generate', '/update_weights_from_disk']);
}
