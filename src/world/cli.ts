#!/usr/bin/env node
/**
 * World generator CLI.
 *   node dist/world/cli.js [generate] [--seed N] [--out data/world] [--model models/mempo-tiny]
 *   node dist/world/cli.js tokenizer [--seed N] [--model models/mempo-tiny]
 */
import * as fs from 'fs';
import * as path from 'path';
import { buildKB, renderCorpus, relationsOf, factObject, objectName, SPLITS } from './kb';
import { Bm25 } from './bm25';
import { buildQuestions, DEFAULT_COUNTS, questionRecord, Question } from './questions';
import { Oracle, OracleTrajectory } from './oracle';
import { Rng } from './rng';
import { cachedEncoder, loadTokenizer, trajectorySamples } from './samples';
import { buildTokenizerJson, tokenizerConfigJson } from './tokenizer';
import { SYSTEM_PROMPT, renderObservation, EMPTY_MEMORY } from '../agent/protocol';

export const DEFAULT_SEED = 20260529;
export const VOCAB_SIZE = 2048;
export const MAX_POSITIONS = 2048;

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? (process.argv[i + 1] as string) : dflt;
}

/** Texts the BPE is trained on: the corpus, all questions, oracle rounds, chat prompts. */
export function tokenizerTexts(w: World): { texts: string[]; syllables: Map<string, string> } {
  const kb = w.kb;
  const syllables = new Map<string, string>();
  for (const e of kb.entities) {
    const words = e.name.split(' ');
    const syls = e.syllabified.split(' ');
    words.forEach((word, i) => {
      const s = syls[i];
      if (s && s.includes('|')) syllables.set(word, s);
    });
  }
  const texts: string[] = [EMPTY_MEMORY];
  // the prompt scaffolding is in every context: weight it so it gets whole-word tokens
  for (let i = 0; i < 300; i++) texts.push(SYSTEM_PROMPT, 'system\nuser\nassistant\n');
  for (const d of w.corpus) texts.push(renderObservation([d]));
  for (const split of SPLITS) for (const q of w.questions[split]) texts.push(q.question);
  const trajs = oracleTrajectories(w, w.questions.train.slice(0, 4000), w.seed + 5);
  for (const t of trajs) for (const r of t.rounds) texts.push(r.text);
  for (const e of kb.entities) {
    for (const r of relationsOf(e.type)) {
      const o = factObject(kb, e.id, r.id);
      if (o === undefined) continue;
      const on = objectName(kb, r.id, o);
      texts.push(`<answer>${on}</answer>`);
    }
  }
  return { texts, syllables };
}

function writeTokenizer(w: World, modelDir: string): void {
  const { texts, syllables } = tokenizerTexts(w);
  const tok = buildTokenizerJson(texts, { vocabSize: VOCAB_SIZE, syllables });
  fs.mkdirSync(modelDir, { recursive: true });
  fs.writeFileSync(path.join(modelDir, 'tokenizer.json'), JSON.stringify(tok, null, 1) + '\n');
  fs.writeFileSync(path.join(modelDir, 'tokenizer_config.json'), JSON.stringify(tokenizerConfigJson(MAX_POSITIONS), null, 2) + '\n');
  const n = Object.keys((tok as { model: { vocab: object } }).model.vocab).length;
  console.log(`tokenizer: ${n} tokens -> ${modelDir}`);
}

export interface World {
  seed: number;
  kb: ReturnType<typeof buildKB>;
  corpus: ReturnType<typeof renderCorpus>;
  bm25: Bm25;
  questions: Record<'train' | 'dev' | 'test', Question[]>;
  oracle: Oracle;
}

/** Build the whole world in memory (deterministic from the seed). */
export function buildWorld(seed: number = DEFAULT_SEED): World {
  const kb = buildKB(seed);
  const corpus = renderCorpus(kb);
  const bm25 = new Bm25(corpus);
  const questions = {
    train: buildQuestions(kb, 'train', seed + 1, DEFAULT_COUNTS.train),
    dev: buildQuestions(kb, 'dev', seed + 2, DEFAULT_COUNTS.dev),
    test: buildQuestions(kb, 'test', seed + 3, DEFAULT_COUNTS.test),
  };
  return { seed, kb, corpus, bm25, questions, oracle: new Oracle(kb, corpus, bm25) };
}

/** Oracle trajectories of a question list (deterministic). */
export function oracleTrajectories(w: World, qs: Question[], seed: number, flawRate = 0.3): OracleTrajectory[] {
  return qs.map((q, i) => w.oracle.trajectory(q, new Rng(seed * 7919 + i * 104729 + 17), { flawRate }));
}

function jsonl(rows: object[]): string {
  return rows.map((r) => JSON.stringify(r)).join('\n') + '\n';
}

