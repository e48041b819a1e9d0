/**
 * @jest-environment ./test/runtime-environment.js
 *
 * `mempo serve`'s POST /update_weights_from_disk (SGLang's shapes, src/servers/weight-update.ts),
 * over real HTTP on 127.0.0.1: the answers change with the weights and come back exactly with the
 * original ones; bad bodies are 400 naming the field; a directory that fails to load is SGLang's
 * failure answer with the old weights kept; requests in flight finish on the old weights and
 * requests arriving during the update wait for it.
 */
import type * as http from 'node:http';
import { rmSync } from 'node:fs';
import { LocalModel } from '../../src/engines/local/local-model';
import { createCompletionsServer, listen } from '../../src/servers/completions-server';
import { RequestError } from '../../src/servers/http';
import { WeightGate } from '../../src/servers/weight-update';
import { MODEL_DIR } from '../engines/local/helpers';
import { editConfig, reweightedModel } from '../engines/local/reweighted';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('WeightGate', () => {
  it('an update waits for the running requests; requests arriving meanwhile wait for the update', async () => {
    const gate = new WeightGate();
    const order: string[] = [];
    let finishA!: () => void;
    const a = gate.run(new AbortController(), () => new Promise<void>((r) => (finishA = r)).then(() => order.push('a')));
    const up = gate.update(false, async () => order.push('reload'));
    const b = gate.run(new AbortController(), async () => order.push('b'));
    await sleep(10);
    expect(order).toEqual([]);
    finishA();
    await Promise.all([a, up, b]);
    expect(order).toEqual(['a', 'reload', 'b']);
    expect((await up).paused).toBe(1);
    expect((await up).result.status).toBe('fulfilled');
  });

  it('abort_all_requests aborts the running requests with a 503 before reloading; a failed reload is reported, not thrown', async () => {
    const gate = new WeightGate();
    const ctl = new AbortController();
    const running = gate.run(ctl, () => new Promise((_, reject) => ctl.signal.addEventListener('abort', () => reject(ctl.signal.reason as Error))));
    const up = await gate.update(true, async () => {
      throw new Error('no such model');
    });
    await expect(running).rejects.toMatchObject({ status: 503 });
    expect(ctl.signal.reason).toBeInstanceOf(RequestError);
    expect(up.result.status).toBe('rejected');
    expect(await gate.run(new AbortController(), async () => 'after')).toBe('after');
  });
});

