/**
 * End to end on the embedded model (models/mempo-tiny): 2 questions × 4 samples through the
 * whole pipeline, with every advantage recomputed here, independently, from the written fields;
 * memory rewards through the real scorer, against contexts rebuilt from the decoded text; the
 * same seed reproduces the same batch.
 */
import { CausalLM } from '../../src/engines/local/causal-lm';
import { LocalModel } from '../../src/engines/local/local-model';
import type { BatchRecord } from '../../src/pipeline/batch';
import { runPipeline } from '../../src/pipeline/pipeline';
import { readQuestions } from '../../src/io/questions';
import { ScriptedGenerator } from '../../src/engines/scripted';
import { Bm25Retriever } from '../../src/retrieval/bm25';
import { MEM_CLOSE, MEM_OPEN } from '../../src/protocol/tags';
import { renderPrompt } from '../../src/protocol/chat';
import type { TextCodec } from '../../src/contracts';
import { FakeRetriever, MODEL_DIR, CORPUS, answer, normalise, search } from './helpers';
import { resolve } from 'node:path';

const TRAIN = resolve(__dirname, '..', '..', 'data', 'world', 'train.jsonl');

let model: CausalLM;
let local: LocalModel;
const bm25 = Bm25Retriever.fromJsonl(CORPUS);

beforeAll(async () => {
  model = await CausalLM.load(MODEL_DIR, { sessionOptions: { intraOpNumThreads: 1 } });
  local = new LocalModel(model);
});
afterAll(async () => {
  await model.dispose();
});

/**
 * The token index at which each character offset of `decode(ids)` starts, from the decoded
 * prefixes alone: `at(c)` is k when decode(ids[0..k)) has exactly c characters, and throws
 * when c falls inside a token.
 */
function tokenAtChar(codec: TextCodec, ids: readonly number[]): (c: number) => number {
  const ends = new Map<number, number>();
  for (let k = ids.length; k >= 0; k--) ends.set(codec.decode(ids.slice(0, k)).length, k);
  return (c) => {
    const k = ends.get(c);
    if (k === undefined) throw new Error(`character ${c} is not at a token boundary`);
    return k;
  };
}

/** docs/algorithm.md §5 recomputed from a batch's written fields only. */
function checkAdvantages(records: BatchRecord[], alpha = 1): void {
  const kept = records.filter((r) => !r.excluded);
  const uids = [...new Set(kept.map((r) => r.uid))];
  for (const uid of uids) {
    const g = kept.filter((r) => r.uid === uid);
    const outcome = normalise(g.map((r) => r.score!));
    const pool: Array<{ r: BatchRecord; span: [number, number]; v: number }> = [];
    for (const r of g) for (const rd of r.rounds) if (rd.memReward !== null) pool.push({ r, span: rd.memSpan!, v: rd.memReward });
    const memAdv = normalise(pool.map((p) => p.v));
    g.forEach((r, i) => {
      const mem = new Array(r.responseIds.length).fill(0);
      pool.forEach((p, k) => {
        if (p.r === r) for (let t = p.span[0]; t < p.span[1]; t++) mem[t] = memAdv[k];
      });
      for (let t = 0; t < r.responseIds.length; t++) {
        const m = r.responseMask[t];
        expect(r.outcomeAdvantage[t]).toBeCloseTo(m ? outcome[i]! : 0, 5);
        expect(r.memoryAdvantage[t]).toBeCloseTo(mem[t], 5);
        expect(r.advantages[t]).toBeCloseTo(m ? outcome[i]! + alpha * mem[t] : 0, 5);
      }
    });
  }
}

