/**
 * Oracle trajectories in the agent protocol (docs/algorithm.md §1): every round writes `<mem>` (the fact
 * sentences found so far, copied verbatim from documents), `<think>`, then `<search>` or
 * `<answer>`. A fraction of trajectories carries one deliberate flaw (wrong entity searched,
 * vague query, a forgotten fact, a premature or wrong answer) so that a model trained on them
 * samples varied rollouts.
 */
import { EMPTY_MEMORY, RoundAction, renderRound } from '../../src/protocol/round';
import { MULTI_ANSWER_SEPARATOR } from '../../src/protocol/answer';
import { ObservationDoc, renderObservation } from '../../src/retrieval/observation';
import { SeededRandom } from '../../src/rng';
import { Bm25 } from './bm25';
import { CorpusDoc, Entity, KB, factSentence, objectName, relation } from './kb';
import { Hop, Question } from './questions';

export type Flaw = 'wrong_entity' | 'vague_query' | 'forget' | 'wrong_answer' | 'premature';

export interface OracleRound {
  mem: string;
  think: string;
  action: RoundAction;
  text: string;
  /** Observation text (`renderObservation`) after a search round. */
  observation?: string;
  docs?: ObservationDoc[];
}

export interface OracleTrajectory {
  qid: string;
  question: string;
  golds: string[];
  rounds: OracleRound[];
  flaw: Flaw | null;
  correct: boolean;
}

export const RECOVER_THINK = 'The results do not answer it.';
export const ANSWER_THINK = 'I have the answer.';
export const ANSWERS_THINK = 'I have all the answers.';

export interface OracleOptions {
  flawRate: number;
}

export const DEFAULT_ORACLE: OracleOptions = { flawRate: 0.3 };

export class Oracle {
  constructor(readonly kb: KB, readonly corpus: readonly CorpusDoc[], readonly bm25: Bm25) {}

  retrieve(query: string): { docs: ObservationDoc[]; titles: string[] } {
    const hits = this.bm25.search(query, 3);
    const docs = hits.map((h) => {
      const d = this.corpus[h.index] as CorpusDoc;
      return { title: d.title, contents: d.contents };
    });
    return { docs, titles: docs.map((d) => d.title) };
  }

  /** Rank (0-based) of the subject's document for a query, or -1 when not in the top 3. */
  rankOf(query: string, subjectId: string): number {
    const name = (this.kb.byId.get(subjectId) as Entity).name;
    return this.retrieve(query).titles.indexOf(name);
  }

