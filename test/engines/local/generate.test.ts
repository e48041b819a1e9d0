/**
 * @jest-environment ./test/runtime-environment.js
 */
import { CausalLM } from '../../../src/engines/local/causal-lm';
import type { ForwardInput } from '../../../src/engines/local/causal-lm';
import { generate } from '../../../src/engines/local/generate';
import { scoreTargets } from '../../../src/engines/local/scorer';
import { MODEL_DIR, VOCAB, maxAbsDiff, randomIds, referenceLogprobs } from './helpers';

let model: CausalLM;
beforeAll(async () => {
  model = await CausalLM.load(MODEL_DIR);
});
afterAll(async () => {
  await model.dispose();
});

const STOPS = ['</search>', '</answer>'];

function prompts(): number[][] {
  const tk = model.tokenizer!;
  const qs = ['Who founded the city?', 'When was the bridge built?', 'Which river runs past the old mill?', 'Name it.'];
  return qs.map((q) => tk.applyChatTemplate([{ role: 'system', content: 'Answer with tags.' }, { role: 'user', content: q }]));
}

describe('CausalLM.generate on the embedded model', () => {
  it('returns per-token log-probs equal to teacher forcing, across padding and sequences leaving the batch', async () => {
    const ps = prompts();
    const inputs = ps.map((ids, i) => ({ ids, maxNewTokens: 3 + 5 * i }));
    const res = await model.generate(inputs, { maxNewTokens: 100, seed: 11, eosTokenIds: [] });
    const stats = model.lastGenerationStats!;
    expect(stats.compactions).toBe(3);
    expect(stats.paddedPrefillTokens).toBeGreaterThan(stats.prefillTokens);
    for (let i = 0; i < ps.length; i++) {
      const r = res[i]!;
      expect(r.finishReason).toBe('length');
      expect(r.tokenIds).toHaveLength(3 + 5 * i);
      expect(r.logprobs).toHaveLength(r.tokenIds.length);
      expect(r.promptLength).toBe(ps[i]!.length);
      const ref = await referenceLogprobs(model, ps[i]!, r.tokenIds);
      expect(maxAbsDiff(r.logprobs, ref)).toBeLessThan(1e-4);
    }
  });

  it("reports the raw or tempered log-prob as asked", async () => {
    const [p] = prompts();
    const [raw] = await model.generate([p!], { maxNewTokens: 6, temperature: 0.7, logprobs: 'raw', seed: 3, eosTokenIds: [] });
    const ref = await referenceLogprobs(model, p!, raw!.tokenIds);
    expect(maxAbsDiff(raw!.logprobs, ref)).toBeLessThan(1e-4);
    const [tempered] = await model.generate([p!], { maxNewTokens: 6, temperature: 0.7, seed: 3, eosTokenIds: [] });
    expect(tempered!.tokenIds).toEqual(raw!.tokenIds);
    const refTempered = await referenceLogprobs(model, p!, raw!.tokenIds, 0.7);
    expect(maxAbsDiff(tempered!.logprobs, refTempered)).toBeLessThan(1e-4);
    // the two references differ by more than the tolerance, so raw log-probs reported as tempered would fail
    // (by how much depends on the weights: a confident model's log-probs are near 0 at any temperature)
    expect(maxAbsDiff(refTempered, ref)).toBeGreaterThan(1e-4);
  });

  it('is reproducible for a seed, and a sequence samples the same alone or in a batch', async () => {
    const ps = prompts();
    const opts = { maxNewTokens: 12, seed: 42, temperature: 1, topP: 0.95, topK: 50, stop: STOPS };
    const a = await model.generate(ps, opts);
    const b = await model.generate(ps, opts);
    expect(b.map((r) => r.tokenIds)).toEqual(a.map((r) => r.tokenIds));
    const alone = await model.generate([ps[0]!], opts);
    expect(alone[0]!.tokenIds).toEqual(a[0]!.tokenIds);
    // Another seed samples differently (hot, so that even a confident trained model diverges).
    const hot = { maxNewTokens: 12, temperature: 2, eosTokenIds: [] as number[] };
    const one = await model.generate(ps, { ...hot, seed: 42 });
    const other = await model.generate(ps, { ...hot, seed: 43 });
    expect(other.map((r) => r.tokenIds)).not.toEqual(one.map((r) => r.tokenIds));
  });

  it('decodes greedily with temperature 0, top-k 1 or a tiny top-p, alike in a batch and alone', async () => {
    const ps = prompts();
    const greedy = await model.generate(ps, { maxNewTokens: 10, temperature: 0, eosTokenIds: [] });
    const k1 = await model.generate(ps, { maxNewTokens: 10, topK: 1, seed: 5, eosTokenIds: [] });
    const p0 = await model.generate(ps, { maxNewTokens: 10, topP: 1e-9, seed: 6, eosTokenIds: [] });
    const alone = await model.generate([ps[2]!], { maxNewTokens: 10, temperature: 0, eosTokenIds: [] });
    expect(k1.map((r) => r.tokenIds)).toEqual(greedy.map((r) => r.tokenIds));
    expect(p0.map((r) => r.tokenIds)).toEqual(greedy.map((r) => r.tokenIds));
    expect(alone[0]!.tokenIds).toEqual(greedy[2]!.tokenIds);
  });

  it('stops at a stop string spanning several tokens, keeping it in the output', async () => {
    const [p] = prompts();
    const tk = model.tokenizer!;
    const opts = { maxNewTokens: 30, seed: 8, eosTokenIds: [] as number[] };
    const [free] = await model.generate([p!], opts);
    const ids = free!.tokenIds;
    // A stop string from inside token 8 to inside token 14 of the sampled output: the same seed
    // samples the same tokens until the stop string completes.
    const before = tk.decode(ids.slice(0, 8));
    const upto = tk.decode(ids.slice(0, 15));
    const span = upto.slice(before.length + 1, upto.length - 1);
    expect(span.length).toBeGreaterThan(3);
    let k = 0;
    while (!tk.decode(ids.slice(0, k + 1)).includes(span)) k++;
    expect(k).toBeLessThan(ids.length);
    const [stopped] = await model.generate([p!], { ...opts, stop: [span] });
    expect(stopped!.finishReason).toBe('stop');
    expect(stopped!.stop).toBe(span);
    expect(stopped!.tokenIds).toEqual(ids.slice(0, k + 1));
    expect(stopped!.text).toContain(span);
  });

  it('stops on stop ids and eos ids, and leaves the other sequences running', async () => {
    const ps = prompts();
    const opts = { maxNewTokens: 20, seed: 21, eosTokenIds: [] as number[] };
    const free = await model.generate(ps, opts);
    const stopId = free[0]!.tokenIds[6]!;
    const first = free[0]!.tokenIds.indexOf(stopId);
    const res = await model.generate(ps, { ...opts, stopTokenIds: [stopId] });
    expect(res[0]!.finishReason).toBe('stop');
    expect(res[0]!.tokenIds).toEqual(free[0]!.tokenIds.slice(0, first + 1));
    const eos = await model.generate(ps, { ...opts, eosTokenIds: [stopId] });
    expect(eos[0]!.finishReason).toBe('eos');
    expect(eos[0]!.tokenIds).toEqual(free[0]!.tokenIds.slice(0, first + 1));
    for (let i = 1; i < ps.length; i++) {
      const at = free[i]!.tokenIds.indexOf(stopId);
      const expected = at === -1 ? free[i]!.tokenIds : free[i]!.tokenIds.slice(0, at + 1);
      expect(res[i]!.tokenIds).toEqual(expected);
      expect(res[i]!.finishReason).toBe(at === -1 ? 'length' : 'stop');
    }
  });

  it('matches special-token stop strings such as </search> on ids, ahead of the default eos ids', async () => {
    const ps = prompts();
    const tk = model.tokenizer!;
    const search = tk.tokenId('</search>')!;
    const answer = tk.tokenId('</answer>')!;
    // Force a tag (or eos) at a chosen step of three of the four sequences.
    const force: Record<number, [number, number]> = { 0: [2, search], 1: [4, answer], 2: [1, 0] };
    const res = await model.generate(ps, {
      maxNewTokens: 8,
      seed: 4,
      stop: STOPS,
      logitsProcessor: (row, index, generated) => {
        const f = force[index];
        if (f !== undefined && generated.length === f[0]) row[f[1]] = 1e4;
        else for (const id of [0, search, answer, ...model.eosTokenIds]) row[id] = -1e4;
      },
    });
    expect([res[0]!.finishReason, res[0]!.stop, res[0]!.tokenIds.length]).toEqual(['stop', '</search>', 3]);
    expect(res[0]!.text!.endsWith('</search>')).toBe(true);
    expect([res[1]!.finishReason, res[1]!.stop, res[1]!.tokenIds.length]).toEqual(['stop', '</answer>', 5]);
    expect([res[2]!.finishReason, res[2]!.stop, res[2]!.tokenIds]).toEqual(['eos', undefined, [res[2]!.tokenIds[0], 0]]);
    expect([res[3]!.finishReason, res[3]!.tokenIds.length]).toEqual(['length', 8]);
    // Without stop strings, </search> ends a sequence only if generation_config.json lists it as eos.
    const plain = await model.generate([ps[0]!], {
      maxNewTokens: 8,
      seed: 4,
      logitsProcessor: (row, _i, generated) => {
        // A trained model may end on its own eos right after the tag: rule that out.
        for (const id of model.eosTokenIds) if (id !== search) row[id] = -1e4;
        if (generated.length === 2) row[search] = 1e4;
      },
    });
    expect(plain[0]!.finishReason).toBe(model.eosTokenIds.includes(search) ? 'eos' : 'length');
    expect(plain[0]!.tokenIds.length).toBe(model.eosTokenIds.includes(search) ? 3 : 8);
  });

  it('stops at the model maximum length with finish reason context', async () => {
    const max = model.config.maxPositions;
    const long = randomIds(max - 3, 9);
    const [r] = await model.generate([long], { maxNewTokens: 10, temperature: 0, eosTokenIds: [] });
    expect(r!.finishReason).toBe('context');
    expect(r!.tokenIds).toHaveLength(3);
  });

  it('runs prompts in waves of maxBatchSize and returns them in input order', async () => {
    const ps = prompts();
    const many = [...ps, ...ps.map((p) => p.slice(0, p.length - 2))];
    const waves = await model.generate(many, { maxNewTokens: 5, temperature: 0, eosTokenIds: [], maxBatchSize: 3 });
    expect(model.lastGenerationStats!.waves).toBe(3);
    const whole = await model.generate(many, { maxNewTokens: 5, temperature: 0, eosTokenIds: [] });
    expect(waves.map((r) => r.tokenIds)).toEqual(whole.map((r) => r.tokenIds));
  });

  it('prefills in chunks when one pass would exceed maxLogitsBytes, with the same result', async () => {
    const ps = prompts();
    const a = await model.generate(ps, { maxNewTokens: 6, seed: 1, eosTokenIds: [] });
    const b = await model.generate(ps, { maxNewTokens: 6, seed: 1, eosTokenIds: [], maxLogitsBytes: 4 * VOCAB * 4 * 5 });
    expect(b.map((r) => r.tokenIds)).toEqual(a.map((r) => r.tokenIds));
    for (let i = 0; i < ps.length; i++) expect(maxAbsDiff(b[i]!.logprobs, a[i]!.logprobs)).toBeLessThan(1e-4);
  });

  it('prefills identical prompts once and samples each copy on its own', async () => {
    const [p] = prompts();
    const group = Array.from({ length: 16 }, () => p!);
    const opts = { maxNewTokens: 5, seed: 12, eosTokenIds: [] as number[], temperature: 2, logprobs: 'raw' as const };
    const res = await model.generate(group, opts);
    expect(model.lastGenerationStats!.prefillTokens).toBe(p!.length);
    expect(new Set(res.map((r) => r.tokenIds.join(','))).size).toBeGreaterThan(1);
    for (const i of [0, 7, 15]) {
      const ref = await referenceLogprobs(model, p!, res[i]!.tokenIds);
      expect(maxAbsDiff(res[i]!.logprobs, ref)).toBeLessThan(1e-4);
    }
    // A processor changing the shared first row for one copy leaves the others alone.
    const forced = await model.generate(group, {
      ...opts,
      logitsProcessor: (row, i, generated) => {
        if (i === 0 && generated.length === 0) row[777] = 1e4;
      },
    });
    expect(forced[0]!.tokenIds[0]).toBe(777);
    expect(forced.slice(1).map((r) => r.tokenIds)).toEqual(res.slice(1).map((r) => r.tokenIds));
  });

  it('runs generation and scoring concurrently on one model with the results of running them apart', async () => {
    const ps = prompts();
    const items = ps.map((p, i) => ({ contextIds: p, targetIds: [9, 100 + i, 10] }));
    const opts = { maxNewTokens: 6, seed: 3, eosTokenIds: [] as number[] };
    const genAlone = await model.generate(ps, opts);
    const scoreAlone = await model.scoreTargets(items);
    const [gen, score, gen2] = await Promise.all([model.generate(ps, opts), model.scoreTargets(items), model.generate(ps.slice(1), opts)]);
    expect(gen.map((r) => r.tokenIds)).toEqual(genAlone.map((r) => r.tokenIds));
    expect(gen2).toHaveLength(3);
    for (let i = 0; i < items.length; i++) expect(maxAbsDiff(score[i]!, scoreAlone[i]!)).toBeLessThan(1e-5);
  });

  it('reports each sequence as soon as it finishes', async () => {
    const ps = prompts();
    const seen: [number, number][] = [];
    const res = await model.generate(
      ps.map((ids, i) => ({ ids, maxNewTokens: 8 - 2 * i })),
      { maxNewTokens: 8, seed: 1, eosTokenIds: [], onResult: (i, r) => seen.push([i, r.tokenIds.length]) },
    );
    expect(seen).toEqual([[3, 2], [2, 4], [1, 6], [0, 8]]);
    expect(res.map((r) => r.tokenIds.length)).toEqual([8, 6, 4, 2]);
  });

  it('returns an empty result for a zero token budget without running the model', async () => {
    const [p] = prompts();
    const res = await model.generate([{ ids: p!, maxNewTokens: 0 }], { maxNewTokens: 5 });
    expect(res[0]!.tokenIds).toEqual([]);
    expect(res[0]!.finishReason).toBe('length');
    expect(res[0]!.text).toBe('');
  });
});

