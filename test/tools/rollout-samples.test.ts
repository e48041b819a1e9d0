/**
 * tools/world/rollout-samples.ts: a real memory-policy rollout of the embedded model turned into
 * train.py's `rollout` samples. Each sample's output must be exactly one round's generated tokens
 * (response_mask 1, an observation or nothing on either side) and its context what that round was
 * sampled from: the prompt in round 1, a window holding the previous round's mem later (docs/algorithm.md §7).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { questionsDir, runCli } from '../cli/run-cli';
import { readBatchFile } from '../../src/io/export';
import { loadTokenizer } from '../../tools/world/samples';
import { rolloutSamples, writeRolloutSamples, type RolloutSample } from '../../tools/world/rollout-samples';

const MODEL = resolve(__dirname, '..', '..', 'models', 'mempo-tiny');
const { dir, questions } = questionsDir('mempo-rollout-samples-');
const run = join(dir, 'run');

beforeAll(async () => {
  const r = await runCli(['rollout', '--out', run, '--questions', questions, '-n', '2', '--context', 'memory', '--max-turns', '3',
    '--threads', '1', '--quiet']);
  expect(r).toMatchObject({ code: 0, err: '' });
}, 120_000);

test('every round of the rollout is one sample: its generated tokens after the context it was sampled from', async () => {
  const out = join(dir, 'samples.jsonl');
  const stats = writeRolloutSamples(join(run, 'batch.jsonl'), out);
  const records = readBatchFile(join(run, 'batch.jsonl')).records;
  const rounds = records.flatMap((r) => r.rounds.map((rd) => ({ r, rd })));
  expect(rounds.some(({ rd }) => rd.index >= 2)).toBe(true); // the window case is exercised
  expect(stats).toEqual({ trajectories: 4, samples: rounds.length, tooLong: 0 });
  const samples = readFileSync(out, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as RolloutSample);
  expect(samples).toHaveLength(rounds.length);
  const tok = await loadTokenizer(MODEL);
  let windows = 0;
  samples.forEach((s, i) => {
    const { r, rd } = rounds[i]!;
    expect([s.p, s.r, s.h, s.k, s.f]).toEqual(['rollout', rd.index, r.hops, r.objectives, 0]);
    // the output: generated tokens only, the whole round (the next token, if any, is an observation's)
    const start = r.responseIds.indexOf(s.o[0]!, rd.start);
    expect(start).toBe(rd.start);
    expect(r.responseMask.slice(rd.start, rd.start + s.o.length).every((m) => m === 1)).toBe(true);
    if (rd.start + s.o.length < r.responseMask.length) expect(r.responseMask[rd.start + s.o.length]).toBe(0);
    // the context: the prompt in round 1; later, a window that holds the previous round's mem
    if (rd.index === 1) expect(s.c).toEqual(r.promptIds);
    else {
      const prev = r.rounds[rd.index - 2]!;
      if (prev.memSpan !== null) {
        const mem = tok.decode(r.responseIds.slice(prev.memSpan[0], prev.memSpan[1]), { skip_special_tokens: false });
        expect(tok.decode(s.c, { skip_special_tokens: false })).toContain(mem);
        windows++;
      }
      expect(s.c).not.toEqual([...r.promptIds, ...r.responseIds.slice(0, rd.start)]); // the memory window, not the full history
    }
  });
  expect(windows).toBeGreaterThan(0);
});

test('excluded trajectories give no samples; a round longer than the model\'s positions is counted, not cut', () => {
  const records = readBatchFile(join(run, 'batch.jsonl')).records;
  const all = rolloutSamples(records).samples.length;
  const first = records[0]!;
  const excluded = { ...first, excluded: true };
  expect(rolloutSamples([excluded, ...records.slice(1)]).samples).toHaveLength(all - first.rounds.length);
  const long = { ...first, rounds: first.rounds.map((rd, i) => (i === 0 ? { ...rd, contextIds: Array(2048).fill(5) } : rd)) };
  expect(rolloutSamples([long]).tooLong).toBe(1);
  expect(rolloutSamples([long]).samples).toHaveLength(first.rounds.length - 1);
});

test('a file that is not a batch is an error naming it, and no sample file is written', () => {
  const bad = join(dir, 'not-a-batch.jsonl');
  writeFileSync(bad, '{"uid": 1}\n');
  const out = join(dir, 'never.jsonl');
  expect(() => writeRolloutSamples(bad, out)).toThrow(/not-a-batch\.jsonl:1: .*not a mempo batch line/);
  expect(existsSync(out)).toBe(false);
});
