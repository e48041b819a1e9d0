/**
 * training/train.sh's guard: a stage whose dev check shows that it never learnt to copy names
 * (greedy == oracle on no `memory` round) stops the chain before the next stage builds on it and
 * before models/mempo-tiny is replaced. The real script runs in a scratch tree with its own
 * training/out and models/mempo-tiny, and stops before anything trains.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(__dirname, '..', '..');
const shipped = JSON.stringify({ mempo: { dev_round_exact_match: { memory: 0.517 } } });

function scratch(stages: Record<string, number>): string {
  const dir = mkdtempSync(join(tmpdir(), 'mempo-train-sh-'));
  for (const d of ['training', 'models/mempo-tiny', 'dist/cli', 'dist-tools/tools/world']) mkdirSync(join(dir, d), { recursive: true });
  copyFileSync(join(ROOT, 'training', 'train.sh'), join(dir, 'training', 'train.sh'));
  // built outputs present, so the script does not build
  writeFileSync(join(dir, 'dist/cli/main.js'), '');
  writeFileSync(join(dir, 'dist-tools/tools/world/cli.js'), '');
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(ROOT, 'models/mempo-tiny', f), join(dir, 'models/mempo-tiny', f));
  writeFileSync(join(dir, 'models/mempo-tiny/config.json'), shipped);
  for (const [stage, memory] of Object.entries(stages)) {
    mkdirSync(join(dir, 'training/out', stage), { recursive: true });
    writeFileSync(join(dir, 'training/out', stage, 'config.json'), JSON.stringify({ mempo: { dev_round_exact_match: { memory } } }));
  }
  return dir;
}

function trainSh(dir: string, stages: string) {
  const r = spawnSync('bash', [join(dir, 'training', 'train.sh')], { env: { ...process.env, STAGES: stages }, encoding: 'utf8' });
  return { code: r.status, err: r.stderr };
}

test('a stage 1 that scores 0 on its dev check stops stage 2 before it starts', () => {
  const dir = scratch({ stage1: 0 });
  const r = trainSh(dir, 'stage2');
  expect(r.code).toBe(3);
  expect(r.err).toContain('training/out/stage1/config.json: dev per-round check (memory) 0 < 0.3');
  expect(r.err).toContain('did not learn to copy names');
  expect(existsSync(join(dir, 'training/out/stage2'))).toBe(false);
  expect(readFileSync(join(dir, 'models/mempo-tiny/config.json'), 'utf8')).toBe(shipped);
}, 30_000);

test('the repair needs both earlier stages: a missing stage 2 is named, and no rollout starts', () => {
  const dir = scratch({ stage1: 0.52 });
  const r = trainSh(dir, 'repair');
  expect(r.code).toBe(3);
  expect(r.err).toContain('training/out/stage2/config.json: cannot read it (ENOENT): run that stage first');
  expect(existsSync(join(dir, 'training/out/repair-questions.jsonl'))).toBe(false);
  expect(readFileSync(join(dir, 'models/mempo-tiny/config.json'), 'utf8')).toBe(shipped);
}, 30_000);

test('an unknown stage is refused', () => {
  const r = trainSh(scratch({}), 'stage3');
  expect(r.code).toBe(2);
  expect(r.err).toContain('unknown stage stage3');
}, 30_000);

/** train.sh in a scratch tree whose python3 has torch and "trains" a stage that passes its dev check, logging its arguments. */
function fakeTrain(env: NodeJS.ProcessEnv, stages: Record<string, number> = {}) {
  return fakeTrainIn(scratch(stages), env);
}

