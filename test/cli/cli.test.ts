/**
 * The `mempo` command in-process: help, option and input errors, a rollout on the embedded
 * model writing batch.jsonl / summary.json / report.html, resume after an interrupted run, eval.
 */
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { main } from '../../src/cli/main';

function sink(): Writable & { text: () => string } {
  const chunks: string[] = [];
  const w = new Writable({ write(c: Buffer, _e, cb) { chunks.push(c.toString()); cb(); } }) as Writable & { text: () => string };
  w.text = () => chunks.join('');
  return w;
}

async function run(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const stdout = sink();
  const stderr = sink();
  const code = await main(args, { stdout, stderr });
  return { code, out: stdout.text(), err: stderr.text() };
}

const dir = mkdtempSync(join(tmpdir(), 'mempo-cli-'));
const questions = join(dir, 'q.jsonl');
writeFileSync(questions, [
  { id: 'a', question: 'In which country is Mamek?', golds: ['Thersekle'], hops: 1, objectives: 1 },
  { id: 'b', question: 'Who published The Hollow Winter?', golds: ['Faithhe Works'], hops: 1, objectives: 1 },
].map((q) => JSON.stringify(q)).join('\n') + '\n');
const SMALL = ['--questions', questions, '-n', '2', '--max-round-tokens', '24', '--max-turns', '2', '--threads', '1', '--questions-per-batch', '1'];