describe('a model that takes no position_ids (positions follow the cache length)', () => {
  /**
   * Simulates such an export with the embedded model: positions are always past + 0..s-1,
   * whatever the caller computed, which is wrong for left-padded rows.
   */
  function withoutPositionIds(): CausalLM {
    const fake = Object.create(model) as CausalLM & { io: CausalLM['io'] };
    Object.defineProperty(fake, 'io', { value: { ...model.io, hasPositionIds: false } });
    fake.forward = (input: ForwardInput) => {
      const positionIds = new BigInt64Array(input.batch * input.seqLen);
      for (let r = 0; r < input.batch; r++) {
        for (let k = 0; k < input.seqLen; k++) positionIds[r * input.seqLen + k] = BigInt(input.past.length + k);
      }
      return model.forward({ ...input, positionIds });
    };
    return fake;
  }

  it('batches only prompts of equal length, so no row is padded, and stays exact', async () => {
    const fake = withoutPositionIds();
    const ps = prompts();
    const all = [ps[0]!, ps[1]!, ps[0]!, ps[2]!];
    const { results: res, stats } = await generate(fake, all, { maxNewTokens: 6, seed: 5, eosTokenIds: [] });
    expect(stats.waves).toBe(new Set(all.map((p) => p.length)).size);
    expect(stats.paddedPrefillTokens).toBe(stats.prefillTokens);
    for (let i = 0; i < all.length; i++) {
      const ref = await referenceLogprobs(model, all[i]!, res[i]!.tokenIds);
      expect(maxAbsDiff(res[i]!.logprobs, ref)).toBeLessThan(1e-4);
    }
  });

  it('scores with right padding exactly and refuses left padding', async () => {
    const fake = withoutPositionIds();
    const items = [
      { contextIds: randomIds(40, 1), targetIds: [9, 77, 10] },
      { contextIds: randomIds(5, 2), targetIds: [9, 78, 79, 10] },
    ];
    const { results: got } = await scoreTargets(fake, items);
    for (let i = 0; i < items.length; i++) {
      const ref = await referenceLogprobs(model, items[i]!.contextIds, items[i]!.targetIds);
      expect(maxAbsDiff(got[i]!, ref)).toBeLessThan(1e-4);
    }
    await expect(scoreTargets(fake, items, { padding: 'left' })).rejects.toThrow(
      `padding: 'left' needs position_ids, which ${model.modelPath} does not take`,
    );
  });
});

describe('Tokenizer on the embedded model', () => {
  it('renders the ChatML chat template with the generation prompt', () => {
    const tk = model.tokenizer!;
    const text = tk.renderChat([{ role: 'system', content: 'S' }, { role: 'user', content: 'Q' }]);
    expect(text).toBe('<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n');
    expect(tk.renderChat([{ role: 'user', content: 'Q' }], { addGenerationPrompt: false })).toBe('<|im_start|>user\nQ<|im_end|>\n');
    expect(tk.applyChatTemplate([{ role: 'user', content: 'Q' }])).toEqual(tk.encode(text.slice(text.indexOf('<|im_start|>user'))));
  });

  it('encodes the protocol tags as single special tokens', () => {
    const tk = model.tokenizer!;
    for (const tag of ['<mem>', '</mem>', '<think>', '</think>', '<search>', '</search>', '<answer>', '</answer>']) {
      const ids = tk.encode(tag);
      expect(ids).toHaveLength(1);
      expect(tk.tokenId(tag)).toBe(ids[0]);
      expect(tk.decode(ids)).toBe(tag);
    }
    expect(tk.eosTokenId).toBe(0);
    expect(model.eosTokenIds).toContain(tk.eosTokenId);
  });
});
