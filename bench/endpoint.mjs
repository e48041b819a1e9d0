// `node bench/endpoint.mjs`: the OpenAI-compatible endpoint's cost against in-process generation on
// the same calls (issue 45 item 7). One LocalModel (the embedded model, --threads ORT threads) serves
// both: `mempo serve`'s server (createCompletionsServer) listening on loopback in this process, and
// direct `CausalLM.generate` calls with what the server passes for a `/v1/completions` request (its
// stop ids, the request's seed, temperature and max_tokens). Contestants, one call at a time, K calls
// a round (the questions of data/world/train.jsonl as token ids, seed 1000 + k, temperature 1):
//   direct       CausalLM.generate in-process;
//   openai       the real `openai` SDK, `client.completions.create` (unstreamed, return_token_ids);
//   openai-sse   the same with `stream: true` and `stream_options.include_usage`, every chunk read.
// The order of the three rotates round by round; every endpoint call's sampled ids (or, streamed, its
// completion token count) must equal the direct call's (checked: same seed, same ids). Reported: each
// contestant's median time per call and the per-round ratio endpoint / direct (median, range), and
// the added milliseconds per call. Two call sizes: --tokens new tokens (default 64) and 1 (the
// request's fixed cost). Flags: --threads 1, --calls 16, --rounds 5, --tokens 64, --json.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { root, flag, int, median, spread } from './args.mjs';

const require = createRequire(import.meta.url);
const mempo = require(path.join(root, 'dist', 'index.js'));
const { createCompletionsServer, listen } = require(path.join(root, 'dist', 'servers', 'completions-server.js'));

const threads = int('--threads', 1);
const K = int('--calls', 16);
const rounds = int('--rounds', 5);
const maxTokens = int('--tokens', 64);
const json = flag('--json');
const log = json ? (...a) => console.error(...a) : (...a) => console.log(...a);

const machine = { cpu: os.cpus()[0]?.model ?? 'unknown', cores: os.cpus().length, node: process.version, native: mempo.nativeInfo(), loadavgBefore: os.loadavg().map((x) => +x.toFixed(2)), date: new Date().toISOString() };
log(`machine: ${machine.cpu}, ${machine.cores} cores, SIMD ${machine.native.simd}, Node ${machine.node}, load ${machine.loadavgBefore.join(' ')}; ${threads} ORT thread(s)`);

const local = await mempo.LocalModel.load(path.join(root, 'models', 'mempo-tiny'), { load: { sessionOptions: { intraOpNumThreads: threads, interOpNumThreads: 1 } } });
const server = createCompletionsServer(local);
const base = await listen(server, 0);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0 });
const questions = readFileSync(path.join(root, 'data', 'world', 'train.jsonl'), 'utf8').trim().split('\n').slice(0, K).map((l) => JSON.parse(l).question);
const prompts = questions.map((q) => Array.from(local.codec.encode(q)));

const result = { machine, threads, calls: K, rounds, sizes: [] };
try {
  for (const n of [maxTokens, 1]) {
    const direct = async (k) => (await local.model.generate([{ ids: prompts[k] }], {
      maxNewTokens: n, temperature: 1, seed: 1000 + k, stopTokenIds: local.stopTokenIds, decode: false,
    }))[0].tokenIds;
    const unstreamed = async (k) => {
      const r = await client.completions.create({ model: 'mempo-tiny', prompt: prompts[k], max_tokens: n, temperature: 1, seed: 1000 + k, return_token_ids: true });
      return r.choices[0].token_ids;
    };
    const streamed = async (k) => {
      const s = await client.completions.create({ model: 'mempo-tiny', prompt: prompts[k], max_tokens: n, temperature: 1, seed: 1000 + k, stream: true, stream_options: { include_usage: true } });
      let usage;
      for await (const chunk of s) if (chunk.usage) usage = chunk.usage;
      return usage.completion_tokens;
    };
    const contestants = { direct, openai: unstreamed, 'openai-sse': streamed };
    const names = Object.keys(contestants);
    const reference = [];
    for (let k = 0; k < K; k++) reference.push(await direct(k)); // warm-up and the ids every endpoint call must equal
    const per = Object.fromEntries(names.map((x) => [x, []]));
    let tokens = 0;
    for (let r = 0; r < rounds; r++) {
      for (const name of names.slice(r % 3).concat(names.slice(0, r % 3))) {
        const t = performance.now();
        for (let k = 0; k < K; k++) {
          const out = await contestants[name](k);
          const same = name === 'openai-sse' ? out === reference[k].length : JSON.stringify(out) === JSON.stringify(reference[k]);
          if (!same) throw new Error(`${name} call ${k} (seed ${1000 + k}): ${JSON.stringify(out)} differs from the direct call's ${JSON.stringify(reference[k])}`);
        }
        per[name].push((performance.now() - t) / K);
      }
    }
    tokens = reference.reduce((a, x) => a + x.length, 0);
    const row = {
      max_tokens: n, new_tokens_per_round: tokens,
      ms_per_call: Object.fromEntries(names.map((x) => [x, +median(per[x]).toFixed(3)])),
      ratio_openai: spread(per.openai.map((x, i) => x / per.direct[i])),
      ratio_openai_sse: spread(per['openai-sse'].map((x, i) => x / per.direct[i])),
      added_ms_per_call: { openai: +(median(per.openai) - median(per.direct)).toFixed(3), 'openai-sse': +(median(per['openai-sse']) - median(per.direct)).toFixed(3) },
      rounds_ms_per_call: per,
    };
    result.sizes.push(row);
    log(`max_tokens ${n} (${tokens} new tokens over ${K} calls): direct ${row.ms_per_call.direct} ms/call, openai ${row.ms_per_call.openai} ms (${row.ratio_openai.median}×, ${row.ratio_openai.min}–${row.ratio_openai.max}), ` +
      `openai streamed ${row.ms_per_call['openai-sse']} ms (${row.ratio_openai_sse.median}×, ${row.ratio_openai_sse.min}–${row.ratio_openai_sse.max}); added per call ${row.added_ms_per_call.openai} / ${row.added_ms_per_call['openai-sse']} ms`);
  }
} finally {
  await new Promise((r) => server.close(r));
  await local.dispose();
}
result.machine.loadavgAfter = os.loadavg().map((x) => +x.toFixed(2));
if (json) console.log(JSON.stringify(result, null, 1));