function fakeTrainIn(dir: string, env: NodeJS.ProcessEnv) {
  mkdirSync(join(dir, 'bin'), { recursive: true });
  const log = join(dir, 'args.log');
  writeFileSync(join(dir, 'bin', 'python3'), ['#!/bin/sh', '[ "$1" = "-c" ] && exit 0', `echo "$*" >> ${JSON.stringify(log)}`,
    // training/interpolate.py A B LAMBDA OUT (test/python/test_training_interpolate.py tests it): OUT is B's files and a marker
    '[ "$1" = training/interpolate.py ] && mkdir "$5" && cp "$3"/* "$5"/ && echo "$2 $3 $4" > "$5/averaged" && exit 0',
    'while [ $# -gt 0 ]; do [ "$1" = "--export-dir" ] && mkdir -p "$2" && echo "{\\"mempo\\":{\\"dev_round_exact_match\\":{\\"memory\\":0.5}},\\"dir\\":\\"$2\\"}" > "$2/config.json"; shift; done', ''].join('\n'), { mode: 0o755 });
  const e: NodeJS.ProcessEnv = { ...process.env, ...env, PATH: `${join(dir, 'bin')}:${process.env.PATH ?? ''}` };
  for (const k of ['PAGE_QUESTIONS', 'STAGE1_STEPS', 'PAGES1_STEPS']) if (!(k in env)) delete e[k];
  const r = spawnSync('bash', [join(dir, 'training', 'train.sh')], { env: e, encoding: 'utf8' });
  return { code: r.status, err: r.stderr, args: existsSync(log) ? readFileSync(log, 'utf8').trimEnd().split('\n') : [] };
}

test('the search-only stages take no page questions; the page stages start from the search-only repair and take PAGE_QUESTIONS (default 200)', () => {
  const stages = 'stage1 stage2 pages1 pages2';
  const r = fakeTrain({ STAGES: stages, PAGE_QUESTIONS: '300' }, { repair: 0.5 });
  expect([r.code, r.err.includes('train.sh: pages2')]).toEqual([0, true]);
  expect(r.args).toEqual([
    'training/train.py --steps 7000 --resume --export-dir training/out/stage1',
    'training/train.py --init training/out/stage1 --steps 1000 --resume --lr 3e-4 --copy-warmup 0 --skip-data --mix probes-full ' +
      '--distill 5 --aux-weight 0 --run-dir training/out/run-stage2 --export-dir training/out/stage2',
    'training/train.py --init training/out/repair --steps 4500 --resume --lr 3e-4 --copy-warmup 0 --skip-data --mix bundles-pages-url ' +
      '--page-questions 300 --run-dir training/out/run-pages1a --export-dir training/out/pages1a',
    'training/train.py --init training/out/pages1a --steps 1500 --resume --lr 1.5e-4 --copy-warmup 0 --skip-data --mix bundles-pages-stream ' +
      '--page-questions 300 --run-dir training/out/run-pages1 --export-dir training/out/pages1',
    'training/train.py --init training/out/pages1 --steps 1000 --resume --lr 3e-4 --copy-warmup 0 --skip-data --mix probes-full-chains ' +
      '--distill 5 --aux-weight 0 --page-questions 300 --run-dir training/out/run-pages2 --export-dir training/out/pages2',
  ]);
  const byDefault = fakeTrain({ STAGES: stages }, { repair: 0.5 });
  expect(byDefault.args).toEqual(r.args.map((a) => a.replace(' --page-questions 300', ' --page-questions 200')));
}, 30_000);

test('PAGE_QUESTIONS=0 is the search-only recipe: a page stage is refused before it trains', () => {
  const r = fakeTrain({ STAGES: 'pages1', PAGE_QUESTIONS: '0' }, { repair: 0.5 });
  expect(r.code).toBe(2);
  expect(r.err).toContain('pages1 needs page questions');
  expect(r.args).toEqual([]);
}, 30_000);

test('pages1 needs the search-only model it starts from: a missing repair is named', () => {
  const r = fakeTrain({ STAGES: 'pages1' });
  expect(r.code).toBe(3);
  expect(r.err).toContain('training/out/repair/config.json: cannot read it (ENOENT): run that stage first');
  expect(r.args).toEqual([]);
}, 30_000);

