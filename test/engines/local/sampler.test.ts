import { createRng } from '../../../src/rng';
import { SamplerScratch, sampleRow, type SamplingParams } from '../../../src/engines/local/sampler';

const P = [0.5, 0.3, 0.15, 0.05];
const row = () => Float32Array.from(P, Math.log);
const base: SamplingParams = { temperature: 1, topP: 1, topK: 0, logprobs: 'temperature' };

function histogram(params: SamplingParams, r: Float32Array, n: number, seed = 1): number[] {
  const rng = createRng(seed);
  const scratch = new SamplerScratch(r.length);
  const counts = new Array(r.length).fill(0);
  for (let i = 0; i < n; i++) counts[sampleRow(r, params, rng, scratch).token]++;
  return counts.map((c) => c / n);
}

describe('sampleRow', () => {
  it('samples the softmax distribution', () => {
    const h = histogram(base, row(), 20000);
    h.forEach((f, i) => expect(Math.abs(f - P[i]!)).toBeLessThan(0.015));
  });

  it('keeps only the k most likely tokens, renormalised', () => {
    const h = histogram({ ...base, topK: 2 }, row(), 20000);
    expect(h[2]).toBe(0);
    expect(h[3]).toBe(0);
    expect(Math.abs(h[0]! - 0.625)).toBeLessThan(0.015);
  });

  it('keeps the smallest prefix reaching top-p of the mass', () => {
    expect(histogram({ ...base, topP: 0.7 }, row(), 5000).slice(2)).toEqual([0, 0]);
    expect(histogram({ ...base, topP: 0.5 }, row(), 500)).toEqual([1, 0, 0, 0]);
    expect(histogram({ ...base, topP: 0.81 }, row(), 5000)[2]).toBeGreaterThan(0.1);
    // top-p applies to the top-k mass: 0.5/0.8 = 0.625 >= 0.6 keeps one token.
    expect(histogram({ ...base, topK: 2, topP: 0.6 }, row(), 500)).toEqual([1, 0, 0, 0]);
  });

  it('finds the nucleus in a wide, flat vocabulary without sorting all of it', () => {
    const V = 20000;
    const flat = new Float32Array(V);
    for (let i = 0; i < V; i++) flat[i] = -Math.log1p(i / 2000);
    // Reference nucleus size by full sort.
    const w = Array.from(flat, (x) => Math.exp(x));
    const total = w.reduce((a, b) => a + b, 0);
    let acc = 0;
    let n = 0;
    while (acc < 0.9 * total) acc += w[n++]!;
    const seen = histogram({ ...base, topP: 0.9 }, flat, 300, 9);
    const maxSeen = seen.reduce((m, f, i) => (f > 0 ? i : m), 0);
    expect(maxSeen).toBeLessThan(n);
    expect(maxSeen).toBeGreaterThan(n * 0.8);
  });

  it('is greedy at temperature 0, lowest id on ties', () => {
    const r = Float32Array.from([1, 3, 3, 2]);
    const s = sampleRow(r, { ...base, temperature: 0 }, createRng(1), new SamplerScratch(4));
    expect(s.token).toBe(1);
    const lse = Math.log(Math.exp(1) + 2 * Math.exp(3) + Math.exp(2));
    expect(s.logprob).toBeCloseTo(3 - lse, 6);
  });

  it('reports the tempered, raw or truncated log-prob as asked', () => {
    const r = row();
    const T = 0.5;
    const tempered = P.map((p) => Math.pow(p, 1 / T));
    const z = tempered.reduce((a, b) => a + b, 0);
    for (const mode of ['temperature', 'raw', 'sampling'] as const) {
      const s = sampleRow(r, { temperature: T, topP: 1, topK: 2, logprobs: mode }, createRng(5), new SamplerScratch(4));
      const expected =
        mode === 'temperature' ? Math.log(tempered[s.token]! / z) : mode === 'raw' ? Math.log(P[s.token]!) : Math.log(tempered[s.token]! / (tempered[0]! + tempered[1]!));
      expect(s.logprob).toBeCloseTo(expected, 5);
    }
  });

  it('rejects rows without a finite maximum', () => {
    expect(() => sampleRow(Float32Array.from([-Infinity, -Infinity]), base, createRng(1), new SamplerScratch(2))).toThrow(
      'the model returned -Infinity as the largest logit (non-finite logits)',
    );
    expect(() => sampleRow(Float32Array.from([0, Infinity]), base, createRng(1), new SamplerScratch(2))).toThrow(
      'the model returned Infinity as the largest logit (non-finite logits)',
    );
  });

  it('says NaN for NaN logits, also when the rest of the row is finite (greedy too)', () => {
    expect(() => sampleRow(Float32Array.from([NaN, NaN]), base, createRng(1), new SamplerScratch(2))).toThrow(
      'the model returned NaN as the logit of token 0 (non-finite logits)',
    );
    for (const temperature of [0, 1]) {
      expect(() => sampleRow(Float32Array.from([1, 3, NaN, 2]), { ...base, temperature }, createRng(1), new SamplerScratch(4))).toThrow(
        'the model returned NaN as the logit of token 2 (non-finite logits)',
      );
    }
  });
});

describe('createRng', () => {
  it('repeats a stream for the same seed and stream index, and separates streams', () => {
    const a = createRng(123, 0);
    const b = createRng(123, 0);
    const c = createRng(123, 1);
    const d = createRng(124, 0);
    const xs = Array.from({ length: 8 }, () => a());
    expect(Array.from({ length: 8 }, () => b())).toEqual(xs);
    expect(Array.from({ length: 8 }, () => c())).not.toEqual(xs);
    expect(Array.from({ length: 8 }, () => d())).not.toEqual(xs);
    for (const x of xs) expect(x >= 0 && x < 1).toBe(true);
  });
});