describe('pipeline on the embedded model', () => {
  const questions = readQuestions(TRAIN).slice(0, 2);
  const options = { rollout: { groupSize: 4, maxRoundTokens: 40, maxResponseTokens: 200, maxTurns: 3, seed: 11 } };

  test('2 questions × 4 samples: whole records, advantages recomputed independently, same seed → same batch', async () => {
    const a = await runPipeline({ questions, generator: local, scorer: local, retriever: bm25, options });
    expect(a.records).toHaveLength(8);
    expect(a.records.map((r) => `${r.uid}/${r.sample}`)).toEqual(questions.flatMap((q) => [0, 1, 2, 3].map((s) => `${q.id}/${s}`)));
    for (const r of a.records) {
      const n = r.responseIds.length;
      expect(n).toBeGreaterThan(0);
      expect(n).toBeLessThanOrEqual(200);
      for (const arr of [r.responseMask, r.oldLogp!, r.advantages, r.outcomeAdvantage, r.memoryAdvantage]) expect(arr).toHaveLength(n);
      r.oldLogp!.forEach((lp, t) => (r.responseMask[t] ? expect(lp).toBeLessThanOrEqual(0) : expect(lp).toBe(0)));
      expect(r.text).toBe(model.tokenizer!.decode(r.responseIds));
      expect(r.rounds[0]!.start).toBe(0);
      expect(r.rounds.length).toBeLessThanOrEqual(3);
      expect([0, 1]).toContain(r.score);
      for (const rd of r.rounds) if (rd.memReward !== null) expect(rd.memReward).toBeCloseTo(rd.pMem! - rd.pFull!, 6);
    }
    checkAdvantages(a.records);
    const b = await runPipeline({ questions, generator: local, scorer: local, retriever: bm25, options });
    expect(JSON.stringify(b.records)).toBe(JSON.stringify(a.records));
  });

  test('memory rewards through the real scorer match single-item teacher forcing', async () => {
    const tok = model.tokenizer!;
    const q = questions[0]!;
    const gold = q.golds[0]!;
    const gen = new ScriptedGenerator(tok, (tag) => (tag.round === 1
      ? search('none', `${q.question.replace(/\?$/, '')}`)
      : answer(tag.sample % 2 === 0 ? `The answer is ${gold}.` : 'nothing useful', gold)));
    const res = await runPipeline({ questions: [q], generator: gen, scorer: local, retriever: new FakeRetriever(), options: { rollout: { groupSize: 4 }, memory: { threshold: -Infinity } } });
    expect(res.stats.scorerCalls).toBe(1);
    expect(res.stats.scoredItems).toBe(8);
    const target = [...tok.encode('<answer>'), ...tok.encode(gold), ...tok.encode('</answer>')];
    const nPre = tok.encode('<answer>').length;
    const nGold = tok.encode(gold).length;
    for (const r of res.records) {
      const rd = r.rounds[1]!;
      // docs/algorithm.md §2 contexts rebuilt from the decoded text, not from the record's spans:
      // round 2 is the last round, after the last observation, and opens with its <mem>.
      expect(r.promptIds).toEqual(tok.encode(renderPrompt(q.question)));
      const text = tok.decode(r.responseIds);
      const open = text.indexOf(MEM_OPEN, text.lastIndexOf('</information>'));
      const closeAt = text.indexOf(MEM_CLOSE, open);
      expect(open).toBeGreaterThan(0);
      expect(closeAt).toBeGreaterThan(open);
      const close = closeAt + MEM_CLOSE.length;
      const at = tokenAtChar(tok, r.responseIds);
      const full = [...r.promptIds, ...r.responseIds.slice(0, at(open))];
      const memCtx = [...r.promptIds, ...r.responseIds.slice(at(open), at(close))];
      expect(tok.decode(memCtx.slice(r.promptIds.length))).toBe(text.slice(open, close));
      expect(memCtx[memCtx.length - 1]).toBe(tok.tokenId(MEM_CLOSE));
      expect([rd.start, ...rd.memSpan!]).toEqual([at(open), at(open), at(close)]);
      const p = async (ctx: number[]) => {
        const [lp] = await model.scoreTargets([{ contextIds: ctx, targetIds: target }]);
        const ans = Array.from(lp!.subarray(nPre, nPre + nGold));
        return Math.exp(ans.reduce((x, y) => x + y, 0) / ans.length);
      };
      expect(rd.pFull).toBeCloseTo(await p(full), 4);
      expect(rd.pMem).toBeCloseTo(await p(memCtx), 4);
    }
    checkAdvantages(res.records);
  });
});
