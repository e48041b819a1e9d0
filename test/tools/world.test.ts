/**
 * The world generator (tools/world) and the agent protocol (src/protocol/tags.ts): the committed
 * data and tokenizer regenerate byte-identically from the seed, oracle trajectories follow
 * docs/algorithm.md §1, and the protocol renders exactly what the shipped tokenizer's chat
 * template renders. The committed files' own properties are checked from the files in
 * world-data.test.ts.
 */
import * as fs from 'fs';
import * as path from 'path';
import { SPECIAL_TOKENS } from '../../src/protocol/tags';
import { SPECIAL_TOKEN_IDS } from '../../src/protocol/embedded-ids';
import { SYSTEM_PROMPT, memoryPolicyMessages, promptMessages, renderChat, renderMemoryContext, renderPrompt } from '../../src/protocol/chat';
import { observationSegment, renderFullStream } from '../../src/protocol/stream';
import { renderObservation } from '../../src/retrieval/observation';
import { parseRound, renderRound } from '../../src/protocol/round';
import { computeScore, validateFormat } from '../../src/kernels/outcome-reward';
import { Bm25, bm25Tokenize } from '../../tools/world/bm25';
import { probeStats } from '../../tools/world/probes';
import { NAME_PIECES, YEAR_RANGE } from '../../tools/world/kb';
import { cachedEncoder, holdsGold, loadTokenizer, trajectorySamples, trajectoryStream } from '../../tools/world/samples';
import { DEFAULT_SEED, World, buildWorld, oracleTrajectories, tokenizerFiles, worldFiles } from '../../tools/world/world';

const ROOT = path.join(__dirname, '..', '..');
const DATA = path.join(ROOT, 'data', 'world');
const MODEL = path.join(ROOT, 'models', 'mempo-tiny');

let w: World;
beforeAll(() => {
  w = buildWorld(DEFAULT_SEED);
});

describe('world generation', () => {
  test('committed data/world files regenerate byte-identically from the seed', () => {
    const files = worldFiles(w);
    expect(Object.keys(files).sort()).toEqual(
      ['corpus.jsonl', 'dev.jsonl', 'meta.json', 'oracle-dev.jsonl', 'test.jsonl', 'train.jsonl'],
    );
    for (const [name, text] of Object.entries(files)) {
      expect([name, fs.readFileSync(path.join(DATA, name), 'utf8') === text]).toEqual([name, true]);
    }
  });

  test('committed tokenizer files regenerate byte-identically', () => {
    for (const [name, text] of Object.entries(tokenizerFiles(w))) {
      expect([name, fs.readFileSync(path.join(MODEL, name), 'utf8') === text]).toEqual([name, true]);
    }
  });

  test('a different seed gives a different world; the same seed the same one', () => {
    const again = buildWorld(DEFAULT_SEED);
    expect(again.corpus).toEqual(w.corpus);
    const other = buildWorld(DEFAULT_SEED + 1);
    expect(other.corpus[0]).not.toEqual(w.corpus[0]);
  });

  test('chain answers follow the knowledge base', () => {
    for (const q of w.questions.test.filter((x) => x.kind === 'chain').slice(0, 200)) {
      const chain = q.chains[0]!;
      for (let i = 0; i + 1 < chain.length; i++) expect(chain[i + 1]!.subject).toBe(chain[i]!.object);
      expect(w.kb.facts.get(chain[chain.length - 1]!.subject)!.get(chain[chain.length - 1]!.relation)).toBe(chain[chain.length - 1]!.object);
    }
  });
});

describe('BM25 and the oracle', () => {
  test('tokenisation splits on whitespace and punctuation, lower-cased', () => {
    expect(bm25Tokenize('Mira Tolvek, born in 1834.')).toEqual(['mira', 'tolvek', 'born', 'in', '1834']);
  });

  test("the oracle's queries retrieve the subject's document at rank 1", () => {
    const meta = JSON.parse(fs.readFileSync(path.join(DATA, 'meta.json'), 'utf8'));
    expect(meta.oracleRetrieval.rank1).toBe(meta.oracleRetrieval.queries);
    const bm = new Bm25(w.corpus);
    const hits = bm.search(w.corpus[5]!.title, 3);
    expect(hits[0]!.index).toBe(5);
  });

  test('flawless oracle trajectories are valid §1 responses with reward 1', () => {
    const qs = w.questions.test.filter((_, i) => i % 7 === 0);
    const ts = oracleTrajectories(w, qs, 3, 0);
    for (const t of ts) {
      expect(t.correct).toBe(true);
      const resp = renderFullStream(t.rounds.map((r) => r.text), t.rounds.flatMap((r) => (r.observation ? [r.observation] : [])));
      expect(validateFormat(resp, { requireAnswer: true })).toEqual({ valid: true });
      expect(computeScore(resp, t.golds)).toBe(1);
      for (const r of t.rounds) expect(validateFormat(r.text)).toEqual({ valid: true });
      // memory holds the facts found so far, copied from the documents
      const last = t.rounds[t.rounds.length - 1]!;
      const q = qs.find((x) => x.id === t.qid)!;
      expect(last.mem.split('. ').length).toBe(q.kind === 'chain' ? q.hops : q.objectives);
    }
  });

  test('flawed trajectories exist, stay well-formed, and some end wrong', () => {
    const ts = oracleTrajectories(w, w.questions.dev, 5, 1);
    const flaws = new Set(ts.map((t) => t.flaw));
    for (const f of ['wrong_entity', 'vague_query', 'forget', 'wrong_answer', 'premature']) expect(flaws.has(f as never)).toBe(true);
    expect(ts.some((t) => !t.correct)).toBe(true);
    expect(ts.filter((t) => t.correct).length).toBeGreaterThan(ts.length / 3);
    for (const t of ts) for (const r of t.rounds) expect(validateFormat(r.text)).toEqual({ valid: true });
  });
});

