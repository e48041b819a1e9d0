/**
 * The steps of `HttpCompletionsBackend.score` (teacher-forced target log-probs over HTTP, the
 * memory reward's 2M items, docs/algorithm.md §4): plan the items (empty targets need no request,
 * over-long contexts lose their first tokens), group them `scoreBatchSize` per request, read each
 * item's log-probs from its group's answer, and file the results or per-item failures.
 */
import type { ScoringItem } from '../../contracts';
import type { CompletionsDialect, ScoringJob } from './dialect';
import { isServerError } from '../../errors';
import type { EndpointPool } from './pool';

/** Per item of a call: its log-probs once known, and the error of each item that failed. */
export interface ScoringOutcome {
  out: (Float32Array | undefined)[];
  failures: Map<number, string>;
}

/** Per item of a group: its log-probs, or the error that names the endpoint and the item. */
type ItemResult = Float32Array | { error: string };

/** How errors name scoring item k: its index in the call and, when tagged, its trajectory, round and context. */
export function scoringItemName(items: readonly ScoringItem[], k: number): string {
  const t = items[k]?.tag;
  return t ? `scoring item ${k} (${t.uid} sample ${t.sample} round ${t.round}, ${t.context} context)` : `scoring item ${k}`;
}

/**
 * The requests to send: every item with a non-empty target whose context, cut from the left,
 * fits `maxContextTokens - 1` positions with its target (servers need room for the one token they
 * generate; LocalModel's scorer truncates the same way, truncate: 'left'). Empty targets are
 * answered at once, items that cannot fit fail.
 */
export function planScoring(items: readonly ScoringItem[], maxContextTokens: number): ScoringOutcome & { jobs: ScoringJob[] } {
  const out: (Float32Array | undefined)[] = new Array<Float32Array | undefined>(items.length).fill(undefined);
  const failures = new Map<number, string>();
  const jobs: ScoringJob[] = [];
  const limit = maxContextTokens - 1;
  for (let k = 0; k < items.length; k++) {
    const it = items[k]!;
    if (it.targetIds.length === 0) {
      out[k] = new Float32Array(0);
      continue;
    }
    const over = Math.max(0, it.contextIds.length + it.targetIds.length - limit);
    const ctx = it.contextIds.slice(over);
    if (ctx.length === 0) {
      failures.set(k, `${scoringItemName(items, k)}: ${it.contextIds.length === 0 ? 'empty context' : `the target alone (${it.targetIds.length} tokens) does not fit the model's ${maxContextTokens} positions`}`);
      continue;
    }
    jobs.push({ k, prompt: [...ctx, ...it.targetIds], ctx: ctx.length, tgt: it.targetIds });
  }
  return { out, failures, jobs };
}

export function groupJobs(jobs: readonly ScoringJob[], size: number): ScoringJob[][] {
  const groups: ScoringJob[][] = [];
  for (let g = 0; g < jobs.length; g += size) groups.push(jobs.slice(g, g + size));
  return groups;
}

/** A server error (ERR_SERVER) of one item becomes its result; anything else propagates. */
function perItem(f: () => Float32Array): ItemResult {
  try {
    return f();
  } catch (err) {
    if (!isServerError(err)) throw err;
    return { error: err.message };
  }
}

/**
 * One request for a group; its items' results go into `outcome`. A request that fails for good
 * fails every item of it, each error naming the item and the request.
 */
export async function scoreGroup(pool: EndpointPool, dialect: CompletionsDialect, group: readonly ScoringJob[], name: (k: number) => string, outcome: ScoringOutcome): Promise<void> {
  const first = group[0]!.k;
  const what = group.length === 1 ? name(first) : `scoring items ${first}..${group[group.length - 1]!.k}`;
  // With several items, `where` ends with the request's name; each item's errors name the item instead.
  const itemWhere = (where: string, k: number) => (group.length === 1 ? where : `${where.slice(0, where.lastIndexOf(' ('))} (${name(k)})`);
  let results: ItemResult[];
  try {
    results = await pool.request(dialect.scoringBody(group), what, (j, where) => {
      const parts = dialect.scoringAnswers(j, where, group);
      return group.map((x, g) => perItem(() => dialect.targetLogprobs(parts[g], itemWhere(where, x.k), x, g)));
    });
  } catch (err) {
    if (!isServerError(err)) throw err;
    for (const x of group) outcome.failures.set(x.k, group.length === 1 ? err.message : `${name(x.k)}: ${err.message}`);
    return;
  }
  results.forEach((r, g) => {
    const k = group[g]!.k;
    if (r instanceof Float32Array) outcome.out[k] = r;
    else outcome.failures.set(k, r.error);
  });
}
