/**
 * @jest-environment ./test/runtime-environment.js
 *
 * In-process at a real vocabulary: a model directory built by tools/real-vocab (Qwen3's real
 * tokenizer, 151,936 embedding rows, tiny seeded random decoder) loads in `LocalModel`; the
 * KV-cache path equals the no-cache path for logits, generation log-probs and target scores;
 * `mempo rollout --model DIR` runs end to end, through round 2 and memory-reward scoring.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { LocalModel } from '../../../src/engines/local/local-model';
import { Tokenizer } from '../../../src/engines/local/tokenizer';
import type { CausalLM } from '../../../src/engines/local/causal-lm';
import { ADDED_TAGS, QWEN_VOCAB_SIZE, SCRIPT_ROUND, buildRealVocabModel, qwen3TokenizerDir, type RealVocabModel } from '../../../tools/real-vocab/build';
import { maxAbsDiff, referenceLogprobs } from './helpers';

const BIN = resolve(__dirname, '..', '..', '..', 'dist', 'cli', 'main.js');
const built = existsSync(BIN);
if (!built) console.warn(`real-vocab: ${BIN} is not built (npm run build:ts); skipping the rollout test`);

const V = QWEN_VOCAB_SIZE;
let tmp: string;
let made: RealVocabModel;
let buildMs: number;
let local: LocalModel;
let lm: CausalLM;
let qwen: Tokenizer;

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'mempo-realvocab-'));
  const t0 = Date.now();
  made = buildRealVocabModel(join(tmp, 'model'));
  buildMs = Date.now() - t0;
  local = await LocalModel.load(made.dir, { load: { sessionOptions: { intraOpNumThreads: 1 } } });
  lm = local.model;
  qwen = await Tokenizer.load(qwen3TokenizerDir());
});
afterAll(async () => {
  await local?.dispose();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

const i64 = (xs: readonly number[]) => BigInt64Array.from(xs.map(BigInt));
const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

/** Logits of `seq` with the cache: the first `k` tokens in one pass, then one token per pass. */
async function cachedLogits(seq: readonly number[], k: number): Promise<Float32Array> {
  const out = new Float32Array(seq.length * V);
  let past = lm.emptyCache(1);
  let pos = 0;
  for (const n of [k, ...new Array(seq.length - k).fill(1)]) {
    const o = await lm.forward({
      inputIds: i64(seq.slice(pos, pos + n)), batch: 1, seqLen: n,
      attentionMask: i64(new Array(pos + n).fill(1)), positionIds: i64(range(pos, n)), past,
    });
    out.set(o.logits, pos * V);
    past = o.present!;
    pos += n;
  }
  return out;
}

const SAMPLES = [
  'Where was the founder of Kethfai Company born?',
  '北京是中华人民共和国的首都。',
  'def f(x):\n    return x ** 2  # square\n\n',
  "  It's   spaced\tout, isn't it?",
];

