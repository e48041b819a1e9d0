/**
 * `mempo rollout --resume` and `--force` against hostile run directories: a line of another run,
 * a broken or blank middle line, a missing or corrupt run.json, a group every sample of which
 * failed on the retriever, temp files of a killed run, outputs of the run a --force replaces.
 */
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { questionsDir, runCli } from './run-cli';

const { dir, questions } = questionsDir('mempo-cli-resume-');
const SMALL = ['--questions', questions, '-n', '2', '--max-round-tokens', '24', '--max-turns', '2', '--threads', '1', '--questions-per-batch', '1'];
const base = join(dir, 'base');
let full = '';
let lines: string[] = [];

beforeAll(async () => {
  const r = await runCli(['rollout', '--out', base, ...SMALL, '--quiet']);
  expect(r.code).toBe(0);
  full = readFileSync(join(base, 'batch.jsonl'), 'utf8');
  lines = full.split('\n').filter(Boolean);
  expect(lines).toHaveLength(4);
});

/** A copy of the finished run with batch.jsonl replaced by `text`. */
function copyWith(name: string, text: string): { out: string; file: string } {
  const out = join(dir, name);
  cpSync(base, out, { recursive: true });
  const file = join(out, 'batch.jsonl');
  writeFileSync(file, text);
  return { out, file };
}
const resume = (out: string, ...more: string[]) => runCli(['rollout', '--out', out, ...SMALL, '--resume', '--quiet', ...more]);

describe('mempo rollout --resume', () => {
  test("a line of another run's question is refused naming the line; nothing else is done", async () => {
    const other = JSON.stringify({ ...JSON.parse(lines[0]!), uid: 'dev-17', question: 'Where is Vord?' });
    const { out, file } = copyWith('foreign', `${full}${other}\n`);
    const r = await resume(out);
    expect(r.code).toBe(1);
    expect(r.err).toBe(`error: ${file}:5: question "dev-17" is not one of this run's questions; the line is from another run\n`);
    expect(readFileSync(file, 'utf8')).toBe(`${full}${other}\n`);
  });

  test('a batch.jsonl without a run.json is refused', async () => {
    const { out, file } = copyWith('no-run-json', full);
    rmSync(join(out, 'run.json'));
    const r = await resume(out);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`error: --resume: ${file} has no ${join(out, 'run.json')} beside it`);
  });

  test('a corrupt run.json is named', async () => {
    const { out } = copyWith('bad-run-json', full);
    writeFileSync(join(out, 'run.json'), '{"settings": {,}');
    const r = await resume(out);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`error: ${join(out, 'run.json')}: not valid JSON (`);
  });

  test('a valid-JSON but incomplete middle line is refused before any work, naming the line and the field', async () => {
    const broken = [...lines];
    broken[1] = '{"uid":"a","sample":1}';
    const { out, file } = copyWith('incomplete-line', broken.map((l) => `${l}\n`).join(''));
    const r = await resume(out);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(new RegExp(`^error: ${file.replace(/[.\\/]/g, '\\$&')}:2: field "question": .*; not a mempo batch line, cannot resume from this file\\n$`));
  });

  test('a blank middle line: the resumed file is byte-identical to the uninterrupted one', async () => {
    const { out, file } = copyWith('blank-line', `${lines[0]}\n${lines[1]}\n\n${lines[2]}\n${lines[3]}\n`);
    const r = await resume(out);
    expect(r.code).toBe(0);
    expect(readFileSync(file, 'utf8')).toBe(full);
  });

  test("a run.json of an older mempo, without the options added since, resumes saying which it could not check; a recorded option that differs is still refused", async () => {
    const { out, file } = copyWith('older-run-json', `${lines[0]}\n${lines[1]}\n`);
    const runJson = join(out, 'run.json');
    const recorded = JSON.parse(readFileSync(runJson, 'utf8')) as { settings: { options: { rollout: Record<string, unknown>; tool: Record<string, unknown> } } };
    delete recorded.settings.options.rollout['schedule'];
    delete recorded.settings.options.tool['access'];
    writeFileSync(runJson, JSON.stringify(recorded));
    const r = await runCli(['rollout', '--out', out, ...SMALL, '--resume']);
    expect(r.code).toBe(0);
    expect(r.err).toContain(`mempo rollout: ${runJson} does not record options.rollout.schedule, options.tool.access (options its mempo did not have): not checked on --resume`);
    expect(readFileSync(file, 'utf8')).toBe(full);
    recorded.settings.options.rollout['maxTurns'] = 3;
    writeFileSync(runJson, JSON.stringify(recorded));
    const refused = await resume(out);
    expect(refused.code).toBe(1);
    expect(refused.err).toContain('options.rollout.maxTurns: 3 → 2');
  });

  test('an incomplete first group: redone, and the file comes back in question order, byte-identical', async () => {
    const { out, file } = copyWith('middle-group', `${lines[0]}\n${lines[2]}\n${lines[3]}\n`);
    const r = await resume(out, '--json');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out).thisRun).toMatchObject({ trajectories: 2, batches: 1, skippedBatches: 1 });
    expect(readFileSync(file, 'utf8')).toBe(full);
  });

  test('a group every sample of which failed on the retriever is redone (the tool may be back)', async () => {
    const failed = lines.slice(0, 2).map((l) => JSON.stringify({ ...JSON.parse(l), error: 'The retrieval server at http://127.0.0.1:9/retrieve did not answer', doneReason: 'tool-error', excluded: true, score: null }));
    const { out, file } = copyWith('tool-failed', [...failed, lines[2], lines[3]].map((l) => `${l}\n`).join(''));
    const r = await runCli(['rollout', '--out', out, ...SMALL, '--resume']);
    expect(r.code).toBe(0);
    expect(r.err).toContain('1 groups whose every sample failed (tool or server) redone');
    expect(readFileSync(file, 'utf8')).toBe(full);
  });

  test('temp files a killed run left are removed by the next run', async () => {
    const { out } = copyWith('stale-tmp', full);
    for (const f of ['.summary.json.999999999.tmp', '.report.html.999999998.tmp']) writeFileSync(join(out, f), '{"half');
    const r = await resume(out);
    expect(r.code).toBe(0);
    expect(existsSync(join(out, '.summary.json.999999999.tmp'))).toBe(false);
    expect(existsSync(join(out, '.report.html.999999998.tmp'))).toBe(false);
  });

  test('--force removes the summary, report and eval table of the run it replaces at its start', async () => {
    const { out } = copyWith('forced', full);
    writeFileSync(join(out, 'eval.json'), '{"stale":true}\n');
    // A forced run without a report: the old report.html must not stay beside the new batch.
    const r = await runCli(['rollout', '--out', out, ...SMALL, '--force', '--quiet', '--no-report', '--max-turns', '1']);
    expect(r.code).toBe(0);
    expect(existsSync(join(out, 'eval.json'))).toBe(false);
    expect(existsSync(join(out, 'report.html'))).toBe(false);
    expect(JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')).trajectories).toBe(4);
  });
});

