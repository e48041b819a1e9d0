/**
 * The committed data/world files, checked from the files themselves rather than against the
 * generator's own output: pinned hashes, entity-disjoint splits, every answer stated in its
 * subject's document, oracle trajectories copied from real documents (docs/algorithm.md §1),
 * and the retriever rollouts use (Bm25Retriever, minisearch) finding the subject's document
 * first for every oracle query.
 */
import { createHash } from 'crypto';
import * as fs from 'fs';
import * as path from 'path';
import { computeScore, validateFormat } from '../../src/kernels/outcome-reward';
import { parseRound } from '../../src/protocol/round';
import { renderFullStream } from '../../src/protocol/stream';
import { splitAnswers } from '../../src/protocol/answer';
import { Bm25Retriever } from '../../src/retrieval/bm25';
import { relation } from '../../tools/world/kb';

const DATA = path.join(__dirname, '..', '..', 'data', 'world');
const SPLIT_NAMES = ['train', 'dev', 'test'] as const;
type SplitName = (typeof SPLIT_NAMES)[number];

interface Hop { subject: string; relation: string; object: string }
interface QuestionRecord {
  id: string; question: string; golds: string[]; split: string; kind: 'chain' | 'multi';
  hops: number; objectives: number; answers: string[]; chains: Hop[][];
}
interface Doc { id: string; title: string; contents: string }
interface OracleRecord { qid: string; question: string; golds: string[]; correct: boolean; rounds: { text: string; observation?: string }[] }

const read = (name: string): string => fs.readFileSync(path.join(DATA, name), 'utf8');
const rows = <T>(name: string): T[] => read(name).trimEnd().split('\n').map((l) => JSON.parse(l) as T);

const corpus = rows<Doc>('corpus.jsonl');
const byTitle = new Map(corpus.map((d) => [d.title, d]));
const splits = Object.fromEntries(SPLIT_NAMES.map((s) => [s, rows<QuestionRecord>(`${s}.jsonl`)])) as Record<SplitName, QuestionRecord[]>;
const oracleDev = rows<OracleRecord>('oracle-dev.jsonl');
const meta = JSON.parse(read('meta.json'));

/** Names of the corpus entities a question touches (subjects, and objects that are entities). */
const entityNames = (q: QuestionRecord): string[] =>
  q.chains.flatMap((c) => c.flatMap((h) => [h.subject, ...(byTitle.has(h.object) ? [h.object] : [])]));

/** `<information>Doc 1 (T): C\n…</information>` → [{ title, contents }]. */
function observationDocs(obs: string): { title: string; contents: string }[] {
  const body = obs.replace(/^<information>/, '').replace(/<\/information>$/, '');
  return body.split('\n').map((line, i) => {
    const m = /^Doc (\d+) \(([^)]*)\): (.*)$/.exec(line);
    if (!m || Number(m[1]) !== i + 1) throw new Error(`not a document line: ${line}`);
    return { title: m[2]!, contents: m[3]! };
  });
}

