// train.sh's `rl` stage, after `mempo train`: the run's last checkpoint becomes a model directory like
// models/mempo-tiny (the model files only, not the learner's state), with a manifest and an `rl` record in
// config.json's `mempo`. Refused (exit 3, nothing written) when the run is not finished or when its greedy
// dev check (50 dev questions, in metrics.jsonl) fell more than MAX_DROP below the model it started from, or
// its greedy EM on 50 dev page questions did (`mempo eval --json` of FROM and of the checkpoint: the dev check
// asks the old kinds only, and a run can stop opening pages while it holds them).
//   node training/rl-export.mjs RUN_DIR STEPS FROM OUT_DIR PAGES_BEFORE_JSON PAGES_AFTER_JSON
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const MAX_DROP = 0.1; // 5 of 50 questions: more is a policy that RL broke, not noise
const FILES = ['model.onnx', 'config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json'];

const [run, stepsArg, from, out, pagesBeforeFile, pagesAfterFile] = process.argv.slice(2);
const steps = Number(stepsArg);
const fail = (m) => {
  console.error(`rl-export: ${m}; models/mempo-tiny is left as it was`);
  process.exit(3);
};
if (!run || !out || !from || !pagesAfterFile || !Number.isInteger(steps) || steps < 1) {
  console.error('usage: node training/rl-export.mjs RUN_DIR STEPS FROM OUT_DIR PAGES_BEFORE_JSON PAGES_AFTER_JSON');
  process.exit(2);
}
const ckpt = join(run, 'checkpoints', `step-${steps}`);
const metricsFile = join(run, 'metrics.jsonl');
if (!existsSync(join(ckpt, 'model.onnx')) || !existsSync(metricsFile)) fail(`${ckpt} has no model.onnx or ${metricsFile} is missing: the run did not finish`);
const rows = readFileSync(metricsFile, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
const evals = rows.filter((r) => r.eval && typeof r.eval.em === 'number');
const first = evals.find((r) => r.step === 0);
const last = evals.find((r) => r.step === steps);
if (!first || !last) fail(`${metricsFile} has no greedy dev check at step 0 and at step ${steps}`);
if (last.eval.em < first.eval.em - MAX_DROP) fail(`the greedy dev check fell from ${first.eval.em} at step 0 to ${last.eval.em} at step ${steps} (more than ${MAX_DROP})`);
const pagesEm = (file) => {
  let em;
  try {
    em = JSON.parse(readFileSync(file, 'utf8')).em;
  } catch (e) {
    fail(`${file}: cannot read it (${e.code ?? e.message})`);
  }
  if (typeof em !== 'number') fail(`${file} has no "em" (the JSON of \`mempo eval --json\`)`);
  return em;
};
const [pagesBefore, pagesAfter] = [pagesEm(pagesBeforeFile), pagesEm(pagesAfterFile)];
if (pagesAfter < pagesBefore - MAX_DROP) fail(`the greedy EM on dev page questions fell from ${pagesBefore} (${from}) to ${pagesAfter} at step ${steps} (more than ${MAX_DROP})`);

for (const f of FILES) copyFileSync(join(ckpt, f), join(out, f));
const cfgFile = join(out, 'config.json');
const cfg = JSON.parse(readFileSync(cfgFile, 'utf8'));
const trainer = JSON.parse(readFileSync(join(ckpt, 'trainer.json'), 'utf8'));
const trained = rows.filter((r) => r.step > 0);
cfg.mempo = {
  ...cfg.mempo,
  rl: {
    from, steps, seed: trainer.seed, format_score: trainer.settings?.pipeline?.reward?.formatScore ?? null,
    budget_score: trainer.settings?.pipeline?.reward?.budgetScore ?? null, metric: trainer.settings?.pipeline?.reward?.metric ?? null, format_penalty: trainer.settings?.pipeline?.advantage?.formatPenalty ?? null,
    dev_em_before: first.eval.em, dev_em_after: last.eval.em, dev_pages_em_before: pagesBefore, dev_pages_em_after: pagesAfter,
    train_minutes: Number((trained.reduce((a, r) => a + (r.wallMs?.total ?? 0), 0) / 60000).toFixed(1)),
  },
};
writeFileSync(cfgFile, `${JSON.stringify(cfg, null, 2)}\n`);
const files = {};
for (const n of readdirSync(out).filter((n) => n !== 'manifest.json').sort()) {
  const buf = readFileSync(join(out, n));
  files[n] = { sha256: createHash('sha256').update(buf).digest('hex'), bytes: buf.length };
}
writeFileSync(join(out, 'manifest.json.tmp'), `${JSON.stringify({ name: 'mempo-tiny', files }, null, 2)}\n`);
renameSync(join(out, 'manifest.json.tmp'), join(out, 'manifest.json'));
console.error(`rl-export: ${ckpt} -> ${out} (greedy dev check ${first.eval.em} -> ${last.eval.em}, dev page questions ${pagesBefore} -> ${pagesAfter})`);