describe('mempo serve POST /update_weights_from_disk', () => {
  let model: LocalModel;
  let server: http.Server;
  let url: string;
  let reweighted: string;
  const tmp: string[] = [];

  beforeAll(async () => {
    reweighted = reweightedModel();
    tmp.push(reweighted);
    model = await LocalModel.load(MODEL_DIR);
    server = createCompletionsServer(model, { maxConcurrency: 2 });
    url = await listen(server, 0);
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    await model.dispose();
    for (const d of tmp) rmSync(d, { recursive: true, force: true });
  });

  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  };
  const update = (body: unknown) => post('/update_weights_from_disk', body);
  /** What a /generate answer says about the weights: the tokens and every log-prob (the random id left out). */
  const gen = async (body: Record<string, unknown>) => {
    const r = await post('/generate', body);
    expect(r.status).toBe(200);
    const list = (Array.isArray(r.json) ? r.json : [r.json]) as { output_ids: number[]; meta_info: Record<string, unknown> }[];
    return list.map((x) => ({ ids: x.output_ids, input: x.meta_info['input_token_logprobs'], output: x.meta_info['output_token_logprobs'] }));
  };
  const SHORT = { input_ids: [5, 17, 99, 300, 42, 7, 8, 9], sampling_params: { max_new_tokens: 6, temperature: 1, sampling_seed: 5 }, return_logprob: true, logprob_start_len: 0 };
  // Near-uniform sampling rarely draws eos: this one runs its 120 steps (about a second here).
  const LONG = { input_ids: [5, 17, 99, 300], sampling_params: { max_new_tokens: 120, temperature: 50, n: 2, sampling_seed: 2 }, return_logprob: true };

  it('changes the answers, and the original directory gives the original answers back exactly', async () => {
    const before = await gen(SHORT);
    const up = await update({ model_path: reweighted });
    expect(up.status).toBe(200);
    expect(up.json).toMatchObject({ success: true, num_paused_requests: 0 });
    expect(up.json['message']).toMatch(/^Succeeded to update model weights from .*model\.onnx/);
    const after = await gen(SHORT);
    expect(after).not.toEqual(before);
    expect(after[0]!.input).not.toEqual(before[0]!.input);
    const back = await update({ model_path: MODEL_DIR, load_format: 'auto', abort_all_requests: false });
    expect(back.status).toBe(200);
    expect(await gen(SHORT)).toEqual(before);
  });

  it.each([
    ['not JSON', '{"model_path":', /body is not valid JSON/],
    ['a list', '[1]', /body must be a JSON object/],
    ['no model_path', {}, /field "model_path": expected a non-empty string/],
    ['model_path 5', { model_path: 5 }, /field "model_path"/],
    ['load_format safetensors', { model_path: MODEL_DIR, load_format: 'safetensors' }, /field "load_format": mempo serve loads ONNX model directories only/],
    ['abort_all_requests "yes"', { model_path: MODEL_DIR, abort_all_requests: 'yes' }, /field "abort_all_requests": expected a boolean/],
    ['an unknown field', { model_path: MODEL_DIR, model: 'x' }, /field "model": not a field of SGLang's UpdateWeightFromDiskReqInput/],
    ['flush_cache false', { model_path: MODEL_DIR, flush_cache: false }, /field "flush_cache": only true is supported/],
  ])('answers 400 naming the field for %s', async (_name, body, message) => {
    const r = await update(body);
    expect(r.status).toBe(400);
    expect(r.json['success']).toBe(false);
    expect(r.json['num_paused_requests']).toBe(0);
    expect(r.json['message']).toMatch(message);
  });

  it('answers SGLang\'s failure (400, success false) for a directory that does not load, and keeps the old weights', async () => {
    const before = await gen(SHORT);
    const missing = await update({ model_path: '/nonexistent/mempo-step-3' });
    expect(missing.status).toBe(400);
    expect(missing.json).toMatchObject({ success: false, num_paused_requests: 0 });
    expect(missing.json['message']).toMatch(/Failed to update weights from \/nonexistent\/mempo-step-3: .*does not exist \(the old weights are kept\)/);
    const other = reweightedModel({ edit: (d) => editConfig(d, 'num_hidden_layers', 6) });
    tmp.push(other);
    const mismatch = await update({ model_path: other });
    expect(mismatch.status).toBe(400);
    expect(mismatch.json['message']).toMatch(/config\.json num_hidden_layers is 6, the loaded model's is 4/);
    expect(await gen(SHORT)).toEqual(before);
    const get = await fetch(`${url}/update_weights_from_disk`);
    expect(get.status).toBe(405);
  });

  it('a request in flight finishes on the old weights; one arriving during the update waits and gets the new ones', async () => {
    const oldLong = await gen(LONG);
    await update({ model_path: reweighted });
    const newShort = await gen(SHORT);
    await update({ model_path: MODEL_DIR });

    const order: string[] = [];
    const inFlight = gen(LONG).then((r) => (order.push('long'), r));
    await sleep(50);
    const up = update({ model_path: reweighted }).then((r) => (order.push('update'), r));
    await sleep(50);
    const waiting = gen(SHORT).then((r) => (order.push('short'), r));
    const [longAnswer, upAnswer, shortAnswer] = await Promise.all([inFlight, up, waiting]);
    expect(longAnswer).toEqual(oldLong);
    expect(shortAnswer).toEqual(newShort);
    expect(order).toEqual(['long', 'update', 'short']);
    expect(upAnswer.json).toMatchObject({ success: true, num_paused_requests: 1 });
    await update({ model_path: MODEL_DIR });
  });

  it('abort_all_requests ends the request in flight with 503, then updates', async () => {
    const inFlight = post('/generate', LONG);
    await sleep(50);
    const up = await update({ model_path: reweighted, abort_all_requests: true });
    expect(up.status).toBe(200);
    const aborted = await inFlight;
    expect(aborted.status).toBe(503);
    expect(JSON.stringify(aborted.json)).toMatch(/abort_all_requests/);
    await update({ model_path: MODEL_DIR });
  });
});