test('STAGE1_STEPS and PAGES1_STEPS set the two first stages alone', () => {
  const r = fakeTrain({ STAGES: 'stage1 stage2 pages1 pages2', STAGE1_STEPS: '9000', PAGES1_STEPS: '600' }, { repair: 0.5 });
  expect(r.code).toBe(0);
  expect(r.args.map((a) => a.match(/ --steps (\d+) /)?.[1])).toEqual(['9000', '1000', '600', '1500', '1000']);
  expect(r.args.every((a) => a.includes(' --resume '))).toBe(true);
}, 30_000);

test('the repairs: bundles under `memory` in both worlds; pages-repair adds 3-hop chains under `full`, and only the last stage replaces the model', () => {
  const dir = scratch({ stage1: 0.5, stage2: 0.5, pages1: 0.5, pages2: 0.5 });
  // a mempo CLI that logs its arguments, and a rollout-samples that writes one line naming its batch
  const rolls = join(dir, 'rolls.log');
  writeFileSync(join(dir, 'dist/cli/main.js'), `require('fs').appendFileSync(${JSON.stringify(rolls)}, process.argv.slice(2).join(' ') + '\\n');`);
  writeFileSync(join(dir, 'dist-tools/tools/world/cli.js'),
    "const a = process.argv; require('fs').writeFileSync(a[a.indexOf('--samples-out') + 1], a[a.indexOf('--batch') + 1] + '\\n');");
  mkdirSync(join(dir, 'training'), { recursive: true });
  copyFileSync(join(ROOT, 'training', 'rollout-questions.mjs'), join(dir, 'training', 'rollout-questions.mjs'));
  mkdirSync(join(dir, 'data/world'), { recursive: true });
  copyFileSync(join(ROOT, 'data/world/train.jsonl'), join(dir, 'data/world/train.jsonl'));
  const r = fakeTrainIn(dir, { STAGES: 'repair pages-repair' });
  expect(r.code).toBe(0);
  const lines = readFileSync(rolls, 'utf8').trimEnd().split('\n').sort();
  const memory = lines.filter((l) => l.includes('--context memory'));
  const full = lines.filter((l) => l.includes('--context full'));
  expect([memory.length, full.length]).toEqual([4, 2]);
  for (const l of [...memory, ...full]) expect(l).toMatch(/^rollout .* --limit 120 -n 1 .* --temperature 0 --threads 1 --quiet /);
  expect(memory.filter((l) => l.includes(' --no-pages ')).map((l) => l.match(/--model (\S+)/)![1]).sort()).toEqual(['training/out/stage1', 'training/out/stage2']);
  const paged = memory.filter((l) => l.includes(' --pages data/world/pages.jsonl '));
  expect(paged.map((l) => l.match(/--model (\S+)/)![1]).sort()).toEqual(['training/out/pages1', 'training/out/pages2']);
  for (const l of full) expect(l).toContain('--questions training/out/chain-questions.jsonl');
  expect(full.map((l) => l.match(/--model (\S+) .*--offset (\d+)/)!.slice(1).join(' ')).sort()).toEqual(['training/out/pages1 0', 'training/out/pages2 120']);
  // 240 chains of 3 hops and one objective, from the train split
  const chains = readFileSync(join(dir, 'training/out/chain-questions.jsonl'), 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as { hops: number; objectives: number; split: string });
  expect(chains).toHaveLength(240);
  expect(chains.every((q) => q.hops === 3 && q.objectives === 1 && q.split === 'train')).toBe(true);
  // each repair trains on its own rollouts: 2 batches for the search-only one, 4 for pages-repair
  expect(readFileSync(join(dir, 'training/out/repair-samples.jsonl'), 'utf8').trimEnd().split('\n')).toEqual(
    ['training/out/rollouts-stage1/batch.jsonl', 'training/out/rollouts-stage2/batch.jsonl']);
  expect(readFileSync(join(dir, 'training/out/pages-repair-samples.jsonl'), 'utf8').trimEnd().split('\n')).toEqual([
    'training/out/rollouts-pages1/batch.jsonl', 'training/out/rollouts-pages2/batch.jsonl',
    'training/out/rollouts-full-pages1/batch.jsonl', 'training/out/rollouts-full-pages2/batch.jsonl']);
  const train = r.args.filter((a) => a.includes('--mix repair'));
  expect(train.map((a) => a.match(/--rollout-teacher (\S+)/)![1])).toEqual(['training/out/stage1', 'training/out/pages1']);
  expect(train[1]).toContain('--page-questions 200');
  // neither repair is the recipe's last stage (rl is): the model is as it was
  expect(readFileSync(join(dir, 'models/mempo-tiny/config.json'), 'utf8')).toBe(shipped);
  // the search-only repair replaces it when PAGE_QUESTIONS=0 makes it the last stage
  expect(fakeTrainIn(dir, { STAGES: 'repair' }).code).toBe(0);
  expect(readFileSync(join(dir, 'models/mempo-tiny/config.json'), 'utf8')).toBe(shipped);
  expect(fakeTrainIn(dir, { STAGES: 'repair', PAGE_QUESTIONS: '0' }).code).toBe(0);
  expect(JSON.parse(readFileSync(join(dir, 'models/mempo-tiny/config.json'), 'utf8')).dir).toBe('training/out/repair');
}, 60_000);

