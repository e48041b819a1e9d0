/**
 * @jest-environment ./test/runtime-environment.js
 *
 * The shipped model artifact (models/mempo-tiny): manifest sha256 sums, size budget, the
 * optimum text-generation-with-past ONNX layout in onnxruntime-node (empty past, with past,
 * KV path == no-cache path within 1e-4), config.json fields, and an offline tokenizer that
 * round-trips. CI never retrains.
 */
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import * as ort from 'onnxruntime-node';
import { SPECIAL_TOKEN_IDS } from '../../../src/protocol/embedded-ids';
import { renderPrompt } from '../../../src/protocol/chat';
import { renderRound } from '../../../src/protocol/round';
import { loadTokenizer, loadTransformers } from '../../../tools/world/samples';

const DIR = path.join(__dirname, '..', '..', '..', 'models', 'mempo-tiny');
const cfg = JSON.parse(fs.readFileSync(path.join(DIR, 'config.json'), 'utf8'));
const L: number = cfg.num_hidden_layers;
const H: number = cfg.num_key_value_heads;
const HD: number = cfg.hidden_size / cfg.num_attention_heads;
const V: number = cfg.vocab_size;

let session: ort.InferenceSession;
beforeAll(async () => {
  session = await ort.InferenceSession.create(path.join(DIR, 'model.onnx'), { intraOpNumThreads: 2 });
});

function i64(xs: number[], dims: number[]): ort.Tensor {
  return new ort.Tensor('int64', BigInt64Array.from(xs.map((x) => BigInt(x))), dims);
}

type Feeds = Record<string, ort.Tensor>;

/** Feeds for rows of equal length; `mask` per row over past + new tokens. */
function feeds(ids: number[][], mask: number[][], pos: number[][], past: ort.InferenceSession.OnnxValueMapType | null, pastLen: number): Feeds {
  const B = ids.length;
  const T = (ids[0] as number[]).length;
  const f: Feeds = {
    input_ids: i64(ids.flat(), [B, T]),
    attention_mask: i64(mask.flat(), [B, pastLen + T]),
    position_ids: i64(pos.flat(), [B, T]),
  };
  for (let i = 0; i < L; i++) {
    for (const kv of ['key', 'value']) {
      f[`past_key_values.${i}.${kv}`] = past
        ? (past[`present.${i}.${kv}`] as ort.Tensor)
        : new ort.Tensor('float32', new Float32Array(0), [B, H, 0, HD]);
    }
  }
  return f;
}

