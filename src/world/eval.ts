/**
 * Agent evaluation of a model on the embedded world: multi-round rollouts with the package
 * runtime (ONNX Runtime + KV cache), this world's BM25 (top-3) and the protocol contexts of
 * both policies. Reports round format validity, exact match by question kind / hops /
 * objectives, and (optionally) how many questions get a mixed group under sampling.
 *
 *   node dist/world/cli.js eval [--model models/mempo-tiny] [--split test] [--n 100]
 *        [--policies memory,full] [--group 16 --group-n 40 --group-hops 2]
 */
import {
  DEFAULT_TOPK, STOP_STRINGS, parseRound, renderFullContext, renderMemoryContext, renderObservation,
  renderPrompt,
} from '../agent/protocol';
import { emCheck, validateFormat } from '../rewards';
import { CausalLM } from '../runtime';
import type { Bm25 } from './bm25';
import type { CorpusDoc } from './kb';
import type { Question } from './questions';

export type Policy = 'memory' | 'full';

export interface RolloutResult {
  qid: string;
  rounds: string[];
  observations: string[];
  answer: string | null;
  em: 0 | 1;
  roundsValid: number;
  roundsTotal: number;
  finish: 'answer' | 'max-turns' | 'context' | 'invalid';
}

export interface RolloutOptions {
  policy: Policy;
  temperature: number;
  maxTurns: number;
  maxRoundTokens: number;
  seed: number;
  topk?: number;
}

interface State {
  q: Question;
  rounds: string[];
  obs: string[];
  done: boolean;
  answer: string | null;
  valid: number;
  finish: RolloutResult['finish'];
}

/** Roll out every question once (batched across questions, one round per generate call). */
export async function rollout(
  model: CausalLM, bm25: Bm25, corpus: readonly CorpusDoc[], qs: readonly Question[], o: RolloutOptions,
): Promise<RolloutResult[]> {
  const tok = model.tokenizer;
  if (!tok) throw new Error('model has no tokenizer');
  const maxPos = model.config.maxPositions ?? 2048;
  const states: State[] = qs.map((q) => ({
    q, rounds: [], obs: [], done: false, answer: null, valid: 0, finish: 'max-turns',
  }));
  for (let turn = 0; turn < o.maxTurns; turn++) {
    const live = states.filter((s) => !s.done);
    if (live.length === 0) break;
    const prompts: number[][] = [];
    const owners: State[] = [];
    for (const s of live) {
      let ctx: string;
      if (turn === 0) ctx = renderPrompt(s.q.question);
      else if (o.policy === 'memory') {
        ctx = renderMemoryContext(s.q.question, s.rounds[turn - 1] as string, s.obs[turn - 1] as string);
      } else ctx = renderFullContext(s.q.question, s.rounds, s.obs);
      const ids = tok.encode(ctx);
      if (ids.length + o.maxRoundTokens > maxPos) {
        s.done = true;
        s.finish = 'context';
        continue;
      }
      prompts.push(ids);
      owners.push(s);
    }
    if (prompts.length === 0) break;
    const outs = await model.generate(prompts, {
      maxNewTokens: o.maxRoundTokens,
      temperature: o.temperature,
      seed: o.seed + turn * 7919,
      stop: STOP_STRINGS,
      maxBatchSize: 32,
    });
    outs.forEach((g, i) => {
      const s = owners[i] as State;
      const text = g.text ?? tok.decode(g.tokenIds);
      s.rounds.push(text);
      const fmt = validateFormat(text);
      if (fmt.valid) s.valid++;
      const p = parseRound(text);
      const t = text.trimEnd();
      if (t.endsWith('</answer>') && p.answer !== null) {
        s.answer = p.answer.trim();
        s.done = true;
        s.finish = fmt.valid ? 'answer' : 'invalid';
      } else if (t.endsWith('</search>') && p.search !== null) {
        const hits = bm25.search(p.search, o.topk ?? DEFAULT_TOPK);
        s.obs.push(renderObservation(hits.map((h) => corpus[h.index] as CorpusDoc)));
      } else {
        s.done = true;
        s.finish = 'invalid';
      }
    });
  }
  return states.map((s) => ({
    qid: s.q.id,
    rounds: s.rounds,
    observations: s.obs,
    answer: s.answer,
    em: s.finish === 'answer' ? emCheck(s.answer, s.q.golds) : 0,
    roundsValid: s.valid,
    roundsTotal: s.rounds.length,
    finish: s.finish,
  }));
}

export interface EvalSummary {
  policy: Policy;
  n: number;
  em: number;
  formatValidRounds: number;
  byKind: Record<string, { n: number; em: number }>;
  finish: Record<string, number>;
}

export function summarize(policy: Policy, qs: readonly Question[], rs: readonly RolloutResult[]): EvalSummary {
  const byKind: Record<string, { n: number; em: number }> = {};
  const finish: Record<string, number> = {};
  let valid = 0;
  let total = 0;
  let em = 0;
  rs.forEach((r, i) => {
    const q = qs[i] as Question;
    const key = q.kind === 'chain' ? `hop${q.hops}` : `multi${q.objectives}`;
    const b = (byKind[key] ??= { n: 0, em: 0 });
    b.n++;
    b.em += r.em;
    em += r.em;
    valid += r.roundsValid;
    total += r.roundsTotal;
    finish[r.finish] = (finish[r.finish] ?? 0) + 1;
  });
  for (const b of Object.values(byKind)) b.em = Number((b.em / b.n).toFixed(3));
  return {
    policy, n: rs.length, em: Number((em / Math.max(1, rs.length)).toFixed(3)),
    formatValidRounds: Number((valid / Math.max(1, total)).toFixed(3)), byKind, finish,
  };
}

/** Fraction of questions whose `group` samples are neither all right nor all wrong. */
export async function mixedGroupRate(
  model: CausalLM, bm25: Bm25, corpus: readonly CorpusDoc[], qs: readonly Question[], group: number,
  o: RolloutOptions,
): Promise<{ n: number; mixed: number; meanEm: number }> {
  const rep: Question[] = [];
  for (const q of qs) for (let i = 0; i < group; i++) rep.push(q);
  const rs = await rollout(model, bm25, corpus, rep, o);
  let mixed = 0;
  let sum = 0;
  for (let i = 0; i < qs.length; i++) {
    const g = rs.slice(i * group, (i + 1) * group).map((r) => r.em as number);
    const s = g.reduce((a, x) => a + x, 0);
    sum += s;
    if (s > 0 && s < group) mixed++;
  }
  return { n: qs.length, mixed: Number((mixed / Math.max(1, qs.length)).toFixed(3)), meanEm: Number((sum / Math.max(1, rep.length)).toFixed(3)) };
}
