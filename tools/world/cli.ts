#!/usr/bin/env node
/**
 * World generator CLI (`npm run world:generate` = build + `node dist-tools/tools/world/cli.js`).
 *
 *   node dist-tools/tools/world/cli.js [generate] [--seed N] [--out data/world] [--tokenizer --model models/mempo-tiny]
 *       writes data/world/{corpus,train,dev,test,oracle-dev}.jsonl + meta.json, the page files beside
 *       them (pages, corpus-pages, {train,dev,test}-pages, oracle-dev-pages .jsonl + meta-pages.json;
 *       world.ts `pageFiles`) and, with --tokenizer, the tokenizer files of the model directory,
 *       byte-identical per seed.
 *   node dist-tools/tools/world/cli.js tokenizer [--model models/mempo-tiny]
 *   node dist-tools/tools/world/cli.js samples --split train|dev [--draws 1] [--flaw-rate 0.3] [--samples-out F] [--pages N]
 *       tokenised training samples for training/train.py; --pages N adds the oracle trajectories of N
 *       page questions per world (`<access>` rounds, issue 32), their lines marked "pg":1
 *   node dist-tools/tools/world/cli.js probes --batch out/rollout/batch.jsonl
 *       P_full / P_mem statistics of a rollout (probes.ts)
 *   node dist-tools/tools/world/cli.js rollout-samples --batch B --samples-out F
 *       every round of a rollout as a `rollout` sample for train.py --rollout-samples (rollout-samples.ts)
 */
import * as fs from 'fs';
import * as path from 'path';
import { SeededRandom } from '../../src/rng';
import { ACCESS_SYSTEM_PROMPT, SYSTEM_PROMPT } from '../../src/protocol/chat';
import { renderObservation } from '../../src/retrieval/observation';
import { probeStats } from './probes';
import { writeRolloutSamples } from './rollout-samples';
import { cachedEncoder, loadTokenizer, trajectorySamples, trajectoryStream } from './samples';
import type { OracleTrajectory } from './oracle';
import type { PageOracleTrajectory } from './page-oracle';
import type { Question } from './questions';
import {
  DEFAULT_SEED, MAX_POSITIONS, World, buildPageSet, buildWorld, oracleTrajectories, pageFiles, pageOracleTrajectories, tokenizerFiles, worldFiles,
} from './world';

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? (process.argv[i + 1] as string) : dflt;
}

function writeTokenizer(w: World, modelDir: string): void {
  fs.mkdirSync(modelDir, { recursive: true });
  for (const [name, text] of Object.entries(tokenizerFiles(w))) fs.writeFileSync(path.join(modelDir, name), text);
  console.log(`tokenizer -> ${modelDir}`);
}

function generate(seed: number, outDir: string, modelDir: string, withTokenizer: boolean): void {
  const w = buildWorld(seed);
  fs.mkdirSync(outDir, { recursive: true });
  const files = worldFiles(w);
  for (const [name, text] of Object.entries({ ...files, ...pageFiles(w) })) fs.writeFileSync(path.join(outDir, name), text);
  console.log(files['meta.json']);
  if (withTokenizer) writeTokenizer(w, modelDir);
}

/**
 * World k of the training mix: k = 0 is the shipped world; k >= 1 are auxiliary worlds built
 * from other seeds (fresh fictional names, so the model must copy names from its context
 * instead of memorising the shipped world). Auxiliary questions that mention a name of the
 * shipped world's dev/test entities are dropped, so dev/test stay unseen.
 */
export const AUX_SEED_STRIDE = 1009;

/** Document title -> its page URL (titles are unique in a world's corpus; checked). */
export function urlsByTitle(corpus: readonly { title: string; url: string }[]): Map<string, string> {
  const m = new Map<string, string>();
  for (const d of corpus) {
    if (m.has(d.title)) throw new Error(`two documents titled ${d.title}: their URLs cannot be told apart`);
    m.set(d.title, d.url);
  }
  return m;
}

/** A search-oracle trajectory as the page-tool agent sees it: every search observation rendered with the documents' URLs. */
export function withUrls(t: OracleTrajectory, urls: ReadonlyMap<string, string>): void {
  for (const r of t.rounds) {
    if (!r.docs) continue;
    r.docs = r.docs.map((doc) => {
      const url = urls.get(doc.title);
      if (url === undefined) throw new Error(`${t.qid}: no page URL for the document ${doc.title}`);
      return { ...doc, url };
    });
    r.observation = renderObservation(r.docs);
  }
}

