// Model-runtime benchmark on the embedded model (models/mempo-tiny), each phase in its own
// process so that its peak RSS is its own:
//   gen16    batched generation, one group of 16 samples of one prompt
//   gen128   8 questions x 16 samples in one batch
//   score    the memory-reward scorer on a MemPO-shaped batch: 8 questions x 16 samples x
//            3 rounds = 384 snapshots -> 768 items (full and memory contexts), with the
//            kernel's gatherLogProbs on the native addon and on the JS twin, and without
//            prefix sharing (every full context run on its own)
// `node bench/runtime.mjs [--quick] [--json] [--model DIR] [--threads N]` (N: ORT intra-op
// threads, default ORT's choice). Needs `npm run build:ts` first.
import { fork } from 'node:child_process';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { args, flag, root, value } from './args.mjs';

const require = createRequire(import.meta.url);
const here = fileURLToPath(import.meta.url);
const quick = flag('--quick');
const json = flag('--json');
const modelDir = path.resolve(value('--model', path.join(root, 'models', 'mempo-tiny')));
const log = json ? () => {} : (...a) => console.log(...a);

function lcg(seed) {
  let s = seed >>> 0 || 1;
  return (lo, hi) => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return lo + (s % (hi - lo));
  };
}
const ids = (rand, n) => Array.from({ length: n }, () => rand(13, 2048));
const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const peakRssMiB = () => process.resourceUsage().maxRSS / 1024;

async function phase(name) {
  const load0 = os.loadavg()[0];
  const { CausalLM } = require(path.join(root, 'dist', 'index.js'));
  const kernels = require(path.join(root, 'dist', 'index.js'));
  const threads = Number(value('--threads', '0'));
  const model = await CausalLM.load(modelDir, threads > 0 ? { sessionOptions: { intraOpNumThreads: threads } } : {});
  const tk = model.tokenizer;
  const question = (q) => tk.applyChatTemplate([
    { role: 'system', content: 'Answer the question. Write <mem>, <think>, then <search> or <answer>.' },
    { role: 'user', content: `Question: ${q}` },
  ]);
  const reps = quick || name !== 'gen16' ? 1 : 3;
  if (name === 'gen16' || name === 'gen128') {
    const questions = name === 'gen16' ? 1 : 8;
    const maxNewTokens = quick ? 32 : name === 'gen16' ? 256 : 128;
    const prompts = [];
    for (let q = 0; q < questions; q++) {
      const p = question(`Which river flows past the mill built by the founder of town ${q}?`);
      for (let s = 0; s < 16; s++) prompts.push(p);
    }
    await model.generate(prompts.slice(0, 2), { maxNewTokens: 4, seed: 0 }); // warm-up
    const times = [];
    let st;
    for (let r = 0; r < reps; r++) {
      const t = performance.now();
      // eos ids off: every sequence runs to maxNewTokens, so token counts are fixed.
      await model.generate(prompts, {
        maxNewTokens, temperature: 1, topP: 0.95, seed: r, eosTokenIds: [], stop: ['</search>', '</answer>'], maxBatchSize: 128,
      });
      times.push(performance.now() - t);
      st = model.lastGenerationStats;
    }
    const ms = median(times);
    return {
      phase: name,
      sequences: prompts.length,
      promptTokens: prompts[0].length,
      maxNewTokens,
      generatedTokens: st.generatedTokens,
      ms,
      tokensPerSec: (st.generatedTokens / ms) * 1000,
      peakRssMiB: peakRssMiB(),
      loadAvg: [load0, os.loadavg()[0]],
    };
  }
  if (name === 'score') {
    const rand = lcg(7);
    const Q = 8, N = 16, rounds = quick ? 1 : 3;
    const items = [];
    const full = [], mem = [];
    for (let q = 0; q < Q; q++) {
      const prompt = question(`Who founded the city on river ${q}?`);
      const target = [tk.tokenId('<answer>'), ...ids(rand, 4), tk.tokenId('</answer>')];
      for (let s = 0; s < N; s++) {
        let stream = [...prompt];
        for (let r = 1; r <= rounds + 1; r++) {
          const memSpan = [tk.tokenId('<mem>'), ...ids(rand, 24), tk.tokenId('</mem>')];
          const round = [...memSpan, tk.tokenId('<think>'), ...ids(rand, 20), tk.tokenId('</think>')];
          if (r >= 2) {
            // docs/algorithm.md §2: fullContext = everything before round r; memContext = prompt + round r up to </mem>.
            full.push({ contextIds: stream.slice(), targetIds: target });
            mem.push({ contextIds: [...prompt, ...memSpan], targetIds: target });
          }
          const obs = [tk.tokenId('<information>'), ...ids(rand, 110), tk.tokenId('</information>')];
          stream = [...stream, ...round, tk.tokenId('<search>'), ...ids(rand, 8), tk.tokenId('</search>'), ...obs];
        }
      }
    }
    items.push(...full, ...mem);
    const tokens = items.reduce((a, it) => a + it.contextIds.length + it.targetIds.length, 0);
    const targetTokens = items.reduce((a, it) => a + it.targetIds.length, 0);
    const out = { phase: name, items: items.length, tokens, targetTokens, backends: {} };
    for (const [label, backend, sharePrefixes] of [['native', 'native', true], ['js', 'js', true], ['native, no prefix sharing', 'native', false]]) {
      kernels.setBackend(backend);
      let gatherMs = 0;
      const gather = (l, t, r, v) => {
        const t0 = performance.now();
        const res = kernels.gatherLogProbs(l, t, r, v);
        gatherMs += performance.now() - t0;
        return res;
      };
      await model.scoreTargets(items.slice(0, 4), { gather, sharePrefixes });
      const times = [], gathers = [];
      for (let r = 0; r < reps; r++) {
        gatherMs = 0;
        const t = performance.now();
        await model.scoreTargets(items, { gather, sharePrefixes });
        times.push(performance.now() - t);
        gathers.push(gatherMs);
      }
      const ms = median(times);
      out.backends[label] = {
        ms,
        tokensPerSec: (tokens / ms) * 1000,
        gatherMs: median(gathers),
        microBatches: model.lastScoreStats.microBatches,
        paddedTokens: model.lastScoreStats.paddedTokens,
        sharedItems: model.lastScoreStats.sharedItems,
        tokensRun: model.lastScoreStats.tokens + model.lastScoreStats.tailTokens,
      };
    }
    out.peakRssMiB = peakRssMiB();
    out.loadAvg = [load0, os.loadavg()[0]];
    return out;
  }
  throw new Error(`unknown phase ${name}`);
}