describe('models/mempo-tiny artifact', () => {
  test('manifest lists every file with its sha256 and size; artifact <= 25 MB', () => {
    const man = JSON.parse(fs.readFileSync(path.join(DIR, 'manifest.json'), 'utf8'));
    const onDisk = fs.readdirSync(DIR).filter((n) => n !== 'manifest.json').sort();
    expect(Object.keys(man.files).sort()).toEqual(onDisk);
    let total = 0;
    for (const [name, info] of Object.entries<{ sha256: string; bytes: number }>(man.files)) {
      const buf = fs.readFileSync(path.join(DIR, name));
      expect(crypto.createHash('sha256').update(buf).digest('hex')).toBe(info.sha256);
      expect(buf.length).toBe(info.bytes);
      total += buf.length;
    }
    for (const f of ['model.onnx', 'config.json', 'tokenizer.json', 'tokenizer_config.json']) expect(man.files[f]).toBeDefined();
    expect(total).toBeLessThanOrEqual(25 * 1024 * 1024);
  });

  test('config.json is HF-style', () => {
    expect(cfg.model_type).toBe('llama');
    expect(cfg.max_position_embeddings).toBeGreaterThanOrEqual(2048);
    expect(cfg.num_key_value_heads).toBe(cfg.num_attention_heads);
    expect(cfg.eos_token_id).toBe(SPECIAL_TOKEN_IDS['<|endoftext|>']);
    expect(cfg.pad_token_id).toBe(0);
    expect(cfg.bos_token_id).toBe(0);
    const params = cfg.mempo?.num_parameters as number;
    expect(params).toBeGreaterThan(1e6);
    expect(params).toBeLessThan(7e6);
  });

  test('ONNX inputs/outputs follow text-generation-with-past', () => {
    const ins = ['input_ids', 'attention_mask', 'position_ids'];
    const outs = ['logits'];
    for (let i = 0; i < L; i++) {
      ins.push(`past_key_values.${i}.key`, `past_key_values.${i}.value`);
      outs.push(`present.${i}.key`, `present.${i}.value`);
    }
    expect([...session.inputNames].sort()).toEqual(ins.sort());
    expect([...session.outputNames].sort()).toEqual(outs.sort());
  });

  test('forward with empty past, then with past: shapes, and KV path == no-cache path within 1e-4', async () => {
    const seq = [1, 200, 300, 400, 500, 3, 77, 12, 900, 4, 5, 1500, 6];
    const n = seq.length;
    const full = await session.run(feeds([seq], [seq.map(() => 1)], [seq.map((_, i) => i)], null, 0));
    expect((full.logits as ort.Tensor).dims).toEqual([1, n, V]);
    expect((full['present.0.key'] as ort.Tensor).dims).toEqual([1, H, n, HD]);
    const k = 8;
    const a = await session.run(feeds([seq.slice(0, k)], [seq.slice(0, k).map(() => 1)], [seq.slice(0, k).map((_, i) => i)], null, 0));
    const b = await session.run(feeds([seq.slice(k)], [seq.map(() => 1)], [seq.slice(k).map((_, i) => k + i)], a, k));
    expect((b.logits as ort.Tensor).dims).toEqual([1, n - k, V]);
    expect((b[`present.${L - 1}.value`] as ort.Tensor).dims).toEqual([1, H, n, HD]);
    const fl = (full.logits as ort.Tensor).data as Float32Array;
    const bl = (b.logits as ort.Tensor).data as Float32Array;
    let maxDiff = 0;
    for (let t = k; t < n; t++) {
      for (let v = 0; v < V; v++) maxDiff = Math.max(maxDiff, Math.abs((fl[t * V + v] as number) - (bl[(t - k) * V + v] as number)));
    }
    expect(maxDiff).toBeLessThan(1e-4);
    // token-by-token decoding with the cache also matches
    let past = a;
    for (let t = k; t < n; t++) {
      const o = await session.run(feeds([[seq[t] as number]], [seq.slice(0, t + 1).map(() => 1)], [[t]], past, t));
      const ol = (o.logits as ort.Tensor).data as Float32Array;
      let d = 0;
      for (let v = 0; v < V; v++) d = Math.max(d, Math.abs((ol[v] as number) - (fl[t * V + v] as number)));
      expect(d).toBeLessThan(1e-4);
      past = o;
    }
  });

  test('left padding in a batch does not change a row', async () => {
    const s1 = [1, 10, 20, 30, 40, 50];
    const s2 = [1, 60, 70];
    const pad = s1.length - s2.length;
    const out = await session.run(feeds(
      [s1, [...new Array(pad).fill(0), ...s2]],
      [s1.map(() => 1), [...new Array(pad).fill(0), ...s2.map(() => 1)]],
      [s1.map((_, i) => i), [...new Array(pad).fill(0), ...s2.map((_, i) => i)]],
      null, 0,
    ));
    const alone = await session.run(feeds([s2], [s2.map(() => 1)], [s2.map((_, i) => i)], null, 0));
    const bl = (out.logits as ort.Tensor).data as Float32Array;
    const al = (alone.logits as ort.Tensor).data as Float32Array;
    const T = s1.length;
    let d = 0;
    for (let t = 0; t < s2.length; t++) {
      for (let v = 0; v < V; v++) d = Math.max(d, Math.abs((bl[(T + pad + t) * V + v] as number) - (al[t * V + v] as number)));
    }
    expect(d).toBeLessThan(1e-4);
  });

  test('tokenizer loads offline from the directory and round-trips', async () => {
    const tf = await loadTransformers();
    const tok = await loadTokenizer(DIR);
    expect(tf.env.allowRemoteModels).toBe(false);
    const text = renderPrompt('Where was the founder of Kethfai Company born?')
      + renderRound('none', 'Find the founder of Kethfai Company.', { kind: 'search', query: 'Kethfai Company founded by' });
    const ids = Array.from(tok.encode(text, { add_special_tokens: false }));
    expect(ids.every((x) => x >= 0 && x < V)).toBe(true);
    expect(tok.decode(ids, { skip_special_tokens: false })).toBe(text);
    expect(ids.filter((x) => x === SPECIAL_TOKEN_IDS['<mem>'])).toHaveLength(1);
  });
});