/**
 * A scratch tree for the rl stage: a passing pages-repair, and a `mempo` CLI that logs its arguments and
 * "trains": it writes the checkpoint of the last step and a metrics.jsonl whose greedy dev check goes
 * from 0.86 at step 0 to `after` (each --resume run logs again and rewrites them); its `eval --json` prints
 * EM 0.26 for pages-repair and `pagesAfter` for any other model.
 */
const pageEval = (model: string, m: string) => `eval --model ${model} --corpus data/world/corpus-pages.jsonl --pages data/world/pages.jsonl ` +
  `--page-chunk-chars 1000 --split dev-pages --limit 50 --max-turns 12 --threads 2 --quiet --force --json --out training/out/rl-pages-${m}\n`;
const rlTrain = (metric: string, steps: number) => `train --model training/out/pages-repair --out training/out/run-rl-${metric} --seed 1 --shuffle ` +
  `--steps ${steps} --questions-per-step 8 -n 8 --max-turns 12 --eval-every 12 --eval-questions 50 --format-score 0 --budget-score none --format-penalty 1 --metric ${metric} --threads 2 --quiet\n`;

function rlScratch(after: number, pagesAfter = 0.3): string {
  const dir = scratch({ 'pages-repair': 0.5 });
  copyFileSync(join(ROOT, 'training', 'rl-export.mjs'), join(dir, 'training', 'rl-export.mjs'));
  writeFileSync(join(dir, 'dist/cli/main.js'), `
const fs = require('fs'), path = require('path');
const a = process.argv.slice(2);
fs.appendFileSync(${JSON.stringify(join(dir, 'mempo.log'))}, a.join(' ') + '\\n');
if (a[0] === 'eval') {
  process.stdout.write(JSON.stringify({ questions: 50, em: a[a.indexOf('--model') + 1].endsWith('pages-repair') ? 0.26 : ${pagesAfter} }));
  process.exit(0);
}
const out = a[a.indexOf('--out') + 1], steps = Number(a[a.indexOf('--steps') + 1]), seed = Number(a[a.indexOf('--seed') + 1]);
const ck = path.join(out, 'checkpoints', 'step-' + steps);
fs.mkdirSync(ck, { recursive: true });
for (const f of ['model.onnx', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json', 'learner.safetensors']) fs.writeFileSync(path.join(ck, f), 'rl ' + f);
fs.writeFileSync(path.join(ck, 'config.json'), JSON.stringify({ mempo: { num_parameters: 3 } }));
const flag = (f) => a[a.indexOf(f) + 1];
const reward = { formatScore: Number(flag('--format-score')), budgetScore: flag('--budget-score') === 'none' ? null : Number(flag('--budget-score')), metric: flag('--metric') };
const advantage = { formatPenalty: Number(flag('--format-penalty')) };
fs.writeFileSync(path.join(ck, 'trainer.json'), JSON.stringify({ step: steps, seed, settings: { pipeline: { reward, advantage } } }));
const rows = [{ step: 0, eval: { em: 0.86 } }, { step: steps, eval: { em: ${after} }, wallMs: { total: 90000 } }];
fs.writeFileSync(path.join(out, 'metrics.jsonl'), rows.map((r) => JSON.stringify(r)).join('\\n') + '\\n');
`);
  return dir;
}

