/**
 * Question sets of the embedded world: chain questions (1-, 2-, 3-hop) and multi-objective
 * questions bundling k independent 1-hop sub-questions (answers comma-separated).
 */
import { MULTI_ANSWER_SEPARATOR } from '../../src/protocol/answer';
import { SeededRandom } from '../../src/rng';
import {
  Entity, KB, Split, factObject, objectName, relation, relationsOf,
} from './kb';

export interface Hop {
  subject: string; // entity id
  relation: string;
  object: string; // entity id or year
}

export interface Question {
  id: string;
  question: string;
  golds: string[];
  split: Split;
  kind: 'chain' | 'multi' | 'page';
  hops: number;
  objectives: number;
  /** Chain: the hops in order. Multi: one 1-hop chain per objective. */
  chains: Hop[][];
  /** Answer of each objective (chain: one). */
  answers: string[];
}

export const MULTI_OBJECTIVES = [2, 4, 6, 8, 10] as const;

/** Random chain of `hops` relations starting at an entity of the split, or null. */
function randomChain(kb: KB, rng: SeededRandom, pool: Entity[], hops: number): Hop[] | null {
  const start = rng.pick(pool);
  const chain: Hop[] = [];
  const seen = new Set<string>([start.id]);
  let cur = start;
  for (let h = 0; h < hops; h++) {
    const last = h === hops - 1;
    const rels = relationsOf(cur.type).filter((r) => {
      if (factObject(kb, cur.id, r.id) === undefined) return false;
      if (!last && (r.object === 'year' || r.nounPhrase === null)) return false;
      return true;
    });
    if (rels.length === 0) return null;
    const r = rng.pick(rels);
    const o = factObject(kb, cur.id, r.id) as string;
    if (r.object !== 'year') {
      if (seen.has(o)) return null;
      seen.add(o);
    }
    chain.push({ subject: cur.id, relation: r.id, object: o });
    if (!last) cur = kb.byId.get(o) as Entity;
  }
  return chain;
}

/** Natural-language question for a chain (innermost hop first). */
export function chainQuestion(kb: KB, chain: Hop[]): string {
  const first = chain[0] as Hop;
  let phrase = (kb.byId.get(first.subject) as Entity).name;
  chain.forEach((hop, i) => {
    const r = relation(hop.relation);
    if (i < chain.length - 1) phrase = (r.nounPhrase as (s: string) => string)(phrase);
  });
  const lastHop = chain[chain.length - 1] as Hop;
  const q = relation(lastHop.relation).question(phrase);
  return q;
}

export function chainAnswer(kb: KB, chain: Hop[]): string {
  const h = chain[chain.length - 1] as Hop;
  return objectName(kb, h.relation, h.object);
}

export function multiQuestionText(subs: string[]): string {
  return `Answer all ${subs.length} questions. ${subs.map((q, i) => `${i + 1}. ${q}`).join(' ')}`;
}

export interface QuestionCounts {
  hop1: number;
  hop2: number;
  hop3: number;
  /** Per number of objectives. */
  multi: Record<number, number>;
}

export const DEFAULT_COUNTS: Record<Split, QuestionCounts> = {
  train: { hop1: 3000, hop2: 5000, hop3: 3000, multi: { 2: 700, 4: 600, 6: 450, 8: 300, 10: 250 } },
  dev: { hop1: 100, hop2: 150, hop3: 100, multi: { 2: 20, 4: 20, 6: 20, 8: 20, 10: 20 } },
  test: { hop1: 200, hop2: 300, hop3: 200, multi: { 2: 60, 4: 60, 6: 60, 8: 60, 10: 60 } },
};

export function buildQuestions(kb: KB, split: Split, seed: number, counts: QuestionCounts): Question[] {
  const rng = new SeededRandom(seed);
  const pool = kb.entities.filter((e) => e.split === split);
  const out: Question[] = [];
  const seenText = new Set<string>();
  const push = (q: Omit<Question, 'id'>): void => {
    out.push({ id: `${split}-${out.length}`, ...q });
  };
  for (const [hops, n] of [[1, counts.hop1], [2, counts.hop2], [3, counts.hop3]] as const) {
    let made = 0;
    let tries = 0;
    while (made < n && tries < n * 200) {
      tries++;
      const chain = randomChain(kb, rng, pool, hops);
      if (!chain) continue;
      const text = chainQuestion(kb, chain);
      if (seenText.has(text)) continue;
      seenText.add(text);
      const ans = chainAnswer(kb, chain);
      push({
        question: text, golds: [ans], split, kind: 'chain', hops, objectives: 1, chains: [chain], answers: [ans],
      });
      made++;
    }
  }
  for (const k of Object.keys(counts.multi).map(Number).sort((a, b) => a - b)) {
    const n = counts.multi[k] ?? 0;
    for (let m = 0; m < n; m++) {
      const chains: Hop[][] = [];
      const subjects = new Set<string>();
      let guard = 0;
      while (chains.length < k && guard++ < 1000) {
        const c = randomChain(kb, rng, pool, 1);
        if (!c) continue;
        const h = c[0] as Hop;
        if (subjects.has(h.subject)) continue;
        subjects.add(h.subject);
        chains.push(c);
      }
      const subs = chains.map((c) => chainQuestion(kb, c));
      const answers = chains.map((c) => chainAnswer(kb, c));
      push({
        question: multiQuestionText(subs),
        golds: [answers.join(MULTI_ANSWER_SEPARATOR)],
        split, kind: 'multi', hops: 1, objectives: k, chains, answers,
      });
    }
  }
  return out;
}

/** Public JSONL record (metadata names instead of ids for readability). */
export function questionRecord(kb: KB, q: Question): object {
  return {
    id: q.id,
    question: q.question,
    golds: q.golds,
    split: q.split,
    kind: q.kind,
    hops: q.hops,
    objectives: q.objectives,
    answers: q.answers,
    chains: q.chains.map((c) => c.map((h) => ({
      subject: (kb.byId.get(h.subject) as Entity).name,
      relation: h.relation,
      object: objectName(kb, h.relation, h.object),
    }))),
  };
}
