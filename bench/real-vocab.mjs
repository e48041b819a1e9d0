// The memory-reward scorer at a real vocabulary (V = 151,936): the 2N scoring pass of a
// MemPO-shaped batch (docs/algorithm.md §4) on the tools/real-vocab model (Qwen3's tokenizer,
// a tiny random decoder, so the model's own compute is small and the cost measured is the
// [tokens, V] logits: ORT writing them, the copy to JS, the log-softmax gather).
//   Q questions x S samples x 2 snapshots (rounds 2 and 3) = N -> 2N items: the full contexts
//   (prompt + earlier rounds and observations) and the memory contexts (prompt + the round up
//   to </mem>), target <answer>gold</answer>, texts from the embedded world data.
// Default: selected logits (the graph rewritten at load, src/engines/local/onnx-select.ts) vs
// the forced full-logits path (`selectLogits: false`), on the real-vocab model and on the
// embedded models/mempo-tiny (V = 3,072), 2 x 4 x 2 = 32 items, --reps timed runs each (median).
// `--variants sharing,no-sharing --questions 8 --samples 16`: the earlier full-logits table.
// Each variant runs in its own process, so its peak RSS (VmHWM) is its own.
// `node bench/real-vocab.mjs [--quick] [--json] [--threads N] [--reps N] [--questions Q] [--samples S] [--variants a,b] [--model DIR] [--script] [--max-logits-mib M]`
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
/** The process's peak resident set (VmHWM), MiB. */
const peakRssMiB = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? NaN) / 1024;
const median = (xs) => xs.slice().sort((a, b) => a - b)[xs.length >> 1];
const tinyDir = path.join(root, 'models', 'mempo-tiny');

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

/** `model` as the scorer's ForwardModel, recording the largest logits tensor a pass returns. */
function spied(model, seen) {
  return {
    modelPath: model.modelPath, config: model.config, io: model.io, tokenizer: model.tokenizer,
    padTokenId: model.padTokenId, eosTokenIds: model.eosTokenIds, emptyCache: (b) => model.emptyCache(b),
    forward: async (input) => {
      const out = await model.forward(input);
      seen.maxLogitsBytes = Math.max(seen.maxLogitsBytes, out.logits.byteLength);
      return out;
    },
  };
}