describe('agent protocol', () => {
  test('round layout and parsing', () => {
    const r = renderRound('none', 'Find x.', { kind: 'search', query: 'x born' });
    expect(r).toBe('<mem>none</mem><think>Find x.</think><search>x born</search>');
    expect(parseRound(r)).toEqual({ mem: 'none', think: 'Find x.', search: 'x born', access: null, answer: null });
    expect(renderObservation([{ title: 'A', contents: 'a.' }, { title: 'B', contents: 'b.' }]))
      .toBe('<information>Doc 1 (A): a.\nDoc 2 (B): b.</information>');
    expect(renderFullStream(['r1', 'r2'], ['o1'])).toBe(`r1${observationSegment('o1')}r2`);
  });

  test('renderChat equals the shipped chat template rendered by @huggingface/transformers', async () => {
    const tok = await loadTokenizer(MODEL);
    const q = w.questions.test[3]!.question;
    const convs = [
      promptMessages(q),
      memoryPolicyMessages(q, renderRound('none', 't', { kind: 'search', query: 's' }), renderObservation([w.corpus[0]!])),
    ];
    for (const m of convs) {
      const ref = tok.apply_chat_template(m, { tokenize: false, add_generation_prompt: true });
      expect(ref).toBe(renderChat(m, true));
      const noGen = tok.apply_chat_template(m, { tokenize: false, add_generation_prompt: false });
      expect(noGen).toBe(renderChat(m, false));
    }
    expect(renderPrompt(q)).toBe(`<|im_start|>system\n${SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\n${q}<|im_end|>\n<|im_start|>assistant\n`);
  });

  test('every special token is one token with its fixed id; text round-trips', async () => {
    const tok = await loadTokenizer(MODEL);
    for (const t of SPECIAL_TOKENS) {
      expect(Array.from(tok.encode(t, { add_special_tokens: false }))).toEqual([SPECIAL_TOKEN_IDS[t]]);
    }
    const t = oracleTrajectories(w, [w.questions.test[250]!], 1, 0)[0]!;
    const texts = [
      renderMemoryContext(t.question, t.rounds[0]!.text, t.rounds[0]!.observation!),
      renderFullStream(t.rounds.map((r) => r.text), t.rounds.flatMap((r) => (r.observation ? [r.observation] : []))),
      'Ünïcödé — “quotes” 1834, tabs\tand\nnewlines  double  spaces 🙂',
    ];
    for (const s of texts) {
      const ids = Array.from(tok.encode(s, { add_special_tokens: false }));
      expect(tok.decode(ids, { skip_special_tokens: false })).toBe(s);
    }
  });

  test('every name piece and year is one token, with or without a leading space, in every context', async () => {
    const tok = await loadTokenizer(MODEL);
    const enc = (s: string) => Array.from(tok.encode(s, { add_special_tokens: false }));
    const single = (s: string) => {
      const ids = enc(s);
      expect(ids).toHaveLength(1);
      return ids[0]!;
    };
    const words = [...NAME_PIECES, String(YEAR_RANGE.first), '1834', String(YEAR_RANGE.last)];
    const ids = new Set<number>();
    for (const p of words) {
      const spaced = single(` ${p}`);
      const bare = single(p);
      expect(spaced).not.toBe(bare);
      ids.add(spaced).add(bare);
      // the same ids after a tag, before punctuation and inside a sentence
      expect(enc(`<answer>${p}</answer>`)).toEqual([SPECIAL_TOKEN_IDS['<answer>'], bare, SPECIAL_TOKEN_IDS['</answer>']]);
      expect(enc(`Find ${p}.`).slice(1)).toEqual([spaced, enc('.')[0]]);
    }
    expect(ids.size).toBe(2 * words.length);
    // a test entity's name is a sequence of pieces the training entities also use
    const trainWords = new Set(w.kb.entities.filter((e) => e.split === 'train').flatMap((e) => e.name.split(' ')));
    for (const e of w.kb.entities.filter((x) => x.split === 'test')) {
      for (const part of e.name.split(' ')) expect(trainWords.has(part)).toBe(true);
    }
  });

  test('piecewise encoding (special-token boundaries) equals whole-text encoding', async () => {
    const tok = await loadTokenizer(MODEL);
    const enc = cachedEncoder(tok);
    const ts = oracleTrajectories(w, w.questions.dev.filter((_, i) => i % 15 === 0), 9, 0.5);
    for (const t of ts) {
      for (const s of trajectorySamples(t)) {
        const whole = Array.from(tok.encode(s.context + s.output, { add_special_tokens: false }));
        expect(enc.encode(s.context).concat(enc.encode(s.output))).toEqual(whole);
      }
      const st = trajectoryStream(t);
      const whole = Array.from(tok.encode(st.context + st.pieces.map((p) => p.text).join(''), { add_special_tokens: false }));
      expect(st.pieces.reduce((a, p) => a.concat(enc.encode(p.text)), enc.encode(st.context))).toEqual(whole);
    }
  });
});

