// The memory-reward scorer at a real vocabulary (V = 151,936): one 2N scoring pass of a
// MemPO-shaped batch (docs/algorithm.md §4) on the tools/real-vocab model (Qwen3's tokenizer,
// a tiny random decoder, so the model's own compute is small and the cost measured is the
// [tokens, V] logits: ORT writing them, the copy to JS, the log-softmax gather).
//   8 questions x 16 samples x 2 snapshots (rounds 2 and 3) = N = 256 -> 512 items: the full
//   contexts (prompt + earlier rounds and observations) and the memory contexts (prompt + the
//   round up to </mem>), target <answer>gold</answer>, texts from the embedded world data.
// Each variant (prefix sharing on, as `LocalModel.score` runs it; off) runs in its own process,
// so its peak RSS is its own.
// `node bench/real-vocab.mjs [--quick] [--json] [--threads N] [--model DIR] [--script]`
// Needs `npm run build:ts` and, without --model, `npx tsc -p tsconfig.tools.json` (the model is
// then built into a temp dir, without the script bonus unless --script).
import { fork } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { args, flag, root, value } from './args.mjs';

const require = createRequire(import.meta.url);
const here = fileURLToPath(import.meta.url);
const quick = flag('--quick');
const json = flag('--json');
const log = json ? () => {} : (...a) => console.log(...a);
const rssMiB = () => process.memoryUsage().rss / 2 ** 20;
const peakRssMiB = () => process.resourceUsage().maxRSS / 1024;

function lcg(seed) {
  let s = seed >>> 0 || 1;
  return (n) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % n;
  };
}

const jsonl = (file) => readFileSync(path.join(root, 'data', 'world', file), 'utf8').trim().split('\n').map((l) => JSON.parse(l));

/** The 2N items: per trajectory, rounds 2 and 3's full and memory contexts (docs/algorithm.md §2). */
function buildItems(tk, Q, N) {
  const { renderPrompt } = require(path.join(root, 'dist', 'protocol', 'chat.js'));
  const { renderRound } = require(path.join(root, 'dist', 'protocol', 'round.js'));
  const { renderObservation } = require(path.join(root, 'dist', 'retrieval', 'observation.js'));
  const questions = jsonl('train.jsonl').slice(0, Q);
  const corpus = jsonl('corpus.jsonl');
  const rand = lcg(7);
  const full = [], mem = [];
  for (const q of questions) {
    const prompt = tk.encode(renderPrompt(q.question));
    const target = [...tk.encode('<answer>'), ...tk.encode(q.golds[0]), ...tk.encode('</answer>')];
    for (let s = 0; s < N; s++) {
      let stream = [...prompt];
      let facts = 'none';
      for (let r = 1; r <= 3; r++) {
        const docs = [0, 1, 2].map(() => corpus[rand(corpus.length)]);
        const text = renderRound(facts, `I need to find more about ${docs[0].title}.`, { kind: 'search', query: `${docs[0].title} ${q.question}` });
        const ids = tk.encode(text);
        if (r >= 2) {
          const memEnd = ids.indexOf(tk.tokenId('</mem>')) + 1;
          full.push({ contextIds: stream.slice(), targetIds: target });
          mem.push({ contextIds: [...prompt, ...ids.slice(0, memEnd)], targetIds: target });
        }
        stream = [...stream, ...ids, ...tk.encode(renderObservation(docs))];
        facts = docs.map((d) => d.contents.split('. ')[0]).join('. ');
      }
    }
  }
  return [...full, ...mem];
}

async function variant(name, modelDir) {
  const load0 = os.loadavg()[0];
  const { CausalLM, gatherLogProbs } = require(path.join(root, 'dist', 'index.js'));
  const threads = Number(value('--threads', '1'));
  const model = await CausalLM.load(modelDir, threads > 0 ? { sessionOptions: { intraOpNumThreads: threads } } : {});
  const items = buildItems(model.tokenizer, quick ? 1 : 8, quick ? 2 : 16);
  const sharePrefixes = name !== 'no-sharing';
  let gatherMs = 0;
  const gather = (l, t, r, v) => {
    const t0 = performance.now();
    const res = gatherLogProbs(l, t, r, v);
    gatherMs += performance.now() - t0;
    return res;
  };
  await model.scoreTargets(items.slice(0, 2), { truncate: 'left', gather, sharePrefixes }); // warm-up
  gatherMs = 0;
  const rssBefore = rssMiB();
  const peakBefore = peakRssMiB();
  const t = performance.now();
  const { stats } = await model.scoreTargetsWithStats(items, { truncate: 'left', gather, sharePrefixes });
  const ms = performance.now() - t;
  const lengths = items.map((it) => it.contextIds.length);
  return {
    variant: name,
    vocabSize: model.config.vocabSize,
    items: items.length,
    contextTokens: { min: Math.min(...lengths), max: Math.max(...lengths) },
    itemTokens: items.reduce((a, it) => a + it.contextIds.length + it.targetIds.length, 0),
    targetTokens: stats.targetTokens,
    tokensRun: stats.tokens + stats.tailTokens,
    paddedTokens: stats.paddedTokens,
    microBatches: stats.microBatches,
    sharedItems: stats.sharedItems,
    ms,
    gatherMs,
    rssBeforeMiB: rssBefore,
    peakBeforeMiB: peakBefore,
    peakRssMiB: peakRssMiB(),
    loadAvg: [load0, os.loadavg()[0]],
  };
}

function runChild(name, modelDir) {
  return new Promise((resolve, reject) => {
    const child = fork(here, ['--variant', name, '--dir', modelDir, ...args], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
    child.on('message', (m) => resolve(m));
    child.on('exit', (code) => (code === 0 ? null : reject(new Error(`variant ${name} exited with code ${code}`))));
  });
}

if (flag('--variant')) {
  process.send(await variant(value('--variant'), value('--dir')));
  process.exit(0);
} else {
  let modelDir = value('--model');
  let tmp;
  if (modelDir === undefined) {
    const { buildRealVocabModel } = require(path.join(root, 'dist-tools', 'tools', 'real-vocab', 'build.js'));
    tmp = mkdtempSync(path.join(os.tmpdir(), 'mempo-bench-rv-'));
    modelDir = buildRealVocabModel(path.join(tmp, 'model'), { script: flag('--script') }).dir;
  }
  const machine = { cpu: os.cpus()[0]?.model ?? 'unknown', cores: os.cpus().length, memoryGiB: Math.round(os.totalmem() / 2 ** 30), node: process.version };
  log(`scorer at a real vocabulary (${modelDir}): ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB, Node ${machine.node}, ${new Date().toISOString()}`);
  const results = [];
  try {
    for (const name of ['sharing', 'no-sharing']) {
      const r = await runChild(name, modelDir);
      results.push(r);
      log(`${r.variant.padEnd(10)} V=${r.vocabSize} ${r.items} items (contexts ${r.contextTokens.min}-${r.contextTokens.max} tokens, ${r.itemTokens} tokens, ${r.targetTokens} targets, ` +
        `${r.tokensRun} run, ${r.paddedTokens} padded, ${r.microBatches} passes)  ${(r.ms / 1000).toFixed(1)} s  gather ${(r.gatherMs / 1000).toFixed(2)} s  ` +
        `RSS ${r.rssBeforeMiB.toFixed(0)} MiB before -> peak ${r.peakRssMiB.toFixed(0)} MiB  load ${r.loadAvg.map((l) => l.toFixed(1)).join('->')}`);
    }
  } finally {
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  }
  if (json) console.log(JSON.stringify({ machine, date: new Date().toISOString(), results }, null, 2));
}