/** Variants: `selected` / `full` (prefix sharing on, as `LocalModel.score` runs it) and the older `sharing` / `no-sharing` (full logits). */
async function variant(name, modelDir) {
  const load0 = os.loadavg()[0];
  const { CausalLM, gatherLogProbs } = require(path.join(root, 'dist', 'index.js'));
  const { scoreTargets } = require(path.join(root, 'dist', 'engines', 'local', 'scorer.js'));
  const threads = Number(value('--threads', '1'));
  const selectLogits = name === 'selected';
  const model = await CausalLM.load(modelDir, { selectLogits, ...(threads > 0 ? { sessionOptions: { intraOpNumThreads: threads } } : {}) });
  if (selectLogits && !model.io.selectLogits) throw new Error(`${modelDir}: no selected logits (${model.io.selectReason})`);
  const items = buildItems(model.tokenizer, Number(value('--questions', quick ? '1' : '2')), Number(value('--samples', quick ? '2' : '4')));
  const sharePrefixes = name !== 'no-sharing';
  let gatherMs = 0;
  const gather = (l, t, r, v) => {
    const t0 = performance.now();
    const res = gatherLogProbs(l, t, r, v);
    gatherMs += performance.now() - t0;
    return res;
  };
  const maxMiB = value('--max-logits-mib');
  const opts = { truncate: 'left', gather, sharePrefixes, ...(maxMiB !== undefined ? { maxLogitsBytes: Number(maxMiB) * 2 ** 20 } : {}) };
  // Warm-up on 8-token contexts: sessions and kernels ready, no large logits buffer yet, so the RSS before is the baseline.
  await model.scoreTargets(items.slice(0, 2).map((it) => ({ contextIds: it.contextIds.slice(0, 8), targetIds: it.targetIds })), opts);
  const rssBefore = rssMiB();
  const peakBefore = peakRssMiB();
  const seen = { maxLogitsBytes: 0 };
  const { stats } = await scoreTargets(spied(model, seen), items, opts); // the pass whose peak is measured
  const peakAfterFirst = peakRssMiB();
  const times = [];
  const gathers = [];
  for (let r = 0; r < Number(value('--reps', quick ? '1' : '5')); r++) {
    gatherMs = 0;
    const t = performance.now();
    await model.scoreTargetsWithStats(items, opts);
    times.push(performance.now() - t);
    gathers.push(gatherMs);
  }
  const lengths = items.map((it) => it.contextIds.length);
  return {
    variant: name,
    model: modelDir === tinyDir ? 'mempo-tiny' : 'real-vocab',
    vocabSize: model.config.vocabSize,
    items: items.length,
    contextTokens: { min: Math.min(...lengths), max: Math.max(...lengths) },
    itemTokens: items.reduce((a, it) => a + it.contextIds.length + it.targetIds.length, 0),
    targetTokens: stats.targetTokens,
    tokensRun: stats.tokens + stats.tailTokens,
    paddedTokens: stats.paddedTokens,
    microBatches: stats.microBatches,
    sharedItems: stats.sharedItems,
    times,
    ms: median(times),
    gatherMs: median(gathers),
    maxLogitsMiB: seen.maxLogitsBytes / 2 ** 20,
    rssBeforeMiB: rssBefore,
    peakBeforeMiB: peakBefore,
    peakFirstPassMiB: peakAfterFirst,
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
  const names = value('--variants', 'selected,full').split(',');
  const dirs = flag('--no-tiny') || !names.includes('selected') ? [modelDir] : [modelDir, tinyDir];
  try {
    for (const dir of dirs) {
      for (const name of names) {
        const r = await runChild(name, dir);
        results.push(r);
        log(`${r.model.padEnd(10)} ${r.variant.padEnd(10)} V=${r.vocabSize} ${r.items} items (contexts ${r.contextTokens.min}-${r.contextTokens.max} tokens, ${r.itemTokens} tokens, ${r.targetTokens} targets, ` +
          `${r.tokensRun} run, ${r.paddedTokens} padded, ${r.microBatches} passes)  median ${(r.ms / 1000).toFixed(3)} s of ${r.times.length} [${r.times.map((t) => (t / 1000).toFixed(2)).join(' ')}]  gather ${(r.gatherMs / 1000).toFixed(3)} s  ` +
          `largest logits ${r.maxLogitsMiB.toFixed(1)} MiB  RSS ${r.rssBeforeMiB.toFixed(0)} MiB before -> VmHWM ${r.peakRssMiB.toFixed(0)} MiB (${r.peakBeforeMiB.toFixed(0)} before)  load ${r.loadAvg.map((l) => l.toFixed(1)).join('->')}`);
      }
      const [sel, full] = ['selected', 'full'].map((v) => results.find((r) => r.variant === v && r.model === results[results.length - 1].model));
      if (sel && full) {
        log(`  ${sel.model}: time ${(full.ms / sel.ms).toFixed(1)}x lower, largest logits ${(full.maxLogitsMiB / sel.maxLogitsMiB).toFixed(1)}x, VmHWM ${(full.peakRssMiB / sel.peakRssMiB).toFixed(2)}x, ` +
          `VmHWM over the RSS before the pass ${(full.peakRssMiB - full.rssBeforeMiB).toFixed(0)} vs ${(sel.peakRssMiB - sel.rssBeforeMiB).toFixed(0)} MiB`);
      }
    }
  } finally {
    if (tmp) rmSync(tmp, { recursive: true, force: true });
  }
  if (json) console.log(JSON.stringify({ machine, date: new Date().toISOString(), results }, null, 2));
}
