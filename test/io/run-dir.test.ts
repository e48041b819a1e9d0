/**
 * Resume of batch.jsonl (src/io/run-dir.ts): every whole line is checked before any work (valid
 * record, one of this run's questions, a sample of the group, no repeat) and named when it is
 * not; blank lines, incomplete groups and groups whose every sample failed are dropped; the
 * file can be put back in the order an uninterrupted run writes; stale temp files and outputs
 * of an earlier run are cleared.
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { clearRunDir, loadForResume, settingsDiff, sortBatchFile } from '../../src/io/run-dir';
import type { BatchRecord, Question } from '../../src/contracts';

const QUESTIONS: Question[] = [
  { id: 'a', question: 'In which country is Mamek?', golds: ['Thersekle'] },
  { id: 'b', question: 'Who published The Hollow Winter?', golds: ['Faithhe Works'] },
];

/** A schema-valid record of question `uid`, sample `sample` (a 3-token response, one round). */
function record(uid: string, sample: number, over: Partial<BatchRecord> = {}): BatchRecord {
  const q = QUESTIONS.find((x) => x.id === uid) ?? { id: uid, question: `Q ${uid}?`, golds: ['x'] };
  return {
    uid, sample, question: q.question, golds: q.golds, hops: null, objectives: null,
    promptIds: [1, 2], responseIds: [5, 6, 7], responseMask: [1, 1, 1], oldLogp: [-0.5, -0.25, -1],
    rounds: [{ index: 1, start: 0, end: 3, memSpan: null, memReward: null, pFull: null, pMem: null, action: 'answer', query: null, answer: 'x',
      violations: [], finishReason: 'stop', contextTokens: 2, observation: null }],
    score: 1, formatValid: true, formatReason: null, outcomeAdvantage: [0.5, 0.5, 0.5], memoryAdvantage: [0, 0, 0], advantages: [0.5, 0.5, 0.5],
    text: '<answer>x</answer>', doneReason: 'answer', error: null, excluded: false, ...over,
  };
}
const line = (r: unknown) => `${JSON.stringify(r)}\n`;
const FULL = [record('a', 0), record('a', 1), record('b', 0), record('b', 1)].map(line).join('');

let n = 0;
function batchFile(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'mempo-resume-'));
  const file = join(dir, `batch${n++}.jsonl`);
  writeFileSync(file, text);
  return file;
}

describe('loadForResume', () => {
  test('a file of complete groups of this run is kept as it is', () => {
    const file = batchFile(FULL);
    const ex = loadForResume(file, 2, { questions: QUESTIONS });
    expect([...ex.completeUids]).toEqual(['a', 'b']);
    expect(ex).toMatchObject({ droppedLines: 0, failedGroups: 0 });
    expect(readFileSync(file, 'utf8')).toBe(FULL);
  });

  test("a line whose question is not in this run's question set is refused, naming the line", () => {
    const file = batchFile(FULL + line(record('dev-7', 0)));
    expect(() => loadForResume(file, 2, { questions: QUESTIONS })).toThrow(`${file}:5: question "dev-7" is not one of this run's questions; the line is from another run`);
    const renamed = batchFile(line(record('a', 0, { question: 'Another question?' })));
    expect(() => loadForResume(renamed, 2, { questions: QUESTIONS })).toThrow(`${renamed}:1: question "a" has another text in this run's questions file`);
  });

  test('a valid-JSON but incomplete middle line is refused before any work, naming the line and field', () => {
    const lines = FULL.split('\n');
    lines[2] = '{"uid":"b","sample":0}';
    const file = batchFile(lines.join('\n'));
    expect(() => loadForResume(file, 2)).toThrow(`${file}:3: field "question": `);
    const cut = batchFile(line({ ...record('a', 0), advantages: [0.5] }));
    expect(() => loadForResume(cut, 2)).toThrow(`${cut}:1: field "advantages": 1 values for 3 response tokens`);
  });

  test('a repeated sample or a sample outside the group size is refused, naming the line', () => {
    const rep = batchFile(FULL + line(record('b', 1)));
    expect(() => loadForResume(rep, 2)).toThrow(`${rep}:5: sample 1 of "b" repeats line 4`);
    const big = batchFile(line(record('a', 2)));
    expect(() => loadForResume(big, 2)).toThrow(`${big}:1: sample 2 of "a" is outside this run's group size 2`);
  });

  test('a blank middle line is dropped: the rewritten file is byte-identical to the one without it', () => {
    const lines = FULL.split('\n');
    lines.splice(2, 0, '');
    const file = batchFile(lines.join('\n'));
    const ex = loadForResume(file, 2, { questions: QUESTIONS });
    expect([...ex.completeUids]).toEqual(['a', 'b']);
    expect(ex.droppedLines).toBe(1);
    expect(readFileSync(file, 'utf8')).toBe(FULL);
  });

  test('a group whose every sample failed on a tool is dropped, so that the resumed run redoes it', () => {
    const failed = (s: number) => record('a', s, { error: 'The retrieval server at http://x/retrieve did not answer', doneReason: 'tool-error', excluded: true, score: null });
    const file = batchFile([failed(0), failed(1), record('b', 0), record('b', 1)].map(line).join(''));
    const ex = loadForResume(file, 2, { questions: QUESTIONS });
    expect([...ex.completeUids]).toEqual(['b']);
    expect(ex).toMatchObject({ failedGroups: 1, droppedLines: 2 });
    expect(readFileSync(file, 'utf8')).toBe([record('b', 0), record('b', 1)].map(line).join(''));
    // One good sample is enough to keep the group (the failed one is excluded from advantages).
    const half = batchFile([failed(0), record('a', 1)].map(line).join(''));
    expect(loadForResume(half, 2).failedGroups).toBe(0);
  });

  test('sortBatchFile puts a redone middle group back in question order, moving lines without re-serialising them', () => {
    const a = [record('a', 0), record('a', 1)].map(line).join('');
    const b = [record('b', 1), record('b', 0)].map(line).join('').replace('"sample":1', '"sample": 1');
    const file = batchFile(b + a);
    expect(sortBatchFile(file, ['a', 'b'])).toBe(true);
    expect(readFileSync(file, 'utf8')).toBe(a + b.split('\n')[1] + '\n' + b.split('\n')[0] + '\n');
    expect(sortBatchFile(file, ['a', 'b'])).toBe(false);
  });
});