describe('memory-reward probe samples (tools/world/samples.ts)', () => {
  test('holdsGold needs every part of a bundle answer', () => {
    expect(holdsGold('… Matha Nemuk was born …', 'Matha Nemuk')).toBe(true);
    expect(holdsGold('… Matha was born …', 'Matha Nemuk')).toBe(false);
    expect(holdsGold('1801 and Wumkar Kingdom', 'Wumkar Kingdom, 1801')).toBe(true);
    expect(holdsGold('1801 only', 'Wumkar Kingdom, 1801')).toBe(false);
    expect(holdsGold('anything', '')).toBe(false);
  });

  test('each round from 2 on gets both probes, labelled by whether their context holds the gold', () => {
    const ts = oracleTrajectories(w, w.questions.dev.filter((_, i) => i % 9 === 0), 5, 0.5);
    const kinds = new Map<string, number>();
    for (const t of ts) {
      const samples = trajectorySamples(t);
      const probes = samples.filter((s) => s.policy.startsWith('score'));
      expect(probes.length).toBe(2 * (t.rounds.length - 1));
      for (const s of probes) {
        kinds.set(s.policy, (kinds.get(s.policy) ?? 0) + 1);
        expect(s.round).toBeGreaterThanOrEqual(2);
        expect([s.context.endsWith('<answer>'), s.output]).toEqual([true, `${t.golds[0]}</answer>`]);
        const parts = t.golds[0]!.split(',').map((p) => p.trim());
        const holds = parts.every((p) => s.context.includes(p));
        expect([s.qid, s.round, s.policy === 'score_absent']).toEqual([s.qid, s.round, !holds]);
      }
      // the answer round of a correct trajectory: the last observation and the mem both hold the gold
      const last = probes.slice(-2);
      if (t.correct && t.rounds.length >= 2) expect(last.map((s) => s.policy).sort()).toEqual(['score', 'score_full']);
    }
    expect([...kinds.keys()].sort()).toEqual(['score', 'score_absent', 'score_full']);
  });
});

test('probeStats splits P_full / P_mem by whether the probe context holds the gold', async () => {
  const tok = await loadTokenizer(MODEL);
  const enc = (s: string) => Array.from(tok.encode(s, { add_special_tokens: false }));
  const prompt = enc(renderPrompt('Where was Matha Nemuk born?'));
  const r1 = enc('<mem>none</mem><think>t</think><search>Matha Nemuk</search>');
  const obs = enc(observationSegment('Matha Nemuk was born in Meirba Ridge.'));
  const r2 = enc('<mem>Matha Nemuk born in Meirba Ridge</mem><think>t</think><answer>Meirba Ridge</answer>');
  const r2b = enc('<mem>Matha Nemuk</mem><think>t</think><answer>Meirba Ridge</answer>');
  const at = r1.length + obs.length;
  const line = (r2x: number[], mem: string, pFull: number, pMem: number) => JSON.stringify({
    golds: ['Meirba Ridge'], promptIds: prompt, responseIds: [...r1, ...obs, ...r2x], excluded: false,
    rounds: [
      { start: 0, memSpan: [0, 3], pFull: null, pMem: null, memReward: null },
      { start: at, memSpan: [at, at + enc(mem).length], pFull, pMem, memReward: pMem - pFull },
    ],
  });
  const dir = fs.mkdtempSync(path.join(require('os').tmpdir(), 'probes-'));
  const file = path.join(dir, 'batch.jsonl');
  fs.writeFileSync(file, [line(r2, '<mem>Matha Nemuk born in Meirba Ridge</mem>', 0.9, 0.8), line(r2b, '<mem>Matha Nemuk</mem>', 0, 0)].join('\n') + '\n');
  const s = await probeStats(file, MODEL);
  expect(s.snapshots).toBe(2);
  expect(s.pFull.goldInContext).toEqual({ n: 2, zero: 1, zeroShare: 0.5, mean: 0.45 });
  expect(s.pMem.goldInContext).toEqual({ n: 1, zero: 0, zeroShare: 0, mean: 0.8 });
  expect(s.pMem.goldAbsent).toEqual({ n: 1, zero: 1, zeroShare: 1, mean: 0 });
  expect(s.pFull.histogram).toEqual([1, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
  expect(s.memReward.negativeShare).toBeCloseTo(0.5, 12);
});