  trajectory(q: Question, rng: SeededRandom, opts: OracleOptions = DEFAULT_ORACLE): OracleTrajectory {
    const kb = this.kb;
    const steps: Hop[] = q.kind === 'chain' ? (q.chains[0] as Hop[]) : q.chains.map((c) => c[0] as Hop);
    const nSteps = steps.length;
    // choose a flaw
    let flaw: Flaw | null = null;
    if (rng.chance(opts.flawRate)) {
      const options: Flaw[] = ['wrong_entity', 'vague_query', 'wrong_answer'];
      if (nSteps >= 2) options.push('forget', 'forget');
      if (q.kind === 'chain' && nSteps >= 2) options.push('premature');
      flaw = rng.pick(options);
    }
    const flawStep = rng.int(nSteps);
    const name = (id: string): string => (kb.byId.get(id) as Entity).name;
    const sentence = (h: Hop): string => factSentence(kb, h.subject, h.relation);

    const found: (string | null)[] = new Array(nSteps).fill(null); // fact sentence per step
    const forgotten = new Set<number>();
    const rounds: OracleRound[] = [];
    let pendingFact: number | null = null; // step whose fact is in the last observation
    let failedLast = false;
    let flawUsed = false;
    let forgetRecover = rng.chance(0.5);
    let answer: string | null = null;
    let next = 0; // next step to search
    const memText = (): string => {
      const facts = found.map((f, i) => (f !== null && !forgotten.has(i) ? f : null)).filter((f): f is string => f !== null);
      return facts.length ? facts.join(' ') : EMPTY_MEMORY;
    };

    for (let guard = 0; guard < 3 * nSteps + 6; guard++) {
      // absorb the last observation into memory
      if (pendingFact !== null) {
        found[pendingFact] = sentence(steps[pendingFact] as Hop);
        pendingFact = null;
      }
      // forget flaw: drop an earlier fact once at least two are known
      if (flaw === 'forget' && !flawUsed) {
        const known = found.map((f, i) => (f !== null ? i : -1)).filter((i) => i >= 0);
        const last = known[known.length - 1];
        if (known.length >= 2 && last !== undefined) {
          const candidates = known.filter((i) => i !== last && (q.kind === 'multi' || i < nSteps - 1));
          if (candidates.length) {
            forgotten.add(rng.pick(candidates));
            flawUsed = true;
          }
        }
      }
      const mem = memText();
      // premature answer
      if (flaw === 'premature' && !flawUsed && found[0] !== null && next === 1) {
        flawUsed = true;
        const h0 = steps[0] as Hop;
        answer = objectName(kb, h0.relation, h0.object);
        rounds.push(this.round(mem, ANSWER_THINK, { kind: 'answer', answer }));
        break;
      }
      if (next >= nSteps) {
        const missing = [...forgotten].filter(() => q.kind === 'multi');
        if (missing.length && forgetRecover) {
          // re-search a forgotten answer
          const i = missing[0] as number;
          const h = steps[i] as Hop;
          const r = relation(h.relation);
          const think = `I am missing answer ${i + 1}. ${r.think(name(h.subject))}`;
          forgotten.delete(i);
          found[i] = null;
          const query = r.query(name(h.subject));
          const ret = this.retrieve(query);
          rounds.push(this.round(mem, think, { kind: 'search', query }, ret.docs));
          if (ret.titles.includes(name(h.subject))) pendingFact = i;
          forgetRecover = false;
          // after this the loop continues and answers
          continue;
        }
        // answer
        let parts = steps.map((h, i) => (found[i] !== null && !forgotten.has(i)
          ? objectName(kb, h.relation, h.object) : null));
        if (q.kind === 'chain') parts = [parts[parts.length - 1] ?? null];
        let ans = parts.filter((p): p is string => p !== null);
        if (flaw === 'wrong_answer') {
          flawUsed = true;
          ans = this.corruptAnswer(q, steps, ans, rng);
        }
        answer = ans.join(MULTI_ANSWER_SEPARATOR);
        rounds.push(this.round(mem, q.kind === 'chain' ? ANSWER_THINK : ANSWERS_THINK, { kind: 'answer', answer }));
        break;
      }
      const h = steps[next] as Hop;
      const r = relation(h.relation);
      const subj = name(h.subject);
      let think = r.think(subj);
      if (failedLast) think = `${RECOVER_THINK} ${think}`;
      let query = r.query(subj);
      if (!flawUsed && next === flawStep && flaw === 'wrong_entity') {
        flawUsed = true;
        const same = kb.entities.filter((e) => e.split === q.split && e.type === (kb.byId.get(h.subject) as Entity).type && e.id !== h.subject);
        const other = rng.pick(same).name;
        think = r.think(other);
        query = r.query(other);
      } else if (!flawUsed && next === flawStep && flaw === 'vague_query') {
        flawUsed = true;
        const words = subj.split(' ');
        query = rng.chance(0.5) ? subj : `${words[words.length - 1] === 'Group' ? words[0] : words[0]} ${r.query('').trim()}`;
      } else if (failedLast) {
        // a retry after a failed search uses the plain entity name when the query already failed
        const prev = rounds[rounds.length - 1];
        if (prev && prev.action.kind === 'search' && prev.action.query === query) query = subj;
      }
      const ret = this.retrieve(query);
      rounds.push(this.round(mem, think, { kind: 'search', query }, ret.docs));
      if (ret.titles.includes(subj)) {
        pendingFact = next;
        next++;
        failedLast = false;
      } else {
        failedLast = true;
      }
    }
    const correct = answer !== null && q.golds.includes(answer);
    return { qid: q.id, question: q.question, golds: q.golds, rounds, flaw: flawUsed ? flaw : null, correct };
  }

  private corruptAnswer(q: Question, steps: Hop[], ans: string[], rng: SeededRandom): string[] {
    const kb = this.kb;
    if (q.kind === 'chain') {
      const last = steps[steps.length - 1] as Hop;
      if (steps.length >= 2 || relation(last.relation).object === 'year') {
        // answer with the subject of the last hop (an intermediate entity)
        const s = kb.byId.get(last.subject) as Entity;
        if (relation(last.relation).object !== 'year') return [s.name];
        return [String(Number(last.object) + 1 + rng.int(20))];
      }
      const r = relation(last.relation);
      const same = kb.entities.filter((e) => e.split === q.split && e.type === r.object && e.id !== last.object);
      return [rng.pick(same).name];
    }
    const out = ans.slice();
    if (out.length >= 2) {
      const i = rng.int(out.length - 1);
      const t = out[i] as string;
      out[i] = out[i + 1] as string;
      out[i + 1] = t;
      if (out.join() === ans.join()) out.pop();
    } else out.pop();
    return out;
  }

  private round(mem: string, think: string, action: RoundAction, docs?: ObservationDoc[]): OracleRound {
    const text = renderRound(mem, think, action);
    const r: OracleRound = { mem, think, action, text };
    if (docs) {
      r.docs = docs;
      r.observation = renderObservation(docs);
    }
    return r;
  }
}