describe('clearRunDir', () => {
  test("removes temp files a killed run left (not a live process's) and, unless resuming, an earlier run's summary, eval and report", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mempo-clear-'));
    const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 20000)']);
    try {
      const live = `.report.html.${child.pid}.tmp`;
      for (const f of ['.summary.json.999999999.tmp', '.report.html.999999998.tmp', live, '.notes.txt.999999999.tmp', 'batch.jsonl', 'summary.json', 'report.html', 'eval.json', 'run.json']) writeFileSync(join(dir, f), 'x');
      expect(clearRunDir(dir, true).sort()).toEqual(['.report.html.999999998.tmp', '.summary.json.999999999.tmp']);
      expect(existsSync(join(dir, live))).toBe(true);
      expect(existsSync(join(dir, 'summary.json'))).toBe(true);
      expect(clearRunDir(dir, false).sort()).toEqual(['eval.json', 'report.html', 'summary.json']);
      for (const f of ['batch.jsonl', 'run.json', live, '.notes.txt.999999999.tmp']) expect(existsSync(join(dir, f))).toBe(true);
    } finally {
      child.kill();
    }
  });
});

test('a NaN advantage (written as null: --eps 0 over a uniform group) does not block resume', () => {
  const file = batchFile([record('a', 0), record('a', 1)].map((r) => line({ ...r, advantages: [Number.NaN, 0, 0] })).join(''));
  const ex = loadForResume(file, 2);
  expect(ex.completeUids.has('a')).toBe(true);
  expect(ex.records[0]!.advantages[0]).toBeNaN();
});

describe('settingsDiff', () => {
  test('names each differing leaf by its dotted path with both values, a missing one as (none)', () => {
    const recorded = { questions: '/d/train.jsonl', limit: null, pipeline: { rollout: { groupSize: 2, seed: 0 } }, server: { api: 'vllm' } };
    const now = { questions: '/d/dev.jsonl', limit: 3, pipeline: { rollout: { groupSize: 2, seed: 1 } }, evalFile: '/d/dev.jsonl' };
    expect(settingsDiff(recorded, now).map((d) => d.text)).toEqual([
      'questions: "/d/train.jsonl" → "/d/dev.jsonl"',
      'limit: null → 3',
      'pipeline.rollout.seed: 0 → 1',
      'evalFile: (none) → "/d/dev.jsonl"',
      'server.api: "vllm" → (none)',
    ]);
  });

  test('equal settings in another key order differ in nothing; arrays compare as values', () => {
    expect(settingsDiff({ a: 1, b: { c: [1, 2] } }, { b: { c: [1, 2] }, a: 1 })).toEqual([]);
    expect(settingsDiff({ b: [1, 2] }, { b: [2, 1] }).map((d) => d.text)).toEqual(['b: [1,2] → [2,1]']);
  });
});