test('rl: `mempo train` from pages-repair with the MemPO arm settings; its last checkpoint, model files only, replaces the model', () => {
  const dir = rlScratch(0.84);
  const r = fakeTrainIn(dir, { STAGES: 'rl', RL_STEPS: '4', RL_METRICS: 'f1' });
  expect([r.code, r.err]).toEqual([0, expect.stringContaining('greedy dev check 0.86 -> 0.84, dev page questions 0.26 -> 0.3')]);
  expect(readFileSync(join(dir, 'mempo.log'), 'utf8')).toBe(pageEval('training/out/pages-repair', 'before') + rlTrain('f1', 4) +
    pageEval('training/out/run-rl-f1/checkpoints/step-4', 'after-f1'));
  expect(r.args.filter((a) => a.includes('interpolate'))).toEqual([]);
  const model = join(dir, 'models/mempo-tiny');
  expect(readFileSync(join(model, 'model.onnx'), 'utf8')).toBe('rl model.onnx');
  expect(existsSync(join(model, 'learner.safetensors'))).toBe(false);
  const cfg = JSON.parse(readFileSync(join(model, 'config.json'), 'utf8'));
  expect(cfg.mempo).toEqual({ num_parameters: 3, rl: { from: 'training/out/pages-repair', steps: 4, seed: 1, format_score: 0, budget_score: null, metric: 'f1', format_penalty: 1, dev_em_before: 0.86, dev_em_after: 0.84, dev_pages_em_before: 0.26, dev_pages_em_after: 0.3, train_minutes: 1.5 } });
  const man = JSON.parse(readFileSync(join(model, 'manifest.json'), 'utf8'));
  expect(Object.keys(man.files)).toEqual(['config.json', 'generation_config.json', 'model.onnx', 'tokenizer.json', 'tokenizer_config.json']);
  // `printf 'rl model.onnx' | sha256sum`
  expect(man.files['model.onnx']).toEqual({ sha256: 'b569fdbe29932195fb5ef9f569815a117a9963724a7db623ab85dcc7b1f568da', bytes: 13 });
  // run again with more steps: the run continues (--resume), only --steps changed
  const again = fakeTrainIn(dir, { STAGES: 'rl', RL_STEPS: '6', RL_SEED: '1', RL_METRICS: 'f1' });
  expect(again.code).toBe(0);
  expect(readFileSync(join(dir, 'mempo.log'), 'utf8').trimEnd().split('\n')[4]).toMatch(/^train .* --steps 6 .* --quiet --resume$/);
  // RL_FORMAT_SCORE, RL_BUDGET_SCORE, RL_FORMAT_PENALTY and RL_METRICS reach `mempo train`, and its record
  const env = rlScratch(0.84);
  expect(fakeTrainIn(env, { STAGES: 'rl', RL_STEPS: '4', RL_FORMAT_SCORE: '-1', RL_BUDGET_SCORE: '0', RL_FORMAT_PENALTY: '0.5', RL_METRICS: 'em' }).code).toBe(0);
  expect(readFileSync(join(env, 'mempo.log'), 'utf8').split('\n')[1]).toMatch(/ --format-score -1 --budget-score 0 --format-penalty 0\.5 --metric em --threads 2 --quiet$/);
  expect(JSON.parse(readFileSync(join(env, 'models/mempo-tiny/config.json'), 'utf8')).mempo.rl).toMatchObject({ steps: 4, format_score: -1, budget_score: 0, metric: 'em', format_penalty: 0.5 });
}, 30_000);

