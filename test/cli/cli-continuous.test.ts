/**
 * `mempo rollout --schedule continuous` through the CLI: run.json records the schedule, the same
 * seed writes the same batch.jsonl, `--resume` of a cut file ends with every group once in
 * question order (the groups it redid are valid records; docs/rollout.md, "Schedules": not the
 * uninterrupted run's bytes), and resuming with another schedule is refused naming it.
 */
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { questionsDir, runCli } from './run-cli';

const FOUR = [
  { id: 'c1', question: 'In which country is Mamek?', golds: ['Thersekle'] },
  { id: 'c2', question: 'Who published The Hollow Winter?', golds: ['Faithhe Works'] },
  { id: 'c3', question: 'Who founded Ostrel?', golds: ['Ada Venn'] },
  { id: 'c4', question: 'Where was Ada Venn born?', golds: ['Mamek'] },
];
const { dir, questions } = questionsDir('mempo-cli-continuous-', FOUR);
const SMALL = ['--questions', questions, '-n', '2', '--max-round-tokens', '24', '--max-turns', '3', '--threads', '1', '--questions-per-batch', '2', '--max-generate-batch', '4', '--schedule', 'continuous'];
const run = (out: string, ...more: string[]) => runCli(['rollout', '--out', out, ...SMALL, '--quiet', ...more]);
const keys = (text: string) => text.split('\n').filter(Boolean).map((l) => { const r = JSON.parse(l) as { uid: string; sample: number }; return `${r.uid}/${r.sample}`; });

describe('mempo rollout --schedule continuous', () => {
  let full = '';
  beforeAll(async () => {
    const r = await run(join(dir, 'a'));
    expect(r.code).toBe(0);
    full = readFileSync(join(dir, 'a', 'batch.jsonl'), 'utf8');
  });

  test('records the schedule in run.json and writes every group once, in question order; the same seed writes the same file', async () => {
    expect(keys(full)).toEqual(['c1/0', 'c1/1', 'c2/0', 'c2/1', 'c3/0', 'c3/1', 'c4/0', 'c4/1']);
    expect(readFileSync(join(dir, 'a', 'run.json'), 'utf8')).toContain('"schedule": "continuous"');
    const r = await run(join(dir, 'b'));
    expect(r.code).toBe(0);
    expect(readFileSync(join(dir, 'b', 'batch.jsonl'), 'utf8')).toBe(full);
  });

  test('--resume of a cut file keeps the complete groups and ends with every group once', async () => {
    const out = join(dir, 'cut');
    cpSync(join(dir, 'a'), out, { recursive: true });
    const lines = full.split('\n').filter(Boolean);
    writeFileSync(join(out, 'batch.jsonl'), `${lines.slice(0, 3).join('\n')}\n`);
    const r = await run(out, '--resume');
    expect(r.code).toBe(0);
    const text = readFileSync(join(out, 'batch.jsonl'), 'utf8');
    expect(keys(text)).toEqual(keys(full));
    expect(text.split('\n').slice(0, 2)).toEqual(lines.slice(0, 2)); // c1's group, kept as it was
  });

  test('--resume with the other schedule is refused naming it', async () => {
    const out = join(dir, 'other');
    cpSync(join(dir, 'a'), out, { recursive: true });
    const r = await runCli(['rollout', '--out', out, ...SMALL.slice(0, -2), '--resume', '--quiet']);
    expect(r.code).toBe(1);
    expect(r.err).toContain('options.rollout.schedule: "continuous" → "batch"');
    expect(readFileSync(join(out, 'batch.jsonl'), 'utf8')).toBe(full);
  });
});
