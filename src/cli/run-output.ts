/** What a finished `mempo rollout` / `mempo eval` writes and prints: files, the summary line, warnings, failure. */
import { isAbsolute, join, relative, resolve } from 'node:path';
import type { BatchRecord } from '../pipeline/batch';
import { writeFileAtomic } from '../io/run-dir';
import type { RunSummary } from '../pipeline/summary';
import { formatEvalReport } from '../pipeline/eval-report';
import { renderReport } from '../io/report';
import { MempoError } from '../errors';
import type { Retriever } from '../contracts';
import type { RunEngine, RunIO, RunOutcome, RunSettings } from './run-settings';
import { describeRetriever } from './inputs';

/** A path as the user would type it: relative to the working directory when inside it. */
function shown(p: string): string {
  const r = relative(process.cwd(), resolve(p));
  return r.length > 0 && !r.startsWith('..') && !isAbsolute(r) ? r : resolve(p);
}

/** summary.json, eval.json (eval) and report.html, each written atomically. */
export function writeOutputs(s: RunSettings, out: string, o: RunOutcome, engine: RunEngine, retriever: Retriever): void {
  const { summary, server } = o;
  writeFileAtomic(join(out, 'summary.json'), `${JSON.stringify(server ? { ...summary, server } : summary, null, 2)}\n`);
  if (o.eval) writeFileAtomic(join(out, 'eval.json'), `${JSON.stringify(o.eval, null, 2)}\n`);
  if (!s.report) return;
  const codec = engine.engine.codec;
  const via = engine.server ? ` via ${engine.server.api} ${engine.server.urls.join(', ')}` : '';
  const html = renderReport(o.records, {
    pieceOf: (id) => (codec.piece ? codec.piece(id) : codec.decode([id])),
    title: `mempo ${s.kind}: ${o.records.length} trajectories, ${summary.questions} questions`,
    maxQuestions: s.reportQuestions,
    summary,
    notes: [`questions ${s.questions.map(shown).join(' + ')} · model ${shown(s.model)}${via} · ${describeRetriever(retriever)} · context ${s.options.rollout.context} · seed ${s.options.rollout.seed} · group size ${s.options.rollout.groupSize}`],
  });
  writeFileAtomic(join(out, 'report.html'), html);
}

/** The JSON (--json), the eval table, or one summary line; then retried server requests, if any. */
export function printOutcome(s: RunSettings, io: RunIO, o: RunOutcome, out: string | null): void {
  const { summary, server } = o;
  if (s.json) io.stdout.write(`${JSON.stringify(o.eval ?? (server ? { ...summary, server } : summary), null, 2)}\n`);
  else if (o.eval) io.stdout.write(`${formatEvalReport(o.eval, `mempo eval (${s.options.rollout.context} context, temperature ${s.options.rollout.sampling.temperature})`)}\n`);
  else if (!s.quiet) {
    io.stdout.write(
      `${summary.trajectories} trajectories (${summary.questions} questions): mean score ${summary.meanScore?.toFixed(3) ?? '–'}, ` +
        `format-valid ${summary.formatValidRate === null ? '–' : (100 * summary.formatValidRate).toFixed(1) + '%'}, ` +
        `memory reward ${summary.memoryReward.mean?.toFixed(4) ?? '–'} ± ${summary.memoryReward.std?.toFixed(4) ?? '–'} (n=${summary.memoryReward.count}), ` +
        `${summary.tokensGenerated} tokens generated, ${accessLine(summary)}${(o.wallMs / 1000).toFixed(1)} s${out ? ` → ${out}` : ''}\n`,
    );
  }
  if (server !== null && server.endpoints.some((e) => e.failures > 0)) {
    // Failed tries that a retry (maybe on another server) made good: say how many and where.
    const where = server.endpoints.filter((e) => e.failures > 0).map((e) => `${e.url}: ${e.failures} failed${e.cooldowns ? `, out of rotation ${e.cooldowns}×` : ''} (last: ${e.lastError})`);
    io.stderr.write(`warning: ${server.endpoints.reduce((a, e) => a + e.failures, 0)} of ${server.requests} server requests failed and were retried (${server.retries} retries); ${where.join('; ')}\n`);
  }
}

/** With the page tool: "N access rounds (P pages opened), page questions EM x%, " (empty without it). */
export function accessLine(summary: RunSummary): string {
  const a = summary.access;
  if (a === undefined) return '';
  const em = a.pageQuestions === undefined ? '' : `, page questions EM ${(100 * a.pageQuestions.em).toFixed(1)}% (n=${a.pageQuestions.questions})`;
  return `${a.rounds} access rounds (${a.pagesOpened} pages opened)${em}, `;
}

/**
 * Fails when nothing usable came out of this run (the files are written all the same), else
 * warns about trajectories excluded for a tool or server failure.
 */
export function checkFailures(io: RunIO, o: RunOutcome, fresh: readonly BatchRecord[]): void {
  const failed = fresh.filter((r) => r.error !== null);
  if (failed.length > 0 && failed.length === fresh.length) {
    const onServer = failed.filter((r) => r.doneReason === 'backend-error');
    const tool = failed.find((r) => r.doneReason !== 'backend-error');
    if (tool === undefined) throw new MempoError('ERR_BACKEND', `every trajectory failed on the inference server: ${failed[0]!.error}`);
    if (onServer.length === 0) throw new MempoError('ERR_RETRIEVER_DOWN', `every trajectory hit a tool failure: ${tool.error}`);
    throw new MempoError('ERR_RETRIEVER_DOWN', `every trajectory failed (${failed.length - onServer.length} on a tool, ${onServer.length} on the inference server); first tool error: ${tool.error}; first server error: ${onServer[0]!.error}`);
  }
  if (o.summary.toolErrors > 0) {
    const first = o.records.find((r) => r.error !== null && r.doneReason !== 'backend-error')?.error;
    io.stderr.write(`warning: ${o.summary.toolErrors} trajectories hit a tool failure and were excluded from advantages; first error: ${first}\n`);
  }
  if (o.summary.backendErrors > 0) {
    const first = o.records.find((r) => r.doneReason === 'backend-error')?.error;
    io.stderr.write(`warning: ${o.summary.backendErrors} trajectories failed on the inference server (an answer missing or wrong) and were excluded from advantages; first error: ${first}\n`);
  }
  const lost = failedGroups(fresh);
  if (lost.length > 0) {
    io.stderr.write(`warning: every sample of ${lost.length} ${lost.length === 1 ? 'question' : 'questions'} (${lost.slice(0, 5).join(', ')}${lost.length > 5 ? ', …' : ''}) failed; once the tool or server is back, --resume redoes them\n`);
  }
}

/** Uids of this run's groups whose every sample failed (a resumed run redoes them, src/io/run-dir.ts). */
function failedGroups(fresh: readonly BatchRecord[]): string[] {
  const ok = new Set(fresh.filter((r) => r.error === null).map((r) => r.uid));
  return [...new Set(fresh.filter((r) => r.error !== null && !ok.has(r.uid)).map((r) => r.uid))];
}