test('a fresh directory is unaffected: --resume without batch.jsonl starts the run', async () => {
  const out = mkdtempSync(join(tmpdir(), 'mempo-cli-fresh-'));
  const r = await runCli(['rollout', '--out', out, ...SMALL, '--resume', '--quiet', '--max-turns', '1']);
  expect(r.code).toBe(0);
  expect(readFileSync(join(out, 'batch.jsonl'), 'utf8').split('\n').filter(Boolean)).toHaveLength(4);
});

test('a --context memory run (rounds carry their exact contextIds) resumes to the uninterrupted file', async () => {
  const out = mkdtempSync(join(tmpdir(), 'mempo-cli-memory-'));
  const args = ['rollout', '--out', out, ...SMALL, '--context', 'memory', '--quiet'];
  expect((await runCli(args)).code).toBe(0);
  const whole = readFileSync(join(out, 'batch.jsonl'), 'utf8');
  const kept = whole.split('\n').filter(Boolean);
  expect(kept.some((l) => (JSON.parse(l) as { rounds: { contextIds?: number[] }[] }).rounds.some((r) => Array.isArray(r.contextIds)))).toBe(true);
  // Drop the second question's group: --resume keeps the first and redoes the second.
  writeFileSync(join(out, 'batch.jsonl'), `${kept.slice(0, 2).join('\n')}\n`);
  expect((await runCli([...args, '--resume'])).code).toBe(0);
  expect(readFileSync(join(out, 'batch.jsonl'), 'utf8')).toBe(whole);
});
