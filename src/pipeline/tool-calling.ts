/** The TOOL_CALLING state of the agent loop (rollout.ts, docs/algorithm.md §1): every search in one retriever call, every access in one page-tool call. */
import { MempoError } from '../errors';
import { chunkPage, renderNoPage, renderSearchObservation, renderWebpage, type WebpageObservation } from '../retrieval/observation';
import { applyObservation } from './round';
import { handleDoneState, type QueuedObservation, type RolloutTrajectory } from './trajectory';
import type { Loop } from './loop-state';

type SearchResults = { ok: true; observations: Map<RolloutTrajectory, string> } | { ok: false; failure: string };

/** Every non-empty query in one retriever call: the rendered observation per trajectory, or the tool's failure. */
async function searchAll(loop: Loop, withQuery: RolloutTrajectory[]): Promise<SearchResults> {
  const { retriever, options } = loop;
  const observations = new Map<RolloutTrajectory, string>();
  if (withQuery.length === 0) return { ok: true, observations };
  try {
    const docs = await retriever.search(withQuery.map((t) => t.pendingQuery!), options.tool.topk);
    if (docs.length !== withQuery.length) throw new Error(`the retriever returned ${docs.length} result lists for ${withQuery.length} queries`);
    withQuery.forEach((t, i) => observations.set(t, renderSearchObservation(docs[i]!, { docMaxChars: options.tool.docMaxChars, format: options.tool.observationFormat })));
    loop.stats.searches += withQuery.length;
    return { ok: true, observations };
  } catch (err) {
    // Errors of the shipped retrievers already name the tool; others get its name in front.
    return { ok: false, failure: err instanceof MempoError ? err.message : `${retriever.name}: ${(err as Error).message}` };
  }
}

type AccessResults = { ok: true; observations: Map<RolloutTrajectory, WebpageObservation[]> } | { ok: false; failure: string };

/**
 * Every access with a URL: what each trajectory is shown (docs/algorithm.md §1), with the URLs not
 * opened yet in one page-tool call; or the tool's failure. Under 'cursor' the chunk it reads next
 * (the first access of a URL opens its page, each later one reads its next chunk, then "No More
 * Information is Found"); under 'queue' every chunk of the page, in order, to be queued.
 */
async function accessAll(loop: Loop, withUrl: RolloutTrajectory[]): Promise<AccessResults> {
  const { retriever, options, stats } = loop;
  const tool = options.tool;
  const observations = new Map<RolloutTrajectory, WebpageObservation[]>();
  if (withUrl.length === 0) return { ok: true, observations };
  const toOpen = withUrl.filter((t) => !t.pages.has(t.pendingUrl!));
  if (toOpen.length > 0) {
    if (retriever.access === undefined) {
      throw new MempoError('ERR_INVALID_OPTION', `options.tool.access: the retriever ${retriever.name} has no pages (give it a pages file, --pages FILE, or a retrieval server started with --pages)`);
    }
    try {
      const pages = await retriever.access(toOpen.map((t) => t.pendingUrl!));
      if (pages.length !== toOpen.length) throw new Error(`the page tool returned ${pages.length} pages for ${toOpen.length} URLs`);
      toOpen.forEach((t, i) => {
        const page = pages[i];
        const chunks = page === null || page === undefined ? [] : chunkPage(page.contents, tool);
        t.pages.set(t.pendingUrl!, { chunks, read: 0 });
        if (chunks.length > 0) stats.pagesOpened++;
      });
    } catch (err) {
      return { ok: false, failure: err instanceof MempoError ? err.message : `${retriever.name}: ${(err as Error).message}` };
    }
  }
  const show = (chunks: readonly string[], k: number, url: string) => renderWebpage(chunks[k]!, k + 1, chunks.length, url, tool.observationFormat, options.memory.webpageShortTextChars);
  for (const t of withUrl) {
    const url = t.pendingUrl!;
    const cursor = t.pages.get(url)!;
    if (tool.pageReading === 'queue') {
      // ASearcher reads the page anew at each access: chunk 1 on, every chunk queued.
      observations.set(t, cursor.chunks.length === 0 ? [renderNoPage(tool.observationFormat)] : cursor.chunks.map((_c, k) => show(cursor.chunks, k, url)));
      continue;
    }
    if (cursor.read >= cursor.chunks.length) {
      observations.set(t, [renderNoPage(tool.observationFormat)]);
      continue;
    }
    observations.set(t, [show(cursor.chunks, cursor.read++, url)]);
  }
  stats.accesses += withUrl.length;
  return { ok: true, observations };
}

/** TOOL_CALLING: every pending search of this step in one retriever call, every access in one page-tool call, then back to GENERATING (or DONE / ERROR). */
export async function handleToolCallingState(loop: Loop): Promise<void> {
  const calling = loop.trajectories.filter((t) => t.state === 'tool-calling');
  if (calling.length === 0) return;
  const { stats, hooks } = loop;
  const format = loop.options.tool.observationFormat;
  const t1 = performance.now();
  const [searched, accessed] = await Promise.all([
    searchAll(loop, calling.filter((t) => (t.pendingQuery ?? '').length > 0)),
    accessAll(loop, calling.filter((t) => (t.pendingUrl ?? '').length > 0)),
  ]);
  stats.toolMs += performance.now() - t1;
  for (const t of calling) {
    const q = t.pendingQuery ?? '';
    const url = t.pendingUrl ?? '';
    const failure = q.length > 0 && !searched.ok ? searched.failure : url.length > 0 && !accessed.ok ? accessed.failure : null;
    if (failure !== null) {
      t.error = failure;
      stats.toolErrors++;
      handleDoneState(t, 'tool-error', hooks);
      continue;
    }
    const before = t.responseIds.length;
    // What the tool gives (none after a reading round without an action). An empty URL or query is
    // a format violation of its round; the tool answers that there is no page, or "No results.".
    const results: QueuedObservation[] = t.pendingUrl !== null
      ? (url.length > 0 && accessed.ok ? accessed.observations.get(t)! : [renderNoPage(format)])
      : t.pendingQuery !== null
        ? [{ text: q.length > 0 && searched.ok ? searched.observations.get(t)! : renderSearchObservation([], { format }), page: null }]
        : [];
    // Under 'queue' every result waits its turn behind what is queued (ASearcher's job queue); under 'cursor' there is one, shown now.
    t.queued.push(...results);
    const obs = t.queued.shift()!;
    if (obs.page !== null) t.rounds[t.rounds.length - 1]!.page = obs.page;
    applyObservation(t, obs.text, loop.codec, loop.options, hooks, obs.shortText);
    stats.observationTokens += t.responseIds.length - before;
  }
}