describe('mempo command', () => {
  test('--help lists each command on one line; <command> --help documents its options, no default twice; --version', async () => {
    const { code, out } = await run(['--help']);
    expect(code).toBe(0);
    const commands = ['rollout', 'eval', 'train', 'export', 'serve-retriever', 'serve'];
    for (const c of commands) expect(out).toMatch(new RegExp(`^  ${c} \\[options\\] +\\S.*\\n  \\S`, 'm'));
    expect(out.split('\n').length).toBeLessThan(30);
    expect(out).not.toContain('--group-size');
    for (const c of commands) {
      const h = await run([c, '--help']);
      expect(h.code).toBe(0);
      // One entry per option (continuation lines are indented further): a default is printed once.
      for (const entry of h.out.split(/\n(?= {2}-)/)) expect(entry.split('(default').length).toBeLessThanOrEqual(2);
    }
    const pkgVersion = (JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string }).version;
    for (const flag of ['--version', '-V']) expect(await run([flag])).toMatchObject({ code: 0, out: `${pkgVersion}\n` });
  });

  test('rollout --help documents every pipeline option', async () => {
    const { code, out } = await run(['rollout', '--help']);
    expect(code).toBe(0);
    for (const flag of [
      '--out', '--questions', '--limit', '--group-size', '--model', '--corpus', '--retriever', '--context', '--seed',
      '--resume', '--quiet', '--json', '--max-turns', '--max-response-tokens', '--max-round-tokens', '--temperature', '--topk',
      '--doc-max-chars', '--mem-span', '--answer-template', '--threshold', '--mem-context-last-observation', '--window-tool-results',
      '--search-short-text-chars', '--chat-template', '--webpage-short-text-chars', '--format-score', '--budget-score', '--eps', '--no-norm-by-std', '--mem-grouping', '--alpha', '--format-penalty',
      '--schedule', '--max-in-flight',
    ]) expect(out).toContain(flag);
  });

  test('rejects an invalid option value naming the flag', async () => {
    const r = await run(['rollout', '--out', join(dir, 'x'), '--group-size', '0']);
    expect(r.code).not.toBe(0);
    expect(r.err).toContain("option '-n, --group-size <n>' argument '0' is invalid. Expected an integer >= 1.");
    const c = await run(['rollout', '--out', join(dir, 'x'), '--context', 'window']);
    expect(c.err).toContain("argument 'window' is invalid. Allowed choices are full, memory.");
    const m = await run(['rollout']);
    expect(m.err).toContain("required option '--out <dir>' not specified");
    const b = await run(['rollout', '--out', join(dir, 'x'), '--budget-score', 'half']);
    expect(b.err).toContain("option '--budget-score <x>' argument 'half' is invalid. Expected a finite number.");
    const p = await run(['rollout', '--out', join(dir, 'x'), '--format-penalty', '-1']);
    expect(p.err).toContain("option '--format-penalty <x>' argument '-1' is invalid. Expected a finite number >= 0.");
  });

  test('a retrieval server that refuses every search: trajectories recorded with the error, exit 1 naming the server', async () => {
    const out = join(dir, 'down');
    // A port that was just free: nothing listens there, connections are refused.
    const port = await new Promise<number>((res) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as AddressInfo).port;
        s.close(() => res(p));
      });
    });
    const url = `http://127.0.0.1:${port}/retrieve`;
    const r = await run(['rollout', '--out', out, ...SMALL, '--quiet', '--max-round-tokens', '64', '--retriever', url, '--retriever-retries', '1', '--retriever-backoff', '1']);
    const lines = readFileSync(join(out, 'batch.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
    const failed = lines.filter((l) => l.error !== null);
    // Trajectories that never searched are scored; those that did are excluded with the error.
    for (const l of failed) {
      expect(l).toMatchObject({ excluded: true, score: null, doneReason: 'tool-error' });
      expect(l.error).toContain(`The retrieval server at ${url} did not answer after 2 attempts (last error: ECONNREFUSED)`);
    }
    if (failed.length === lines.length) {
      expect(r.code).toBe(1);
      expect(r.err).toContain(`error: every trajectory hit a tool failure: The retrieval server at ${url}`);
    } else {
      expect(r.code).toBe(0);
    }
    expect(existsSync(join(out, 'summary.json'))).toBe(true);
  });

  test("'none' lifts a limit", async () => {
    const r = await run(['eval', '--questions', questions, '--limit', 'none', '--max-round-tokens', '4', '--max-turns', '1', '--threads', '1', '--doc-max-chars', 'none', '--json']);
    expect(r.err).toBe('');
    expect(JSON.parse(r.out).questions).toBe(2);
  });

  test('rejects a malformed questions line naming the file, line and field', async () => {
    const bad = join(dir, 'bad.jsonl');
    writeFileSync(bad, '{"id":"a","question":"Q?","golds":["x"]}\n{"id":"b","golds":["x"]}\n');
    const r = await run(['rollout', '--out', join(dir, 'bad-out'), '--questions', bad, '--quiet']);
    expect(r.code).toBe(2);
    expect(r.err).toBe(`error: ${bad}:2: field "question": Invalid input: expected string, received undefined\n`);
  });

  test('rollout writes batch.jsonl, summary.json and a self-contained report.html; --json prints the summary', async () => {
    const out = join(dir, 'run');
    const r = await run(['rollout', '--out', out, ...SMALL, '--json']);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    const summary = JSON.parse(r.out);
    expect(summary).toMatchObject({ questions: 2, trajectories: 4, excluded: 0 });
    for (const k of ['meanScore', 'formatValidRate', 'memoryReward', 'meanTurns', 'tokensGenerated', 'scoredItems', 'thisRun']) expect(summary).toHaveProperty(k);
    for (const k of ['generate', 'tools', 'scoring', 'advantages', 'writing', 'total', 'load']) expect(summary.thisRun.wallMs).toHaveProperty(k);
    expect(JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'))).toEqual(summary);
    const lines = readFileSync(join(out, 'batch.jsonl'), 'utf8').split('\n');
    expect(lines.pop()).toBe('');
    expect(lines).toHaveLength(4);
    const rec = JSON.parse(lines[0]!);
    for (const k of ['uid', 'sample', 'question', 'golds', 'promptIds', 'responseIds', 'responseMask', 'rounds', 'score', 'formatValid',
      'outcomeAdvantage', 'memoryAdvantage', 'advantages', 'oldLogp', 'text']) expect(rec).toHaveProperty(k);
    for (const k of ['start', 'end', 'memSpan', 'memReward', 'pFull', 'pMem']) expect(rec.rounds[0]).toHaveProperty(k);
    const html = readFileSync(join(out, 'report.html'), 'utf8');
    expect(html).toMatch(/^<!doctype html>/);
    expect(html).toContain('<svg');
    expect(html).not.toMatch(/<script|<link|src=|url\(|@import/);
    // An existing batch is never overwritten silently.
    const again = await run(['rollout', '--out', out, ...SMALL, '--quiet']);
    expect(again.code).toBe(1);
    expect(again.err).toContain('batch.jsonl already exists: pass --resume to finish that run, or --force to start over');
  });

  test('--resume after an interrupted run keeps whole groups and reproduces the rest exactly', async () => {
    const out = join(dir, 'resume');
    expect((await run(['rollout', '--out', out, ...SMALL, '--quiet'])).code).toBe(0);
    const file = join(out, 'batch.jsonl');
    const full = readFileSync(file, 'utf8');
    const lines = full.split('\n').filter(Boolean);
    // Interrupted: the first group, one line of the second and half a line.
    writeFileSync(file, `${lines[0]}\n${lines[1]}\n${lines[2]}\n${lines[3]!.slice(0, 40)}`);
    const r = await run(['rollout', '--out', out, ...SMALL, '--resume', '--json']);
    expect(r.code).toBe(0);
    expect(readFileSync(file, 'utf8')).toBe(full);
    const s = JSON.parse(r.out);
    expect(s.trajectories).toBe(4);
    expect(s.thisRun).toMatchObject({ trajectories: 2, skippedBatches: 1, batches: 1 });
    // Resuming a finished run does nothing more.
    const done = await run(['rollout', '--out', out, ...SMALL, '--resume', '--json']);
    expect(JSON.parse(done.out).thisRun).toMatchObject({ trajectories: 0, batches: 0, skippedBatches: 2 });
    expect(readFileSync(file, 'utf8')).toBe(full);
    // Other options cannot continue this run.
    const other = await run(['rollout', '--out', out, ...SMALL, '--seed', '5', '--resume', '--quiet']);
    expect(other.code).toBe(1);
    expect(other.err).toContain('--resume: the options differ from the run in');
  });

  test('eval prints the table and writes eval.json', async () => {
    const out = join(dir, 'eval');
    const r = await run(['eval', '--questions', questions, '--max-round-tokens', '24', '--max-turns', '2', '--threads', '1', '--out', out, '--quiet']);
    expect(r.code).toBe(0);
    expect(r.out).toContain('mempo eval (full context, temperature 0): 2 questions, 2 trajectories');
    expect(r.out).toMatch(/EM by hops: +1: /);
    expect(r.out).toMatch(/EM by objectives: +1: /);
    const ev = JSON.parse(readFileSync(join(out, 'eval.json'), 'utf8'));
    expect(ev).toMatchObject({ questions: 2, trajectories: 2 });
    for (const k of ['em', 'byHops', 'byObjectives', 'formatValidRoundRate', 'mixedGroupFraction', 'contextTokens']) expect(ev).toHaveProperty(k);
    expect(existsSync(join(out, 'report.html'))).toBe(true);
    const j = await run(['eval', '--questions', questions, '--max-round-tokens', '8', '--max-turns', '1', '--threads', '1', '--context', 'memory', '--json']);
    expect(JSON.parse(j.out).contextTokens.maxPeak).toBeGreaterThan(0);
  });
});
