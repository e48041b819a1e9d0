/**
 * `mempo rollout` on the embedded defaults (issue 32), page questions: the shipped model in the embedded page world
 * opens pages, and every access round of the batch is checked against a reconstruction made here
 * from the decoded text and data/world/pages.jsonl alone: the chunk each access showed (pages cut
 * at 1,000 characters, one more chunk per access of the same URL, "No More Information" past the
 * end), the snapshot contexts of the rounds that follow a page (§2: the whole history; the prompt
 * and the round's own <mem>), and their memory rewards rescored with the model (§4).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { CausalLM } from '../../src/engines/local/causal-lm';
import type { BatchRound } from '../../src/contracts';
import { runCli } from '../cli/run-cli';

const ROOT = resolve(__dirname, '..', '..');
const pages = new Map(readFileSync(join(ROOT, 'data', 'world', 'pages.jsonl'), 'utf8').trimEnd().split('\n')
  .map((l) => JSON.parse(l) as { url: string; contents: string }).map((p) => [p.url, p.contents]));
const CHUNK = 1000;
const NO_PAGE = '<information>No More Information is Found for this URL.</information>';

type Row = { uid: string; sample: number; golds: string[]; promptIds: number[]; responseIds: number[]; text: string; rounds: BatchRound[] };

let model: CausalLM;
let rows: Row[];
const dir = mkdtempSync(join(tmpdir(), 'mempo-embedded-access-'));

beforeAll(async () => {
  // The page world's defaults on its first three page questions, 8 samples each: how often a sample opens a page is
  // the model's (the RL model guesses train-page-0 without its page in 7 of 8 samples; these 24 open 19 chunks).
  const r = await runCli(['rollout', '--out', dir, '--split', 'train-pages', '--limit', '3', '-n', '8', '--threads', '1', '--quiet', '--no-report']);
  expect(r.code).toBe(0);
  rows = readFileSync(join(dir, 'batch.jsonl'), 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as Row);
  model = await CausalLM.load(join(ROOT, 'models', 'mempo-tiny'), { sessionOptions: { intraOpNumThreads: 1 } });
}, 120_000);
afterAll(async () => {
  await model?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

/** Character offset in `decode(ids)` → token index (throws inside a token). */
function tokenAt(ids: readonly number[]): (c: number) => number {
  const ends = new Map<number, number>();
  for (let k = ids.length; k >= 0; k--) ends.set(model.tokenizer!.decode(ids.slice(0, k)).length, k);
  return (c) => {
    const k = ends.get(c);
    if (k === undefined) throw new Error(`character ${c} is not at a token boundary`);
    return k;
  };
}

/** The text's rounds: each from its <mem> to the end of its action, then the observation that follows. */
function split(text: string): Array<{ start: number; round: string; obs: string | null }> {
  const out: Array<{ start: number; round: string; obs: string | null }> = [];
  let at = 0;
  while (at < text.length) {
    const obsAt = text.indexOf('\n<information>', at);
    if (obsAt < 0) {
      out.push({ start: at, round: text.slice(at), obs: null });
      break;
    }
    const closeAt = text.indexOf('</information>', obsAt);
    if (closeAt < 0) { // an observation cut by the response budget ends the text
      out.push({ start: at, round: text.slice(at, obsAt), obs: null });
      break;
    }
    const obsEnd = closeAt + '</information>'.length;
    out.push({ start: at, round: text.slice(at, obsAt), obs: text.slice(obsAt + 1, obsEnd) });
    at = obsEnd + 1; // the newline after the observation
  }
  return out;
}

test('the batch has access rounds, each showing the chunk the page tool owes it', () => {
  let accesses = 0;
  let shown = 0;
  for (const r of rows) {
    const parts = split(r.text);
    const cursor = new Map<string, number>();
    parts.forEach((p, i) => {
      const url = /<access>(.*?)<\/access>$/.exec(p.round)?.[1];
      expect(r.rounds[i]!.action === 'access').toBe(url !== undefined);
      if (url === undefined) return;
      accesses++;
      const contents = pages.get(url);
      const k = (cursor.get(url) ?? 0) + 1;
      cursor.set(url, k);
      const chunks: string[] = [];
      for (let c = 0; contents !== undefined && c < contents.length && chunks.length < 10; c += CHUNK) chunks.push(contents.slice(c, c + CHUNK));
      const want = k <= chunks.length ? `<information>Page ${k} of ${chunks.length} (${url}): ${chunks[k - 1]!}</information>` : NO_PAGE;
      expect(r.rounds[i]!.url).toBe(url);
      if (p.obs === null) return; // the run ended on this action (max turns): nothing was shown
      expect(p.obs).toBe(want);
      expect(r.rounds[i]!.page).toBe(want === NO_PAGE ? undefined : k);
      if (want !== NO_PAGE) shown++;
    });
  }
  expect(accesses).toBeGreaterThan(0);
  expect(shown).toBeGreaterThan(0);
});

test('rounds after a page: snapshot contexts rebuilt from the text, memory rewards rescored with the model', async () => {
  const tok = model.tokenizer!;
  let checked = 0;
  for (const r of rows) {
    const parts = split(r.text);
    const at = tokenAt(r.responseIds);
    const gold = r.golds[0]!;
    const pre = tok.encode('<answer>');
    const goldIds = tok.encode(gold);
    const target = [...pre, ...goldIds, ...tok.encode('</answer>')];
    const p = async (ctx: number[]) => {
      // §4: mean log-prob of the gold's tokens above ln 0.5, exponentiated; 0 when none is kept.
      const [lp] = await model.scoreTargets([{ contextIds: ctx, targetIds: target }]);
      const kept = Array.from(lp!.subarray(pre.length, pre.length + goldIds.length)).filter((x) => x > Math.log(0.5));
      return kept.length === 0 ? 0 : Math.exp(kept.reduce((a, b) => a + b, 0) / kept.length);
    };
    for (let i = 1; i < parts.length; i++) {
      const prev = /<access>(.*?)<\/access>$/.exec(parts[i - 1]!.round);
      const rd = r.rounds[i]!;
      if (prev === null || parts[i - 1]!.obs === null || rd.memReward === null) continue;
      const { start, round } = parts[i]!;
      const close = round.indexOf('</mem>');
      expect(round.startsWith('<mem>')).toBe(true);
      expect(close).toBeGreaterThan(0);
      const full = [...r.promptIds, ...r.responseIds.slice(0, at(start))];
      const mem = [...r.promptIds, ...r.responseIds.slice(at(start), at(start + close + '</mem>'.length))];
      // The full context ends with the page's observation, whole.
      expect(tok.decode(full.slice(r.promptIds.length)).endsWith(`${parts[i - 1]!.obs!}\n`)).toBe(true);
      if (full.length + target.length > model.config.maxPositions) continue; // the scorer would drop its oldest tokens
      const [pFull, pMem] = [await p(full), await p(mem)];
      expect(rd.pFull).toBeCloseTo(pFull, 4);
      expect(rd.pMem).toBeCloseTo(pMem, 4);
      expect(rd.memReward).toBeCloseTo(pMem - pFull, 4);
      checked++;
    }
  }
  expect(checked).toBeGreaterThan(0);
}, 120_000);