describe('a model directory at V = 151,936 with the real Qwen3 tokenizer (tools/real-vocab)', () => {
  test('builds in under 30 s into under 25 MB', () => {
    expect(buildMs).toBeLessThan(30_000);
    const total = Object.values(made.bytes).reduce((a, b) => a + b, 0);
    expect(total).toBeLessThan(25 * 1024 * 1024);
    expect(Object.keys(made.bytes).sort()).toEqual(['README.md', 'config.json', 'generation_config.json', 'model.onnx', 'tokenizer.json', 'tokenizer_config.json']);
  });

  test("keeps Qwen3's tokenization and chat template; the agent tags are single tokens inside the embedding", () => {
    const tok = local.model.tokenizer!;
    expect(lm.config.vocabSize).toBe(V);
    for (const s of SAMPLES) expect(tok.encode(s)).toEqual(qwen.encode(s));
    expect(tok.chatTemplate).toBe(qwen.chatTemplate);
    const chat = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: SAMPLES[0]! }];
    expect(tok.renderChat(chat)).toBe(qwen.renderChat(chat));
    for (const t of ['<|im_start|>', '<|im_end|>', '<|endoftext|>', '<think>', '</think>']) expect(tok.tokenId(t)).toBe(qwen.tokenId(t));
    expect(qwen.encode('<mem>')).toHaveLength(3);
    ADDED_TAGS.forEach((t, i) => {
      expect(qwen.tokenId(t)).toBeUndefined();
      expect(tok.tokenId(t)).toBe(151669 + i);
      expect(tok.decode([151669 + i])).toBe(t);
    });
    expect(tok.size).toBe(151669 + ADDED_TAGS.length);
    expect(tok.size).toBeLessThanOrEqual(V);
    expect(tok.encode('</mem><answer>Paris</answer>')).toEqual([tok.tokenId('</mem>'), tok.tokenId('<answer>'), qwen.encode('Paris')[0], tok.tokenId('</answer>')]);
  });

  test("LocalModel takes eos, padding, stop and end-of-turn ids from the directory's own files", () => {
    expect(lm.eosTokenIds).toEqual([151645, 151643]);
    expect(lm.padTokenId).toBe(151643);
    expect(local.stopTokenIds).toEqual([151672, 151674, 151645]); // </search>, </answer>, <|im_end|>
    expect(local.maxContextTokens).toBe(40960);
  });

  test('logits depend on the context; the KV-cache path equals the no-cache path within 1e-4', async () => {
    const seq = qwen.encode(`${SAMPLES[0]} ${SAMPLES[1]}`);
    const full = await lm.logitsOf(seq);
    expect(full).toHaveLength(seq.length * V);
    expect(maxAbsDiff(await cachedLogits(seq, 5), full)).toBeLessThan(1e-4);
    const changed = await lm.logitsOf([seq[0]! + 1, ...seq.slice(1)]);
    const last = (seq.length - 1) * V;
    expect(maxAbsDiff(changed.subarray(last), full.subarray(last))).toBeGreaterThan(1e-3);
  });

  test('batched, left-padded generation reports the log-probs of the no-cache reference', async () => {
    const prompts = [qwen.encode(SAMPLES[0]!), qwen.encode(SAMPLES[2]!), qwen.encode('Hi')];
    const out = await lm.generate(prompts, { maxNewTokens: 6, temperature: 1, seed: 3, eosTokenIds: [], decode: false });
    for (let i = 0; i < prompts.length; i++) {
      expect(out[i]!.tokenIds).toHaveLength(6);
      for (const id of out[i]!.tokenIds) expect(id).toBeLessThan(V);
      expect(maxAbsDiff(out[i]!.logprobs, await referenceLogprobs(lm, prompts[i]!, out[i]!.tokenIds))).toBeLessThan(1e-4);
    }
  });

  test('the script: after a newline the model writes one well-formed search round and stops on </search>', async () => {
    const tok = lm.tokenizer!;
    const [r] = await local.generate([{ ids: tok.encode('<|im_start|>assistant\n'), maxNewTokens: 32, tag: { uid: 'q', sample: 0, round: 1 } }], { temperature: 1, topP: 1, topK: 0, seed: 1, stop: ['</search>', '</answer>'] });
    expect(tok.decode(r!.tokenIds)).toBe(SCRIPT_ROUND.join(''));
    expect(r!.finishReason).toBe('stop');
  });

  test('scoreTargets at V = 151,936 equals teacher forcing per item (prefix sharing, micro-batches)', async () => {
    const tok = lm.tokenizer!;
    const prompt = tok.encode(`<|im_start|>user\n${SAMPLES[0]}<|im_end|>\n<|im_start|>assistant\n`);
    const round = tok.encode(`${SCRIPT_ROUND.join('')}<information>Doc 1 (Kethfai): ${SAMPLES[3]} ${SAMPLES[1]}</information>`);
    const target = tok.encode('<answer>Weizam Federation</answer>');
    // MemPO-shaped (docs/algorithm.md §4): full contexts of rounds 2 and 3 (the first a prefix of the second), memory contexts.
    const items = [
      { contextIds: [...prompt, ...round], targetIds: target },
      { contextIds: [...prompt, ...round, ...round], targetIds: target },
      { contextIds: [...prompt, ...round.slice(0, 3)], targetIds: target },
      { contextIds: [...prompt.slice(0, 4)], targetIds: target.slice(0, 2) },
    ];
    const shared = await lm.scoreTargetsWithStats(items);
    expect(shared.stats.sharedItems).toBeGreaterThan(0);
    const apart = await lm.scoreTargetsWithStats(items, { sharePrefixes: false, maxBatchTokens: 64 });
    expect(apart.stats.microBatches).toBeGreaterThan(shared.stats.microBatches);
    const viaLocal = await local.score(items);
    for (let i = 0; i < items.length; i++) {
      const ref = await referenceLogprobs(lm, items[i]!.contextIds, items[i]!.targetIds);
      expect(maxAbsDiff(shared.results[i]!, ref)).toBeLessThan(1e-4);
      expect(maxAbsDiff(apart.results[i]!, ref)).toBeLessThan(1e-4);
      expect(maxAbsDiff(viaLocal[i]!, ref)).toBeLessThan(1e-4);
    }
  });

  (built ? test : test.skip)('mempo rollout --model DIR runs end to end: two rounds, memory rewards, well-formed files', () => {
    const out = join(tmp, 'out');
    const args = ['rollout', '--model', made.dir, '--out', out, '--limit', '2', '-n', '2', '--max-turns', '2', '--max-round-tokens', '16', '--threads', '1', '--quiet'];
    const res = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 120_000 });
    expect(res.stderr).toBe('');
    expect(res.status).toBe(0);
    const lines = readFileSync(join(out, 'batch.jsonl'), 'utf8').trim().split('\n');
    expect(lines).toHaveLength(4);
    const tok = lm.tokenizer!;
    for (const line of lines) {
      const t = JSON.parse(line);
      expect(tok.decode(t.promptIds)).toContain('<|im_start|>assistant\n');
      expect(t.responseMask).toHaveLength(t.responseIds.length);
      expect(t.oldLogp).toHaveLength(t.responseIds.length);
      expect(t.advantages).toHaveLength(t.responseIds.length);
      for (const id of [...t.promptIds, ...t.responseIds]) expect(id).toBeLessThan(V);
      expect(t.formatValid).toBe(true);
      expect(t.doneReason).toBe('max-turns');
      expect(t.rounds.map((r: { action: string; query: string }) => [r.action, r.query])).toEqual([['search', 'capital'], ['search', 'capital']]);
      for (const r of t.rounds) {
        expect(r.violations).toEqual([]);
        expect(tok.decode(t.responseIds.slice(r.start, r.memSpan[1]))).toBe('<mem>facts</mem>');
      }
      expect(Number.isFinite(t.rounds[1].memReward)).toBe(true);
    }
    const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'));
    expect(summary).toMatchObject({ questions: 2, trajectories: 4, formatValidRate: 1, scoredItems: 8, memoryReward: { count: 4 } });
    expect(existsSync(join(out, 'report.html'))).toBe(true);
  });
});