/** Tokenised per-round training samples for training/train.py (not committed). */
export async function writeSamples(
  seed: number, modelDir: string, out: string, draws: number, split: 'train' | 'dev' | 'test', flawRate: number,
  worlds = 1, perWorld = 0, withFull = true, pagesPerWorld = 0,
): Promise<void> {
  const main = buildWorld(seed);
  const held = new Set(main.kb.entities.filter((e) => e.split !== 'train').map((e) => e.name));
  const tok = await loadTokenizer(modelDir);
  const enc = cachedEncoder(tok);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  const fd = fs.openSync(out, 'w');
  const stats: Record<string, { n: number; ctx: number; out: number; max: number }> = {};
  let checked = 0;
  let flawed = 0;
  let trajs = 0;
  let pageTrajs = 0;
  // with pages every trajectory is the page-tool agent's, whose prompt says so (the runtime's, tool.access)
  const prompt = pagesPerWorld > 0 ? ACCESS_SYSTEM_PROMPT : SYSTEM_PROMPT;
  for (let k = 0; k < worlds; k++) {
   const w = k === 0 ? main : buildWorld(seed + AUX_SEED_STRIDE * k);
   let qs = w.questions[split];
   if (k > 0) {
     qs = qs.filter((q) => q.chains.every((c) => c.every((h) => !held.has(w.kb.byId.get(h.subject)!.name)
       && !(w.kb.byId.has(h.object) && held.has(w.kb.byId.get(h.object)!.name)))));
   }
   if (perWorld > 0) qs = new SeededRandom(seed + 31 * k).shuffle(qs.slice()).slice(0, perWorld);
   // page questions (issue 32, --pages N): N per world, the same filter for auxiliary worlds
   let pqs: Question[] = [];
   const ps = pagesPerWorld > 0 ? buildPageSet(w) : null;
   if (ps) {
     pqs = ps.questions[split];
     if (k > 0) pqs = pqs.filter((q) => q.chains.every((c) => c.every((h) => !held.has(w.kb.byId.get(h.subject)!.name) && !(w.kb.byId.has(h.object) && held.has(w.kb.byId.get(h.object)!.name)))));
     pqs = new SeededRandom(seed + 37 * k + 5).shuffle(pqs.slice()).slice(0, pagesPerWorld);
   }
   const byId = new Map([...qs, ...pqs].map((q) => [q.id, q]));
   for (let d = 0; d < draws; d++) {
    const ts: (OracleTrajectory | PageOracleTrajectory)[] = oracleTrajectories(w, qs, seed + 100 + d + 7 * k, flawRate);
    if (ps) {
      // the page-tool agent searches corpus-pages.jsonl, whose documents show their URL: so do its search questions' rounds
      const urls = urlsByTitle(ps.pw.corpus);
      for (const t of ts) withUrls(t as OracleTrajectory, urls);
      const pts = pageOracleTrajectories(ps, pqs, seed + 200 + d + 7 * k, flawRate);
      pageTrajs += pts.length;
      ts.push(...pts);
    }
    const lines: string[] = [];
    for (const t of ts) {
      trajs++;
      if (t.flaw) flawed++;
      const q = byId.get(t.qid)!;
      // page samples are marked (`pg`), so a mix can tell them apart; the others' lines are as before
      const mark = q.kind === 'page' ? ',"pg":1}' : '}';
      for (const s of trajectorySamples(t as OracleTrajectory, prompt)) {
        if (s.policy === 'full' && !withFull) continue;
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
        lines.push(JSON.stringify({ p: s.policy, h: q.hops, k: q.objectives, r: s.round, f: t.flaw ? 1 : 0, c, o }).slice(0, -1) + mark);
      }
      // whole full-policy trajectory (loss on generated tokens only)
      const st = trajectoryStream(t as OracleTrajectory, prompt);
      const c = enc.encode(st.context);
      const o: number[] = [];
      const m: number[] = [];
      for (const p of st.pieces) {
        const ids = enc.encode(p.text);
        for (const x of ids) {
          o.push(x);
          m.push(p.generated ? 1 : 0);
        }
      }
      const room = MAX_POSITIONS - c.length;
      const ss = (stats.stream ??= { n: 0, ctx: 0, out: 0, max: 0 });
      ss.n++;
      ss.ctx += c.length;
      ss.out += Math.min(room, o.length);
      ss.max = Math.max(ss.max, c.length + o.length);
      lines.push(JSON.stringify({
        p: 'stream', h: q.hops, k: q.objectives, r: 0, f: t.flaw ? 1 : 0, c, o: o.slice(0, room), m: m.slice(0, room),
      }).slice(0, -1) + mark);
    }
    fs.writeSync(fd, lines.join('\n') + '\n');
   }
  }
  fs.closeSync(fd);
  console.log(JSON.stringify({ trajectories: trajs, ...(pagesPerWorld > 0 ? { pageTrajectories: pageTrajs } : {}), flawed, checked, stats }));
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
      split, Number(arg('flaw-rate', '0.3')), Number(arg('worlds', '1')), Number(arg('per-world', '0')),
      !process.argv.includes('--no-full'), Number(arg('pages', '0')))
      .catch((e) => {
        console.error(e);
        process.exit(1);
      });
    return;
  }
  if (cmd === 'probes') {
    probeStats(arg('batch', 'out/rollout/batch.jsonl'), modelDir)
      .then((s) => console.log(JSON.stringify(s, null, 2)))
      .catch((e) => {
        console.error(e);
        process.exit(1);
      });
    return;
  }
  if (cmd === 'rollout-samples') {
    try {
      console.log(JSON.stringify(writeRolloutSamples(arg('batch', 'out/rollout/batch.jsonl'), arg('samples-out', 'training/out/samples-rollout.jsonl'))));
    } catch (e) {
      console.error(`rollout-samples: ${(e as Error).message}`);
      process.exit(1);
    }
    return;
  }
  if (cmd === 'generate') {
    generate(seed, arg('out', 'data/world'), modelDir, process.argv.includes('--tokenizer'));
    return;
  }
  throw new Error(`unknown command ${cmd}`);
}

if (require.main === module) main();