test('rl: by default (RL_METRICS "f1 item-f1") one run per metric, each exported and checked, and their average installed', () => {
  const dir = rlScratch(0.84);
  const r = fakeTrainIn(dir, { STAGES: 'rl', RL_STEPS: '4' });
  expect([r.code, r.err]).toEqual([0, expect.stringContaining('rl-export: training/out/run-rl-item-f1/checkpoints/step-4 -> training/out/rl-item-f1')]);
  expect(readFileSync(join(dir, 'mempo.log'), 'utf8')).toBe(pageEval('training/out/pages-repair', 'before') +
    rlTrain('f1', 4) + pageEval('training/out/run-rl-f1/checkpoints/step-4', 'after-f1') +
    rlTrain('item-f1', 4) + pageEval('training/out/run-rl-item-f1/checkpoints/step-4', 'after-item-f1'));
  expect(r.args.filter((a) => a.includes('interpolate'))).toEqual(['training/interpolate.py training/out/rl-f1 training/out/rl-item-f1 0.5 training/out/rl-avg2']);
  const model = join(dir, 'models/mempo-tiny');
  expect(readFileSync(join(model, 'averaged'), 'utf8')).toBe('training/out/rl-f1 training/out/rl-item-f1 0.5\n');
  for (const m of ['f1', 'item-f1']) {
    expect(JSON.parse(readFileSync(join(dir, `training/out/rl-${m}/config.json`), 'utf8')).mempo.rl).toMatchObject({ metric: m, steps: 4 });
  }
}, 30_000);

test('rl: an empty RL_METRICS is refused before any run', () => {
  const dir = rlScratch(0.84);
  expect(fakeTrainIn(dir, { STAGES: 'rl', RL_METRICS: ' ' })).toMatchObject({ code: 2, err: expect.stringContaining('RL_METRICS names no outcome metric') });
  expect(existsSync(join(dir, 'mempo.log'))).toBe(false);
}, 30_000);

test('rl: a run whose greedy dev check, or its EM on dev page questions, fell by more than 5 of 50 questions does not replace the model', () => {
  const dir = rlScratch(0.74);
  const r = fakeTrainIn(dir, { STAGES: 'rl', RL_STEPS: '4' });
  expect(r.code).toBe(3);
  expect(r.err).toContain('the greedy dev check fell from 0.86 at step 0 to 0.74 at step 4 (more than 0.1)');
  expect(readFileSync(join(dir, 'models/mempo-tiny/config.json'), 'utf8')).toBe(shipped);
  // the old kinds held (0.84) while the page tool was lost: refused too
  const lost = rlScratch(0.84, 0.04);
  const l = fakeTrainIn(lost, { STAGES: 'rl', RL_STEPS: '4' });
  expect([l.code, l.err]).toEqual([3, expect.stringContaining('the greedy EM on dev page questions fell from 0.26 (training/out/pages-repair) to 0.04 at step 4 (more than 0.1)')]);
  expect(readFileSync(join(lost, 'models/mempo-tiny/config.json'), 'utf8')).toBe(shipped);
  expect(fakeTrainIn(dir, { STAGES: 'rl', PAGE_QUESTIONS: '0' })).toMatchObject({ code: 2, err: expect.stringContaining('rl needs page questions') });
}, 30_000);
