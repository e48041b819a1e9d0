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

test('PAGE_QUESTIONS reaches train.py as --page-questions in every stage; unset, the commands are as before', () => {
  const run = (pageQuestions: string | undefined): string[] => {
    const dir = scratch({});
    // a python3 that has torch and "trains" a stage that passes its dev check, logging its arguments
    mkdirSync(join(dir, 'bin'));
    const log = join(dir, 'args.log');
    writeFileSync(join(dir, 'bin', 'python3'), [
      '#!/bin/sh',
      '[ "$1" = "-c" ] && exit 0',
      `echo "$*" >> ${JSON.stringify(log)}`,
      'while [ $# -gt 0 ]; do [ "$1" = "--export-dir" ] && mkdir -p "$2" && echo \'{"mempo":{"dev_round_exact_match":{"memory":0.5}}}\' > "$2/config.json"; shift; done',
      '',
    ].join('\n'), { mode: 0o755 });
    const env: NodeJS.ProcessEnv = { ...process.env, STAGES: 'stage1 stage2', PATH: `${join(dir, 'bin')}:${process.env.PATH ?? ''}` };
    if (pageQuestions === undefined) delete env.PAGE_QUESTIONS;
    else env.PAGE_QUESTIONS = pageQuestions;
    const r = spawnSync('bash', [join(dir, 'training', 'train.sh')], { env, encoding: 'utf8' });
    expect([r.status, r.stderr.includes('train.sh: stage2')]).toEqual([0, true]);
    return readFileSync(log, 'utf8').trimEnd().split('\n');
  };
  const withPages = run('300');
  expect(withPages).toHaveLength(2);
  for (const args of withPages) expect(args).toMatch(/^training\/train\.py .* --page-questions 300 /);
  const plain = run(undefined);
  expect(plain).toEqual(withPages.map((a) => a.replace(' --page-questions 300', '')));
  expect(plain[0]).toBe('training/train.py --steps 7000 --resume --export-dir training/out/stage1');
  // STAGE1_STEPS sets stage 1's length; every stage resumes from its own checkpoint when one is there
  expect(withPages.every((a) => a.includes(' --resume '))).toBe(true);
}, 30_000);

test('STAGE1_STEPS sets stage 1 alone', () => {
  const dir = scratch({});
  mkdirSync(join(dir, 'bin'));
  const log = join(dir, 'args.log');
  writeFileSync(join(dir, 'bin', 'python3'), ['#!/bin/sh', '[ "$1" = "-c" ] && exit 0', `echo "$*" >> ${JSON.stringify(log)}`,
    'while [ $# -gt 0 ]; do [ "$1" = "--export-dir" ] && mkdir -p "$2" && echo \'{"mempo":{"dev_round_exact_match":{"memory":0.5}}}\' > "$2/config.json"; shift; done', ''].join('\n'), { mode: 0o755 });
  const r = spawnSync('bash', [join(dir, 'training', 'train.sh')], {
    env: { ...process.env, STAGES: 'stage1 stage2', STAGE1_STEPS: '9000', PATH: `${join(dir, 'bin')}:${process.env.PATH ?? ''}` }, encoding: 'utf8',
  });
  expect(r.status).toBe(0);
  const args = readFileSync(log, 'utf8').trimEnd().split('\n');
  expect(args[0]).toMatch(/^training\/train\.py --steps 9000 --resume /);
  expect(args[1]).toMatch(/ --steps 1000 --resume /);
}, 30_000);
