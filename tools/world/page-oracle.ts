/**
 * Oracle trajectories of the page questions (issue 32): the agent searches each hop's subject as
 * the search oracle does; where the hop's fact is on the subject's page only, it opens the page
 * with `<access>URL</access>` (the URL copied from the search document), reads on chunk by chunk
 * (each access of a URL reads its next chunk, docs/algorithm.md §1) until the chunk that states the
 * fact, and copies the fact into `<mem>` in the very next round — the only round whose window shows
 * that chunk whole (§7). Observations are rendered by the page tool's own functions
 * (`renderObservation`, `chunkPage`, `renderWebpage`), so a replay through the pipeline with the
 * world's pages sees exactly these texts.
 *
 * Flaws (a `flawRate` share, for sampled rollouts with mixed rewards): `page_forget` reads the
 * fact's chunk without copying the fact, reads on to the page's end and answers wrong;
 * `wrong_answer` answers the last hop's subject (an intermediate entity) instead of its object.
 */
import { EMPTY_MEMORY, RoundAction, renderRound } from '../../src/protocol/round';
import { ObservationDoc, chunkPage, renderNoPage, renderObservation, renderWebpage, type PagingOptions } from '../../src/retrieval/observation';
import { SeededRandom } from '../../src/rng';
import { Entity, KB, factSentence } from './kb';
import { ANSWER_THINK, OracleRound, OracleTrajectory } from './oracle';
import { PAGE_CHUNK_CHARS, PageWorld, SHORT_TEXT_CHARS, anyRelation, isPageRelation, pageFactSentence } from './pages';
import type { Hop, Question } from './questions';
import type { Bm25 } from './bm25';

export type PageFlaw = 'page_forget' | 'wrong_answer';

/** The page tool's options the world is built for (docs/algorithm.md §1; `--page-chunk-chars 1000`). */
export const WORLD_PAGING: PagingOptions = { pageMaxChars: 250_000, pageChunkChars: PAGE_CHUNK_CHARS, pageMaxChunks: 10 };

export const OPEN_PAGE_THINK = (s: string): string => `The document does not say it. Read the page of ${s}.`;
export const READ_ON_THINK = (s: string): string => `Not on this page. Read on in the page of ${s}.`;
export const LOST_THINK = 'The page has no more. I answer what I have.';

/** A page trajectory's round: the oracle round, and for an access round the chunk it shows (1-based). */
export interface PageOracleRound extends OracleRound {
  /** Set on an access round whose observation is a chunk: its number (1-based). */
  page?: number;
  /** The observation's short text (`webpageShortTextChars` = 100) after an access round. */
  shortText?: string;
}

export interface PageOracleTrajectory extends Omit<OracleTrajectory, 'flaw' | 'rounds'> {
  rounds: PageOracleRound[];
  flaw: PageFlaw | null;
  /** 0-based index of the round whose observation is the chunk stating the page fact (null: never shown). */
  factChunkRound: number | null;
  /** The page fact's sentence. */
  pageFact: string;
}

export class PageOracle {
  constructor(readonly kb: KB, readonly pw: PageWorld, readonly bm25: Bm25, readonly paging: PagingOptions = WORLD_PAGING) {}

  /** The top 3 documents with their URLs (the rollouts' observation with `corpus-pages.jsonl`). */
  retrieve(query: string): ObservationDoc[] {
    return this.bm25.search(query, 3).map((h) => {
      const d = this.pw.corpus[h.index]!;
      return { title: d.title, contents: d.contents, url: d.url };
    });
  }

  trajectory(q: Question, rng: SeededRandom, flawRate = 0.3): PageOracleTrajectory {
    const kb = this.kb;
    const steps = q.chains[0] as Hop[];
    const pageStep = steps.findIndex((h) => isPageRelation(h.relation));
    if (q.kind !== 'page' || pageStep < 0) throw new Error(`${q.id} is not a page question`);
    const flaw: PageFlaw | null = rng.chance(flawRate) ? rng.pick(['page_forget', 'wrong_answer'] as const) : null;
    const name = (id: string): string => (kb.byId.get(id) as Entity).name;
    const found: string[] = [];
    const mem = (): string => (found.length ? found.join(' ') : EMPTY_MEMORY);
    const rounds: PageOracleRound[] = [];
    const push = (think: string, action: RoundAction): PageOracleRound => {
      const r: PageOracleRound = { mem: mem(), think, action, text: renderRound(mem(), think, action) };
      rounds.push(r);
      return r;
    };
    let factChunkRound: number | null = null;
    let lost = false;
    const pageFact = pageFactSentence(kb, this.pw, steps[pageStep]!.subject);
    for (const [i, h] of steps.entries()) {
      const r = anyRelation(h.relation);
      const subj = name(h.subject);
      const s = push(r.think(subj), { kind: 'search', query: r.query(subj) });
      s.docs = this.retrieve(r.query(subj));
      s.observation = renderObservation(s.docs);
      const doc = s.docs.find((d) => d.title === subj);
      if (!doc) throw new Error(`${q.id}: the search for ${subj} does not find its document`);
      if (i !== pageStep) {
        found.push(factSentence(kb, h.subject, h.relation));
        continue;
      }
      // the page: each access of the URL reads its next chunk
      const url = doc.url as string;
      const chunks = chunkPage(this.pw.byUrl.get(url)!.contents, this.paging);
      let think = OPEN_PAGE_THINK(subj);
      for (let k = 0; ; k++) {
        const a = push(think, { kind: 'access', url });
        const chunk = chunks[k];
        const obs = chunk === undefined ? renderNoPage('mempo') : renderWebpage(chunk, k + 1, chunks.length, url, 'mempo', SHORT_TEXT_CHARS);
        a.observation = obs.text;
        a.shortText = obs.shortText;
        if (obs.page !== null) a.page = obs.page;
        if (chunk === undefined) {
          lost = true;
          break;
        }
        if (chunk.includes(pageFact)) {
          factChunkRound = rounds.length - 1;
          if (flaw !== 'page_forget') {
            found.push(pageFact);
            break;
          }
        }
        think = READ_ON_THINK(subj);
      }
      if (lost) break;
    }
    const last = steps[steps.length - 1]!;
    let answer: string;
    if (lost) {
      // the fact is gone: the best the agent has is the page's subject
      answer = name(steps[pageStep]!.subject);
      push(LOST_THINK, { kind: 'answer', answer });
    } else {
      answer = q.answers[0] as string;
      if (flaw === 'wrong_answer') answer = name(last.subject);
      push(ANSWER_THINK, { kind: 'answer', answer });
    }
    return {
      qid: q.id, question: q.question, golds: q.golds, rounds, flaw, correct: q.golds.includes(answer), factChunkRound, pageFact,
    };
  }
}
