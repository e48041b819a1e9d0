// Rollout schedules, 'batch' against 'continuous' (docs/rollout.md, "Schedules"), on the embedded
// model: trajectories per second, the engine's occupancy (sequences per decode forward pass), left
// padding in the prefill, and the time the rollout stood still waiting for the scorer. Two
// question mixes: the embedded defaults (npm start: the first 24 train questions, -n 16) and a
// bundle-heavy slice of dev (4-10-objective questions, up to 16 rounds). The schedules run
// interleaved (A B A B ...), in one process, on one loaded model.
//
//   npm run build:ts && node bench/rollout.mjs [--reps 2] [--mix defaults|bundle|both] [--json]
//     [--bundle-questions 6] [--bundle-n 8] [--bundle-per-batch 2] [--no-memory] [--schedules batch,continuous,continuous-w16] [--rotate 0]
import { createRequire } from 'node:module';
import path from 'node:path';
import os from 'node:os';
import { root, flag, value } from './args.mjs';

const require = createRequire(import.meta.url);
const dist = (p) => require(path.join(root, 'dist', p));
const { CausalLM } = dist('engines/local/causal-lm.js');
const { LocalModel } = dist('engines/local/local-model.js');
const { Bm25Retriever } = dist('retrieval/bm25.js');
const { readQuestions } = dist('io/questions.js');
const { runPipeline } = dist('pipeline/pipeline.js');
const { EMBEDDED } = dist('paths.js');

const reps = Number(value('--reps', '2'));
/** --rotate k: the first rep starts with contestant k (a later run interleaved with an earlier one). */
const rotate = Number(value('--rotate', '0'));
const which = value('--mix', 'both');
const bundleQuestions = Number(value('--bundle-questions', '6'));

/** The dev questions with 4-10 objectives, in file order, then every fourth chain question among them. */
function bundleMix() {
  const dev = readQuestions(EMBEDDED.split('dev'));
  const bundles = dev.filter((q) => (q.objectives ?? 1) >= 4);
  const chains = dev.filter((q) => (q.objectives ?? 1) === 1);
  const out = [];
  for (let i = 0; out.length < bundleQuestions; i++) {
    out.push(bundles[i]);
    if (i % 3 === 2) out.push(chains[i]);
  }
  return out.slice(0, bundleQuestions);
}

const mixes = {
  defaults: { questions: () => readQuestions(EMBEDDED.split('train')).slice(0, 24), options: {} },
  bundle: {
    questions: bundleMix,
    options: { rollout: { maxTurns: 16, maxResponseTokens: 2048, groupSize: Number(value('--bundle-n', '8')), questionsPerBatch: Number(value('--bundle-per-batch', '2')) } },
  },
};

const model = await CausalLM.load(EMBEDDED.model(), {});
const local = new LocalModel(model);
// Every generate call's statistics: decode passes and the rows they carried, prefill padding.
const acc = { decodeSteps: 0, decodeRows: 0, prefillTokens: 0, paddedPrefillTokens: 0, calls: 0 };
const inner = model.generateWithStats.bind(model);
model.generateWithStats = async (prompts, options) => {
  const out = await inner(prompts, options);
  const s = out.stats;
  acc.calls++;
  acc.decodeSteps += s.decodeSteps;
  // Each sequence's first token comes from the prefill, every further one from a decode pass.
  acc.decodeRows += s.generatedTokens - out.results.filter((r) => r.tokenIds.length > 0).length;
  acc.prefillTokens += s.prefillTokens;
  acc.paddedPrefillTokens += s.paddedPrefillTokens;
  return out;
};
const retriever = Bm25Retriever.fromJsonl(EMBEDDED.corpus());

/** The contestants: the default schedule, continuous at the engine's width, continuous with 4 waves' worth in flight. */
const contestants = [
  { name: 'batch', rollout: { schedule: 'batch' } },
  { name: 'continuous', rollout: { schedule: 'continuous' } },
  { name: 'continuous-w16', rollout: { schedule: 'continuous', maxGenerateBatch: 16, maxInFlight: 64 } },
].filter((c) => value('--schedules', 'batch,continuous,continuous-w16').split(',').includes(c.name));

async function once(mix, c) {
  for (const k of Object.keys(acc)) acc[k] = 0;
  const m = mixes[mix];
  // --no-memory: generation alone (no scorer), to tell the schedule's effect on the engine from the scorer's.
  const options = { ...m.options, rollout: { ...(m.options.rollout ?? {}), ...c.rollout }, ...(flag('--no-memory') ? { memory: { enabled: false } } : {}) };
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  const res = await runPipeline({ questions: m.questions(), generator: local, scorer: local, retriever, options });
  const wall = (performance.now() - t0) / 1000;
  // CPU seconds of this process (every ORT thread): the work done, less at the mercy of other load than the wall time.
  const cpu = process.cpuUsage(cpu0);
  const cpuS = (cpu.user + cpu.system) / 1e6;
  const t = res.stats.times;
  return {
    mix, schedule: c.name, trajectories: res.records.length, rounds: res.stats.rounds, generatedTokens: res.stats.generatedTokens, wallS: wall,
    trajPerS: res.records.length / wall, tokensPerS: res.stats.generatedTokens / wall, cpuS, trajPerCpuS: res.records.length / cpuS,
    occupancy: acc.decodeRows / acc.decodeSteps,
    decodeSteps: acc.decodeSteps, generateCalls: acc.calls,
    paddingRatio: acc.paddedPrefillTokens / acc.prefillTokens,
    generateS: t.generateMs / 1000, scoreS: t.scoreMs / 1000, scoreWaitS: t.scoreWaitMs / 1000, scorerCalls: res.stats.scorerCalls,
  };
}

const rows = [];
for (const mix of which === 'both' ? ['defaults', 'bundle'] : [which]) {
  for (let r = 0; r < reps; r++) {
    // Each rep starts with the next contestant: every one runs first once in as many reps as there are contestants.
    const order = contestants.map((_, i) => contestants[(i + r + rotate) % contestants.length]);
    for (const c of order) {
      const row = await once(mix, c);
      rows.push(row);
      if (!flag('--json')) {
        console.log(`${mix.padEnd(8)} ${c.name.padEnd(14)} ${row.trajectories} traj ${row.rounds} rounds ${row.generatedTokens} tokens ${row.wallS.toFixed(1)} s ` +
          `${row.trajPerS.toFixed(2)} traj/s ${row.tokensPerS.toFixed(0)} tok/s cpu ${row.cpuS.toFixed(1)} s (${row.trajPerCpuS.toFixed(2)} traj/cpu-s) occupancy ${row.occupancy.toFixed(1)} seq/decode pass (${row.decodeSteps} passes, ${row.generateCalls} calls) ` +
          `padding ${row.paddingRatio.toFixed(2)}x scorer ${row.scoreS.toFixed(1)} s in ${row.scorerCalls} calls, waited on ${row.scoreWaitS.toFixed(1)} s`);
      }
    }
  }
}
await model.dispose();
const machine = { cpu: os.cpus()[0]?.model, cores: os.availableParallelism(), loadavg: os.loadavg() };
if (flag('--json')) console.log(JSON.stringify({ machine, rows }, null, 1));
else console.log(JSON.stringify(machine));
