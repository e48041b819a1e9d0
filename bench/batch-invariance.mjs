// Does a sequence's logits depend on what else is in its forward pass? (docs/rollout.md,
// "Schedules".) Greedy generation of one prompt on the embedded model, every logits row of 20
// decode steps compared bit for bit: alone, beside batch-mates of the same length, beside a
// batch-mate 1 or 3 tokens longer (so the prompt gets 1 or 3 columns of left padding).
//
//   npm run build:ts && node bench/batch-invariance.mjs
import { createRequire } from 'node:module';
import path from 'node:path';
import { root } from './args.mjs';

const require = createRequire(import.meta.url);
const { CausalLM } = require(path.join(root, 'dist', 'engines', 'local', 'causal-lm.js'));
const { readQuestions } = require(path.join(root, 'dist', 'io', 'questions.js'));
const { EMBEDDED } = require(path.join(root, 'dist', 'paths.js'));

const model = await CausalLM.load(EMBEDDED.model(), { sessionOptions: { intraOpNumThreads: 1 } });
const tok = model.tokenizer;
const prompts = readQuestions(EMBEDDED.split('train')).slice(0, 60)
  .map((q) => tok.encode(`<|im_start|>user\n${q.question}<|im_end|>\n<|im_start|>assistant\n`));
const byLength = new Map();
prompts.forEach((p, i) => byLength.set(p.length, [...(byLength.get(p.length) ?? []), i]));
const [len, same] = [...byLength.entries()].sort((a, b) => b[1].length - a[1].length)[0];
const x = same[0];

/** Logits rows of prompt `x` (first in the call) over 20 greedy steps. */
async function rowsOf(ids) {
  const rows = [];
  await model.generate(ids.map((k) => ({ ids: prompts[k] })), {
    maxNewTokens: 20, temperature: 0, seed: 1, decode: false, eosTokenIds: [],
    logitsProcessor: (row, i) => { if (i === 0) rows.push(Float32Array.from(row)); },
  });
  return rows;
}
function compare(a, b) {
  let differ = 0, n = 0, max = 0;
  for (let s = 0; s < Math.min(a.length, b.length); s++) {
    for (let v = 0; v < a[s].length; v++) {
      n++;
      const d = Math.abs(a[s][v] - b[s][v]);
      if (d !== 0) { differ++; max = Math.max(max, d); }
    }
  }
  return `${differ} of ${n} logits differ (max |diff| ${max.toExponential(2)})`;
}
const alone = await rowsOf([x]);
const longer = (k) => prompts.findIndex((p) => p.length === len + k);
console.log(`prompt of ${len} tokens, 20 decode steps, V = ${model.config.vocabSize}`);
console.log(`alone, twice:                         ${compare(alone, await rowsOf([x]))}`);
console.log(`beside ${Math.min(8, same.length) - 1} of the same length:         ${compare(alone, await rowsOf(same.slice(0, 8)))}`);
for (const k of [1, 3]) {
  if (longer(k) >= 0) console.log(`beside one ${k} token(s) longer (left pad): ${compare(alone, await rowsOf([x, longer(k)]))}`);
}
await model.dispose();