function generate(seed: number, outDir: string, modelDir: string, withTokenizer: boolean): void {
  const w = buildWorld(seed);
  fs.mkdirSync(outDir, { recursive: true });
  fs.writeFileSync(path.join(outDir, 'corpus.jsonl'), jsonl(w.corpus));
  for (const split of SPLITS) {
    fs.writeFileSync(path.join(outDir, `${split}.jsonl`), jsonl(w.questions[split].map((q) => questionRecord(w.kb, q))));
  }
  const devTraj = oracleTrajectories(w, w.questions.dev, seed + 11, 0);
  fs.writeFileSync(path.join(outDir, 'oracle-dev.jsonl'), jsonl(devTraj.map((t) => ({
    qid: t.qid, question: t.question, golds: t.golds, correct: t.correct,
    rounds: t.rounds.map((r) => (r.observation !== undefined ? { text: r.text, observation: r.observation } : { text: r.text })),
  }))));
  // retrievability of the oracle's queries (rank of the subject document)
  const stats = { queries: 0, rank1: 0, top3: 0 };
  for (const q of w.questions.test.concat(w.questions.dev)) {
    for (const c of q.chains) for (const h of c) {
      const r = relationsOf(w.kb.byId.get(h.subject)!.type).find((x) => x.id === h.relation)!;
      const rank = w.oracle.rankOf(r.query(w.kb.byId.get(h.subject)!.name), h.subject);
      stats.queries++;
      if (rank === 0) stats.rank1++;
      if (rank >= 0) stats.top3++;
    }
  }
  const meta = {
    seed,
    documents: w.corpus.length,
    entities: Object.fromEntries(SPLITS.map((s) => [s, w.kb.entities.filter((e) => e.split === s).length])),
    questions: Object.fromEntries(SPLITS.map((s) => [s, w.questions[s].length])),
    oracleRetrieval: stats,
  };
  fs.writeFileSync(path.join(outDir, 'meta.json'), JSON.stringify(meta, null, 2) + '\n');
  console.log(JSON.stringify(meta));
  if (withTokenizer) writeTokenizer(w, modelDir);
}

/** Tokenised per-round training samples for training/train.py (not committed). */
async function writeSamples(
  seed: number, modelDir: string, out: string, draws: number, split: 'train' | 'dev' | 'test', flawRate: number,
): Promise<void> {
  const w = buildWorld(seed);
  const tok = await loadTokenizer(modelDir);
  const enc = cachedEncoder(tok);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  const fd = fs.openSync(out, 'w');
  const stats: Record<string, { n: number; ctx: number; out: number; max: number }> = {};
  let checked = 0;
  let flawed = 0;
  let trajs = 0;
  for (let d = 0; d < draws; d++) {
    const ts = oracleTrajectories(w, w.questions[split], seed + 100 + d, flawRate);
    const lines: string[] = [];
    for (const t of ts) {
      trajs++;
      if (t.flaw) flawed++;
      const q = w.questions[split][Number(t.qid.split('-')[1])]!;
      for (const s of trajectorySamples(t)) {
        const c = enc.encode(s.context);
        const o = enc.encode(s.output);
        if (checked < 300 && (trajs % 37 === 0)) {
          const ref = Array.from(tok.encode(s.context + s.output, { add_special_tokens: false }));
          if (ref.join() !== c.concat(o).join()) throw new Error(`cached encoding mismatch in ${t.qid}`);
          checked++;
        }
        if (c.length + o.length > MAX_POSITIONS) continue;
        const st = (stats[s.policy] ??= { n: 0, ctx: 0, out: 0, max: 0 });
        st.n++;
        st.ctx += c.length;
        st.out += o.length;
        st.max = Math.max(st.max, c.length + o.length);
        lines.push(JSON.stringify({ p: s.policy, h: q.hops, k: q.objectives, r: s.round, f: t.flaw ? 1 : 0, c, o }));
      }
    }
    fs.writeSync(fd, lines.join('\n') + '\n');
  }
  fs.closeSync(fd);
  console.log(JSON.stringify({ trajectories: trajs, flawed, checked, stats }));
}

function main(): void {
  const cmd = process.argv[2] && !process.argv[2].startsWith('--') ? process.argv[2] : 'generate';
  const seed = Number(arg('seed', String(DEFAULT_SEED)));
  const modelDir = arg('model', 'models/mempo-tiny');
  if (cmd === 'tokenizer') {
    writeTokenizer(buildWorld(seed), modelDir);
    return;
  }
  if (cmd === 'samples') {
    const split = arg('split', 'train') as 'train' | 'dev' | 'test';
    writeSamples(seed, modelDir, arg('samples-out', `training/out/samples-${split}.jsonl`), Number(arg('draws', '1')),
      split, Number(arg('flaw-rate', '0.3')))
      .catch((e) => {
        console.error(e);
        process.exit(1);
      });
    return;
  }
  if (cmd === 'generate') {
    generate(seed, arg('out', 'data/world'), modelDir, process.argv.includes('--tokenizer'));
    return;
  }
  throw new Error(`unknown command ${cmd}`);
}

if (require.main === module) main();
