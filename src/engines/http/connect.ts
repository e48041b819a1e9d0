/**
 * `connectCompletionsServers(config)`: an `HttpCompletionsBackend` (the pipeline's Generator and
 * TargetScorer) from a plain config object, as `mempo rollout --server URL ...` builds it. The
 * local model directory provides only the tokenizer (tokenizer.json, tokenizer_config.json: chat
 * template, codec, its eos) and, when there, config.json / generation_config.json (eos ids, the
 * context length); no ONNX file or architecture field is needed. The context length is
 * `max_model_len` of `GET /v1/models` (vLLM's ModelCard), else config.json's. The model name
 * defaults to the first one `GET /v1/models` of the first endpoint lists (vLLM and SGLang both
 * serve it), else the directory's name; every name listed is accepted in answers (vLLM answers
 * with the first `--served-model-name` whichever alias was asked for).
 */
import { basename, resolve } from 'node:path';
import { readServerModelConfig } from '../local/model-dir';
import { Tokenizer } from '../local/tokenizer';
import type { TextCodec } from '../../contracts';
import { MempoError } from '../../errors';
import { HttpCompletionsBackend } from './client';
import { apiKeyOf, COMPLETIONS_APIS, HTTP_ENGINE_DEFAULTS, withBearer, type CompletionsApi, type HttpCompletionsOptions } from './options';
import { serverBaseUrl } from './url';
import { isHttpUrl } from '../../validate';

export interface ServerBackendConfig extends Omit<HttpCompletionsOptions, 'model' | 'codec' | 'maxContextTokens' | 'api'> {
  /** Endpoints: base URLs (`http://host:port`) or full endpoint URLs; a string may list several, comma-separated. */
  urls: string | readonly string[];
  /** 'vllm' (POST /v1/completions, default) or 'sglang' (POST /generate). */
  api?: CompletionsApi;
  /** Model name; default: the first id GET /v1/models lists on the first endpoint, else the model directory's name. */
  model?: string | null;
  /** Local model directory: tokenizer.json, tokenizer_config.json; config.json and generation_config.json optional (no ONNX file needed). */
  modelDir?: string;
  /** Instead of loading the tokenizer from modelDir. */
  codec?: TextCodec;
  /** Default: max_model_len from /v1/models, else config.json's max_position_embeddings (one of them must be there). */
  maxContextTokens?: number;
  /** Progress lines (which model name was chosen and why). */
  log?: (line: string) => void;
}

/** Splits and trims endpoint lists ("a,b", ["a", "b,c"]); an empty list is an error. */
export function serverUrls(urls: string | readonly string[]): string[] {
  const list = (typeof urls === 'string' ? [urls] : [...urls]).flatMap((u) => u.split(',')).map((u) => u.trim()).filter((u) => u.length > 0);
  if (list.length === 0) throw new MempoError('ERR_INVALID_OPTION', 'Expected at least one server URL');
  for (const u of list) {
    if (!isHttpUrl(u)) {
      throw new MempoError('ERR_INVALID_OPTION', `Expected an http(s) server URL (e.g. http://127.0.0.1:8000) but received ${JSON.stringify(u)}`);
    }
  }
  return list;
}

interface ModelCard {
  id: string;
  maxModelLen: number | null;
}

/** GET {base}/v1/models: the served models, or the reason it could not be read. */
export async function listServedModels(url: string, timeoutMs: number = HTTP_ENGINE_DEFAULTS.modelsTimeoutMs, f: typeof fetch = fetch): Promise<{ url: string; models: ModelCard[] } | { url: string; error: string }> {
  const at = `${serverBaseUrl(url)}/v1/models`;
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), timeoutMs);
  try {
    const res = await f(at, { signal: ctl.signal });
    const text = await res.text();
    if (res.status !== 200) return { url: at, error: `HTTP ${res.status}: ${text.slice(0, 200)}` };
    const j = JSON.parse(text) as { data?: unknown };
    if (!Array.isArray(j.data)) return { url: at, error: 'the answer has no "data" list' };
    const models = j.data
      .filter((m): m is Record<string, unknown> => typeof m === 'object' && m !== null && typeof (m as Record<string, unknown>)['id'] === 'string')
      .map((m) => ({ id: m['id'] as string, maxModelLen: typeof m['max_model_len'] === 'number' ? (m['max_model_len'] as number) : null }));
    return { url: at, models };
  } catch (err) {
    return { url: at, error: ctl.signal.aborted ? `no answer within ${timeoutMs} ms` : (err as Error).message };
  } finally {
    clearTimeout(timer);
  }
}

