/**
 * The page tool's figures of a run (docs/rollout.md, "The page tool's figures"): access rounds,
 * pages opened, chunks shown, EM on page questions, and whether the fact of a page chunk was in
 * `<mem>` once its chunk left the memory window.
 */
import { normalizeAnswer } from '../kernels/outcome-reward';
import type { BatchRecord } from './batch';
import type { Question } from '../contracts';

/** Exact match on the questions of kind `page` (the embedded world's page questions): "page facts answered". */
export interface PageQuestionsEm {
  questions: number;
  trajectories: number;
  em: number;
}

/** Access rounds, pages opened (a chunk 1 shown) and chunks shown, over the records. */
export function accessCounts(records: readonly BatchRecord[]): { rounds: number; pagesOpened: number; chunksShown: number } {
  let rounds = 0;
  let pagesOpened = 0;
  let chunksShown = 0;
  for (const r of records) {
    for (const rd of r.rounds) {
      if (rd.action === 'access') rounds++;
      // A round's `page` is the chunk its observation showed (an access's, or a reading round's of a queued page).
      if (rd.page !== undefined) chunksShown++;
      if (rd.page === 1) pagesOpened++;
    }
  }
  return { rounds, pagesOpened, chunksShown };
}

/** EM over the kept trajectories of questions of kind `page`; null when the run had none (or its questions are not known). */
export function pageQuestionsEm(kept: readonly BatchRecord[], questions: ReadonlyMap<string, Question>, em: (r: BatchRecord) => number): PageQuestionsEm | null {
  const page = kept.filter((r) => questions.get(r.uid)?.kind === 'page');
  if (page.length === 0) return null;
  return { questions: new Set(page.map((r) => r.uid)).size, trajectories: page.length, em: page.reduce((a, r) => a + em(r), 0) / page.length };
}

export function byId(questions: readonly Question[] | undefined): Map<string, Question> {
  return new Map((questions ?? []).map((q) => [q.id, q]));
}

/** The page tool in an evaluation (docs/rollout.md, "The page tool's figures"). */
export interface AccessFigures {
  /** Access rounds in all and per (kept) trajectory; pages opened (chunk 1 shown); chunks shown. */
  rounds: number;
  roundsPerTrajectory: number;
  pagesOpened: number;
  chunksShown: number;
  /** EM on the questions of kind `page` ("page facts answered"); null without such questions. */
  pageQuestions: PageQuestionsEm | null;
  /** Null without questions naming a page fact (`pageHop`, `pageChunk`) or without the tokenizer's decode. */
  goldInMemAfterShrink: GoldInMemAfterShrink | null;
}

/**
 * docs/rollout.md, "Gold in mem after shrink": among trajectories shown the chunk stating their
 * question's page-only fact whose chunk then left the memory window (docs/algorithm.md §7) before
 * they ended, the share whose `<mem>` held the fact in the first round after it shrank.
 */
export interface GoldInMemAfterShrink {
  /** Kept trajectories of questions naming a page fact. */
  trajectories: number;
  /** Of them, those shown the chunk that states it. */
  factShown: number;
  /** Of those, the ones with a round after the one that saw the chunk whole: the chunk shrank (the denominator). */
  shrank: number;
  /** Of `shrank`, those whose `<mem>` held the fact in that round. */
  inMem: number;
  /** inMem / shrank; null when shrank is 0. */
  rate: number | null;
  /** Of `shrank`, those answered correctly (EM). */
  correct: number;
  /** correct / shrank; null when shrank is 0. */
  correctRate: number | null;
}

/** The page-only fact a page question names: the hop `pageHop` of `chains[0]`, stated in chunk `pageChunk` of its subject's page. */
export function pageFactOf(q: Question): { subject: string; object: string; chunk: number } | null {
  if (q.pageHop === undefined || q.pageChunk === undefined) return null;
  const hop = q.chains?.[0]?.[q.pageHop];
  return hop === undefined ? null : { subject: hop.subject, object: hop.object, chunk: q.pageChunk };
}

/**
 * Whether `phrase` occurs in `text` as whole words, both under the EM normalisation (case,
 * punctuation, articles); tags count as spaces (`<mem>Mamek</mem>` holds "Mamek").
 */
export function containsPhrase(text: string, phrase: string): boolean {
  const p = normalizeAnswer(phrase);
  return p.length > 0 && ` ${normalizeAnswer(text.replace(/<\/?[A-Za-z_]+>/g, ' '))} `.includes(` ${p} `);
}

export function goldInMemAfterShrink(
  kept: readonly BatchRecord[], questions: ReadonlyMap<string, Question>, decode: (ids: number[]) => string, em: (r: BatchRecord) => number,
): GoldInMemAfterShrink | null {
  const out = { trajectories: 0, factShown: 0, shrank: 0, inMem: 0, correct: 0 };
  for (const r of kept) {
    const q = questions.get(r.uid);
    const fact = q === undefined ? null : pageFactOf(q);
    if (fact === null) continue;
    out.trajectories++;
    const text = (span: [number, number]) => decode(r.responseIds.slice(span[0], span[1]));
    // The round whose observation is the fact's chunk: chunk number `pageChunk`, naming both ends of the fact.
    const at = r.rounds.findIndex((rd) => {
      if (rd.page !== fact.chunk || rd.observation === null) return false;
      const obs = text([rd.observation.start, rd.observation.end]);
      return containsPhrase(obs, fact.subject) && containsPhrase(obs, fact.object);
    });
    if (at < 0) continue;
    out.factShown++;
    // Round at+1 (1-based at+2) saw the chunk whole; the next round is the first whose window no longer does.
    const after = r.rounds[at + 2];
    if (after === undefined) continue;
    out.shrank++;
    if (after.memSpan !== null && containsPhrase(text(after.memSpan), fact.object)) out.inMem++;
    out.correct += em(r);
  }
  if (out.trajectories === 0) return null;
  return {
    ...out,
    rate: out.shrank ? out.inMem / out.shrank : null,
    correctRate: out.shrank ? out.correct / out.shrank : null,
  };
}
