/**
 * Export for other trainers (docs/export.md): a small rollout of the embedded model with
 * `--export verl,trl,tensors`, then `mempo export` of the finished run, each file checked
 * against batch.jsonl by test/python/check_export.py (NumPy only, no mempo).
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { questionsDir, runCli } from '../cli/run-cli';
import { EXPORT_FILES, readBatchFile, trlExport, verlExport } from '../../src/io/export';
import type { BatchRecord } from '../../src/contracts';
import { lockRunDir } from '../../src/io/run-lock';

const CHECKER = resolve(__dirname, '..', 'python', 'check_export.py');

/** The first of `python3`, `/usr/bin/python3` that imports numpy (.ci/run installs python3-numpy when neither does). */
function numpyPython(): string {
  for (const py of ['python3', '/usr/bin/python3']) {
    if (spawnSync(py, ['-c', 'import numpy'], { stdio: 'ignore' }).status === 0) return py;
  }
  throw new Error('No python3 with numpy (tried python3, /usr/bin/python3): install it, e.g. apt-get install python3-numpy');
}

function check(batch: string, pad: number, dir: string, formats = ['verl', 'tensors', 'trl'] as const) {
  const args = [CHECKER, '--batch', batch, '--pad', String(pad)];
  for (const f of formats) args.push(`--${f}`, join(dir, EXPORT_FILES[f]));
  const r = spawnSync(numpyPython(), args, { encoding: 'utf8' });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

const { dir, questions } = questionsDir('mempo-export-');
const run = join(dir, 'run');
const SMALL = ['--questions', questions, '-n', '2', '--max-round-tokens', '24', '--max-turns', '2', '--threads', '1', '--questions-per-batch', '1', '--quiet'];

beforeAll(async () => {
  const r = await runCli(['rollout', '--out', run, ...SMALL, '--export', 'verl,trl', '--export', 'tensors']);
  expect(r).toMatchObject({ code: 0, err: '' });
});

describe('mempo rollout --export', () => {
  test('writes the three files, and each matches batch.jsonl in Python without mempo', () => {
    for (const f of Object.values(EXPORT_FILES)) expect(existsSync(join(run, f))).toBe(true);
    const r = check(join(run, 'batch.jsonl'), 0, run);
    expect(r.err).toBe('');
    expect(r.out).toMatch(/^OK: verl, tensors, trl match .* \(4 rows, P=\d+, T=\d+, pad 0/);
    // The slice has prompts of different lengths (left padding) and tool observations (response_mask 0).
    const recs = readBatchFile(join(run, 'batch.jsonl')).records;
    expect(new Set(recs.map((x) => x.promptIds.length)).size).toBeGreaterThan(1);
    expect(recs.some((x) => x.responseMask.includes(0))).toBe(true);
  });

  test('a new run in the directory removes the exports of the old one', async () => {
    const other = join(dir, 'stale');
    mkdirSync(other);
    copyFileSync(join(run, EXPORT_FILES.verl), join(other, EXPORT_FILES.verl));
    const r = await runCli(['rollout', '--out', other, ...SMALL, '--limit', '1']);
    expect(r.code).toBe(0);
    expect(existsSync(join(other, EXPORT_FILES.verl))).toBe(false);
  });
});

describe('mempo export', () => {
  test('--pad-token-id pads with that id (left prompts, right responses), --to another directory', async () => {
    const to = join(dir, 'pad7');
    const r = await runCli(['export', '--from', run, '--to', to, '--format', 'verl', '--format', 'tensors,trl', '--pad-token-id', '7']);
    expect(r).toMatchObject({ code: 0, out: '' });
    expect(r.err).toContain('mempo export: 4 trajectories (pad id 7)');
    expect(check(join(run, 'batch.jsonl'), 7, to).code).toBe(0);
    // The checker fails loudly, naming the tensor, when the file does not match.
    const bad = check(join(run, 'batch.jsonl'), 0, to);
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(/^FAIL: \d+ mismatches/);
    expect(bad.err).toMatch(/verl input_ids: \d+ values differ; first at \(\d+, \d+\): 7, expected 0/);
    expect(bad.err).toContain('tensors pad_token_id');
  });

  test("without --model the run's model (run.json) gives the pad id: the same bytes as rollout --export", async () => {
    const to = join(dir, 'again');
    expect((await runCli(['export', '--from', run, '--to', to, '--format', 'verl,tensors,trl', '--quiet'])).code).toBe(0);
    for (const f of Object.values(EXPORT_FILES)) expect(readFileSync(join(to, f)).equals(readFileSync(join(run, f)))).toBe(true);
  });

  test('a changed batch.jsonl no longer matches: the checker names the field', () => {
    const lines = readFileSync(join(run, 'batch.jsonl'), 'utf8').split('\n');
    const rec = JSON.parse(lines[1]!) as BatchRecord;
    rec.advantages[0] = (rec.advantages[0] ?? 0) + 1;
    lines[1] = JSON.stringify(rec);
    const edited = join(dir, 'edited.jsonl');
    writeFileSync(edited, lines.join('\n'));
    const r = check(edited, 0, run);
    expect(r.code).toBe(1);
    expect(r.err).toContain('verl advantages: 1 values differ; first at (1, 0)');
    expect(r.err).toContain('trl advantages row 1');
  });

  test('--help lists the command and the rollout flag', async () => {
    expect((await runCli(['--help'])).out).toMatch(/^ {2}export \[options\] +write a finished batch/m);
    expect((await runCli(['rollout', '--help'])).out).toContain('--export <formats>');
    expect((await runCli(['export', '--help'])).out).toContain('--pad-token-id <n>');
  });

  test('usage and input errors', async () => {
    expect((await runCli(['export', '--from', run, '--format', 'onnx'])).code).toBe(2);
    expect((await runCli(['export', '--format', 'verl'])).code).toBe(2);
    const empty = join(dir, 'empty');
    mkdirSync(empty);
    const none = await runCli(['export', '--from', empty, '--format', 'verl']);
    expect(none).toMatchObject({ code: 2, err: `error: ${join(empty, 'batch.jsonl')} does not exist (is it a mempo rollout directory?)\n` });
    writeFileSync(join(empty, 'batch.jsonl'), `${readFileSync(join(run, 'batch.jsonl'), 'utf8').split('\n')[0]}\n{"uid": 3}\n`);
    const bad = await runCli(['export', '--from', empty, '--format', 'verl']);
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(new RegExp(`^error: ${join(empty, 'batch.jsonl')}:2: field "uid": .*; not a mempo batch line\\n$`));
  });

  it('a directory another run holds is refused naming the holder; nothing is written', async () => {
    const to = join(dir, 'held');
    const lock = lockRunDir(to, 'mempo rollout');
    try {
      const r = await runCli(['export', '--from', run, '--to', to, '--format', 'verl']);
      expect(r.code).toBe(1);
      expect(r.err).toMatch(new RegExp(`^error: ${to.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')} is in use by pid ${process.pid} \\(mempo rollout, started `));
      expect(existsSync(join(to, EXPORT_FILES.verl))).toBe(false);
    } finally {
      lock.release();
    }
    expect((await runCli(['export', '--from', run, '--to', to, '--format', 'verl', '--pad-token-id', '0', '--quiet'])).code).toBe(0);
    expect(existsSync(join(to, '.lock'))).toBe(false);
  });

  // f77a45f wrote 0 for this id in the verl (int64) and npz (int32) files and kept it in the TRL JSON.
  test('a token id that is no token of the model is refused naming the line and field; no file is written', async () => {
    const lines = readFileSync(join(run, 'batch.jsonl'), 'utf8').trim().split('\n');
    const at = (id: number, out: string) => {
      const rec = JSON.parse(lines[2]!) as BatchRecord;
      rec.responseIds[3] = id;
      const d = join(dir, out);
      mkdirSync(d);
      writeFileSync(join(d, 'batch.jsonl'), [lines[0], lines[1], JSON.stringify(rec), lines[3]].join('\n') + '\n');
      return d;
    };
    const huge = at(2 ** 40, 'huge-id');
    const r = await runCli(['export', '--from', huge, '--format', 'verl,trl,tensors', '--pad-token-id', '0']);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(new RegExp(`^error: ${join(huge, 'batch.jsonl')}:3: field "responseIds\\[3\\]": is not a token id \\(above 2\\^31 - 1\\); not a mempo batch line\\n$`));
    // An int32 id past the embedded model's vocabulary (config.json vocab_size): the run's model refuses it.
    const vocab = (JSON.parse(readFileSync(resolve(__dirname, '..', '..', 'models', 'mempo-tiny', 'config.json'), 'utf8')) as { vocab_size: number }).vocab_size;
    const past = at(vocab, 'past-vocab');
    const v = await runCli(['export', '--from', past, '--format', 'verl', '--model', resolve(__dirname, '..', '..', 'models', 'mempo-tiny')]);
    expect(v).toMatchObject({ code: 2, err: `error: ${join(past, 'batch.jsonl')}:3: responseIds[3] = ${vocab} is not a token id of the model (vocabulary ${vocab}); not a batch of this model\n` });
    for (const d of [huge, past]) for (const f of Object.values(EXPORT_FILES)) expect(existsSync(join(d, f))).toBe(false);
  });
});

describe('layouts', () => {
  const recs = () => readBatchFile(join(run, 'batch.jsonl')).records;

  test('verl: position ids count real tokens from 0; the score sits on the last response token', () => {
    const rs = recs();
    const { tensors, metadata } = verlExport(rs, 5);
    const t = Object.fromEntries(tensors);
    const P = Math.max(...rs.map((x) => x.promptIds.length));
    const T = Math.max(...rs.map((x) => x.responseIds.length));
    const r0 = rs.find((x) => x.promptIds.length < P)!;
    const b = rs.indexOf(r0);
    const row = Array.from(t['position_ids']!.data as BigInt64Array).slice(b * (P + T), (b + 1) * (P + T)).map(Number);
    const left = P - r0.promptIds.length;
    expect(row.slice(0, left + 1)).toEqual(new Array(left + 1).fill(0));
    expect(row[left + r0.promptIds.length + r0.responseIds.length - 1]).toBe(r0.promptIds.length + r0.responseIds.length - 1);
    const scores = Array.from(t['token_level_scores']!.data as Float32Array).slice(b * T, (b + 1) * T);
    expect(scores.filter((_, i) => i !== r0.responseIds.length - 1).every((x) => x === 0)).toBe(true);
    expect(scores[r0.responseIds.length - 1]).toBe(Math.fround(r0.score ?? 0));
    expect(metadata['mempo.pad_token_id']).toBe('5');
    expect(JSON.parse(metadata['mempo.uid']!)).toEqual(rs.map((x) => x.uid));
  });

  test('without sampler log-probs the log-prob tensors are left out, and the files say why', () => {
    const rs = recs().map((x, i) => (i === 2 ? { ...x, oldLogp: null } : x));
    const v = verlExport(rs, 0);
    expect(v.tensors.map(([n]) => n)).not.toContain('old_log_probs');
    expect(v.metadata['mempo.old_log_probs']).toBe('absent: 1 of 4 trajectories have no sampler log-probs (the generator returned none); recompute them with the actor (compute_log_prob)');
    const trl = trlExport(rs) as { rollout: Record<string, unknown> };
    expect(trl.rollout['logprobs']).toBeUndefined();
    expect(trl.rollout['env_mask']).toEqual(rs.map((x) => x.responseMask));
    expect(() => verlExport([], 0)).toThrow('no trajectories');
  });
});