describe('committed data/world', () => {
  test('files have the recorded sha256 (regenerating with other bytes fails here first)', () => {
    const expected: Record<string, string> = {
      'corpus.jsonl': '712d9e59192c1d5b91d899262deed1c589fd50501e248cf465b70094b8f7df63',
      'dev.jsonl': '02f4af6f1879950b7c8300fe4eef69ed9d68a484b99ff87946b2cbb37f39d5b2',
      'meta.json': '8b28f6e63cbda851859b78fb85262d63d9d7f25650386ee3050a477d6f083310',
      'oracle-dev.jsonl': '81237e268513aac0cb2a852aeddc0833832edf8ae4f016a77b9700c197cdf85f',
      'test.jsonl': '1a43c36ecdfa63a0791b727b0221b1cc46ef6e30558888d069dba4183a51e1c9',
      'train.jsonl': 'b5cb4cff3ec6af33691d9507ed674da82706da112023d10a67f346243a363cb2',
      // the pages (issue 32), new files beside the original ones (test/tools/world-pages.test.ts)
      'corpus-pages.jsonl': '48eb9bb8593ef8129eeb1f1f46964941d911010ed10aea5e3963a6737c906622',
      'dev-pages.jsonl': 'c591b0ef6ebadedbc244c4a7afb5851ae6b8562a243c026c6391816de3515e31',
      'meta-pages.json': '0891ec45931d437d10e8405d471bfb7208cf909aa7ae655f2f751c36ed5b79b9',
      'oracle-dev-pages.jsonl': 'ccd1755c63536f4f1a502c401519f07b58b04cd1da9e51d08d6a22bacaa307cd',
      'pages.jsonl': '9e0314c873213892cae125a1452a52c3551f18d031af5a57877a07b62e815895',
      'test-pages.jsonl': '1f00814dd870bb481bf7483a5fe796734dfba664d82ddcd90229b000badeb20d',
      'train-pages.jsonl': '16e5248daad647bd927523f7a1418265ad75ba6aa16d94e191672aaec4f34626',
    };
    expect(fs.readdirSync(DATA).sort()).toEqual(Object.keys(expected).sort());
    for (const [name, sha] of Object.entries(expected)) {
      expect([name, createHash('sha256').update(fs.readFileSync(path.join(DATA, name))).digest('hex')]).toEqual([name, sha]);
    }
  });

  test('meta.json counts what the files hold', () => {
    expect(meta.documents).toBe(corpus.length);
    for (const s of SPLIT_NAMES) expect(meta.questions[s]).toBe(splits[s].length);
    expect(meta.entities.train + meta.entities.dev + meta.entities.test).toBe(corpus.length);
    const hops = [...splits.dev, ...splits.test].reduce((n, q) => n + q.chains.flat().length, 0);
    expect(meta.oracleRetrieval).toEqual({ queries: hops, rank1: hops, top3: hops });
    expect(hops).toBe(4500);
  });

  test('corpus documents have the Search-R1 shape, string ids and unique titles', () => {
    for (const d of corpus) {
      expect(Object.keys(d).sort()).toEqual(['contents', 'id', 'title']);
      expect(typeof d.id).toBe('string');
      expect(d.contents.length).toBeGreaterThan(10);
    }
    expect(byTitle.size).toBe(corpus.length);
    expect(new Set(corpus.map((d) => d.id)).size).toBe(corpus.length);
  });

  test('train, dev and test questions are entity-disjoint, by name', () => {
    const names = (s: SplitName): Set<string> => new Set(splits[s].flatMap(entityNames));
    const [tr, dv, te] = [names('train'), names('dev'), names('test')];
    for (const n of te) expect(tr.has(n)).toBe(false);
    for (const n of dv) expect(tr.has(n) || te.has(n)).toBe(false);
    const trainText = splits.train.map((q) => q.question).join('\n');
    for (const n of [...te, ...dv]) expect(trainText.includes(n)).toBe(false);
  });

  test('every split has 1/2/3-hop chains and 2/4/6/8/10-objective bundles', () => {
    for (const s of SPLIT_NAMES) {
      const qs = splits[s];
      for (const h of [1, 2, 3]) expect([s, h, qs.some((q) => q.kind === 'chain' && q.hops === h)]).toEqual([s, h, true]);
      for (const k of [2, 4, 6, 8, 10]) expect([s, k, qs.some((q) => q.kind === 'multi' && q.objectives === k)]).toEqual([s, k, true]);
    }
  });

  test('every hop is stated in its subject document, chains connect, golds are the last objects', () => {
    // one expect per question: per-hop expects make this file slow
    const bad: string[] = [];
    for (const s of SPLIT_NAMES) {
      for (const q of splits[s]) {
        const finals = q.chains.map((c) => c[c.length - 1]!.object);
        const ok = q.split === s
          && q.chains.every((c) => c.every((h, i) => (byTitle.get(h.subject)?.contents.includes(h.object) ?? false)
            && (i === 0 || h.subject === c[i - 1]!.object)))
          && q.question.includes(q.chains[0]![0]!.subject)
          && JSON.stringify(q.answers) === JSON.stringify(finals)
          && (q.kind === 'chain'
            ? q.chains.length === 1 && q.chains[0]!.length === q.hops && JSON.stringify(q.golds) === JSON.stringify(finals)
            : q.chains.length === q.objectives && JSON.stringify(splitAnswers(q.golds[0]!)) === JSON.stringify(finals));
        if (!ok) bad.push(q.id);
      }
    }
    expect(bad).toEqual([]);
  });

  test('oracle-dev trajectories: correct, well-formed, observations are corpus documents, memory copied from them', () => {
    expect(oracleDev.map((t) => t.qid)).toEqual(splits.dev.map((q) => q.id));
    for (const t of oracleDev) {
      const seen: string[] = [];
      for (const r of t.rounds) {
        const { mem } = parseRound(r.text);
        if (mem !== 'none') for (const fact of mem!.split(/(?<=\.) /)) expect(seen.some((c) => c.includes(fact))).toBe(true);
        if (r.observation === undefined) continue;
        for (const d of observationDocs(r.observation)) {
          expect(byTitle.get(d.title)?.contents).toBe(d.contents);
          seen.push(d.contents);
        }
      }
      const last = parseRound(t.rounds[t.rounds.length - 1]!.text);
      expect(t.correct).toBe(true);
      expect(t.golds).toContain(last.answer);
      const resp = renderFullStream(t.rounds.map((r) => r.text), t.rounds.flatMap((r) => (r.observation ? [r.observation] : [])));
      expect(validateFormat(resp, { requireAnswer: true })).toEqual({ valid: true });
      expect(computeScore(resp, t.golds)).toBe(1);
    }
  });

  test("the rollouts' BM25 ranks the subject's document first for all 4,500 oracle queries and agrees with oracle-dev", () => {
    const bm = Bm25Retriever.fromJsonl(path.join(DATA, 'corpus.jsonl'));
    const top = new Map<string, string | undefined>();
    const first = (query: string): string | undefined => {
      if (!top.has(query)) top.set(query, bm.searchOne(query, 1)[0]?.title);
      return top.get(query);
    };
    const missed: string[] = [];
    let queries = 0;
    for (const q of [...splits.dev, ...splits.test]) {
      for (const h of q.chains.flat()) {
        queries++;
        const query = relation(h.relation).query(h.subject);
        if (first(query) !== h.subject) missed.push(query);
      }
    }
    expect([queries, missed]).toEqual([4500, []]);
    // Doc 1 of each recorded observation is what rollouts would retrieve first
    const differs: string[] = [];
    let searches = 0;
    for (const t of oracleDev) {
      for (const r of t.rounds) {
        const { search } = parseRound(r.text);
        if (r.observation === undefined || search === null) continue;
        searches++;
        if (first(search) !== observationDocs(r.observation)[0]!.title) differs.push(search);
      }
    }
    expect([searches, differs]).toEqual([1300, []]);
  });
});