export async function connectCompletionsServers(config: ServerBackendConfig): Promise<HttpCompletionsBackend> {
  const urls = serverUrls(config.urls);
  const api = config.api ?? HTTP_ENGINE_DEFAULTS.api;
  if (!COMPLETIONS_APIS.includes(api)) throw new MempoError('ERR_INVALID_OPTION', `Unknown server api ${JSON.stringify(api)}; expected one of ${COMPLETIONS_APIS.join(', ')}`);
  const log = config.log ?? (() => undefined);
  if (config.codec === undefined && config.modelDir === undefined) throw new MempoError('ERR_INVALID_OPTION', 'connectCompletionsServers needs modelDir (for the tokenizer) or codec');
  const dir = config.modelDir === undefined ? null : resolve(config.modelDir);
  const modelConfig = dir === null ? null : readServerModelConfig(dir);
  const codec = config.codec ?? (await Tokenizer.load(dir!));

  const listed = await listServedModels(urls[0]!, Math.min(config.timeoutMs ?? HTTP_ENGINE_DEFAULTS.modelsTimeoutMs, HTTP_ENGINE_DEFAULTS.modelsTimeoutMs), withBearer(config.fetch ?? fetch, apiKeyOf(config)));
  let model: string;
  let card: ModelCard | undefined;
  if ('models' in listed && listed.models.length > 0) {
    const wanted = config.model ?? null;
    card = wanted === null ? listed.models[0] : listed.models.find((m) => m.id === wanted);
    if (card === undefined) {
      throw new MempoError('ERR_INVALID_OPTION', `model ${JSON.stringify(wanted)} is not served: ${listed.url} lists ${listed.models.map((m) => JSON.stringify(m.id)).join(', ')}`);
    }
    model = card.id;
    log(`server model "${model}" (${wanted === null ? 'from' : 'checked against'} ${listed.url})`);
  } else {
    const why = 'error' in listed ? listed.error : 'it lists no model';
    if (config.model) model = config.model;
    else if (dir !== null) model = basename(dir);
    else throw new MempoError('ERR_INVALID_OPTION', `Could not read the model name from ${listed.url} (${why}); pass model`);
    log(`server model "${model}" (${listed.url} could not be read: ${why})`);
  }
  const maxContextTokens = config.maxContextTokens ?? card?.maxModelLen ?? modelConfig?.maxPositions;
  if (maxContextTokens === undefined) {
    const served = 'error' in listed ? `${listed.url} could not be read (${listed.error})` : card ? `${listed.url} gives no max_model_len for "${model}"` : `${listed.url} lists no model`;
    const local = dir === null ? 'no model directory was given' : `${dir} has no config.json with max_position_embeddings`;
    throw new MempoError('ERR_INVALID_OPTION', `the model's context length is unknown: ${served} and ${local}; pass maxContextTokens`);
  }
  const eosTokenIds = config.eosTokenIds ?? (modelConfig && modelConfig.eosTokenIds.length > 0 ? modelConfig.eosTokenIds : undefined);
  const { urls: _u, api: _a, model: _m, modelDir: _d, codec: _c, maxContextTokens: _x, log: _l, ...rest } = config;
  // vLLM lists every --served-model-name and answers with the first: all of them name this model.
  const modelAliases = 'models' in listed ? listed.models.map((m) => m.id).filter((id) => id !== model) : [];
  return new HttpCompletionsBackend(urls, { ...rest, api, model, codec, maxContextTokens, modelAliases, ...(eosTokenIds ? { eosTokenIds } : {}) });
}