function runChild(name) {
  return new Promise((resolve, reject) => {
    const child = fork(here, ['--phase', name, ...args], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
    child.on('message', (m) => resolve(m));
    child.on('exit', (code) => (code === 0 ? null : reject(new Error(`phase ${name} exited with code ${code}`))));
  });
}

if (flag('--phase')) {
  const res = await phase(value('--phase'));
  process.send(res);
  process.exit(0);
} else {
  const machine = { cpu: os.cpus()[0]?.model ?? 'unknown', cores: os.cpus().length, memoryGiB: Math.round(os.totalmem() / 2 ** 30), node: process.version };
  log(`model runtime on ${path.relative(root, modelDir)}: ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB, Node ${machine.node}`);
  const results = [];
  for (const name of ['gen16', 'gen128', 'score']) {
    const r = await runChild(name);
    results.push(r);
    if (r.phase === 'score') {
      for (const [b, x] of Object.entries(r.backends)) {
        log(`score ${String(r.items).padStart(4)} items  ${r.tokens} tokens (${r.targetTokens} targets, ${x.tokensRun} run)  gather=${b.padEnd(6)} ` +
          `${x.ms.toFixed(0).padStart(6)} ms  ${x.tokensPerSec.toFixed(0).padStart(7)} tok/s  gather ${x.gatherMs.toFixed(1)} ms  ` +
          `${x.microBatches} micro-batches  peak RSS ${r.peakRssMiB.toFixed(0)} MiB  load ${r.loadAvg.map((l) => l.toFixed(1)).join('->')}`);
      }
    } else {
      log(`${r.phase.padEnd(6)} ${String(r.sequences).padStart(4)} seqs x ${r.maxNewTokens} new tokens (prompt ${r.promptTokens})  ` +
        `${r.ms.toFixed(0).padStart(6)} ms  ${r.tokensPerSec.toFixed(0).padStart(6)} tok/s  peak RSS ${r.peakRssMiB.toFixed(0)} MiB  load ${r.loadAvg.map((l) => l.toFixed(1)).join('->')}`);
    }
  }
  if (json) console.log(JSON.stringify({ machine, results }, null, 2));
}
