/**
 * `mempo serve --record FILE` as a real process (dist/cli/main.js; run npm run build:ts first)
 * driven by the real `openai` SDK: each finished episode is a line of FILE as soon as its finish
 * is answered; SIGTERM exits 0 with the unfinished episode named on stderr and not written; every
 * line parses and holds what the client was answered. A file whose last line is cut is refused.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import OpenAI from 'openai';

const ROOT = resolve(__dirname, '../..');
const CLI = join(ROOT, 'dist/cli/main.js');
const dir = mkdtempSync(join(tmpdir(), 'mempo-serve-record-'));

function start(args: string[]): Promise<{ proc: ChildProcess; url: string; stderr: () => string }> {
  return new Promise((done, reject) => {
    const proc = spawn(process.execPath, [CLI, 'serve', '--port', '0', ...args], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    const timer = setTimeout(() => reject(new Error(`mempo serve did not start within 60 s: ${err}`)), 60_000);
    proc.stderr!.on('data', (c: Buffer) => {
      err += c.toString();
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(err);
      if (m) {
        clearTimeout(timer);
        done({ proc, url: m[1]!, stderr: () => err });
      }
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`mempo serve exited (${code}) before listening: ${err}`));
    });
  });
}

const messages = [{ role: 'user' as const, content: 'Where was the founder of Kethfai Company born?' }];

test('finished episodes are lines of the file; SIGTERM exits 0 and names the unfinished one', async () => {
  const file = join(dir, 'episodes.jsonl');
  const s = await start(['--record', file]);
  const exited = new Promise<number | null>((r) => s.proc.once('exit', (code) => r(code)));
  const answers: Record<string, number[][]> = {};
  try {
    const client = (ep: string) => new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'none', maxRetries: 0, defaultHeaders: { 'x-mempo-episode': ep } });
    for (const ep of ['ep-a', 'ep-b', 'ep-open']) {
      answers[ep] = [];
      for (let t = 0; t < 2; t++) {
        const a = await client(ep).chat.completions.create({ model: 'mempo-tiny', messages, max_tokens: 4, seed: t, return_token_ids: true } as never);
        answers[ep]!.push((a as unknown as { choices: { token_ids: number[] }[] }).choices[0]!.token_ids);
      }
    }
    for (const ep of ['ep-a', 'ep-b']) {
      const res = await fetch(`${s.url}/v1/episodes/${ep}/finish`, { method: 'POST' });
      expect(res.status).toBe(200);
      // on disk as soon as the finish is answered
      expect(readFileSync(file, 'utf8')).toContain(`"id":"${ep}"`);
    }
    // written and dropped from memory: a second finish finds nothing open
    expect((await fetch(`${s.url}/v1/episodes/ep-a/finish`, { method: 'POST' })).status).toBe(404);
  } finally {
    s.proc.kill('SIGTERM');
  }
  expect(await exited).toBe(0);
  const text = readFileSync(file, 'utf8');
  expect(text.endsWith('\n')).toBe(true);
  const lines = text.trimEnd().split('\n').map((l) => JSON.parse(l) as { id: string; finished: boolean; calls: { sampledIds: number[]; logprobs: number[] }[] });
  expect(lines.map((l) => l.id)).toEqual(['ep-a', 'ep-b']);
  for (const l of lines) {
    expect(l.finished).toBe(true);
    expect(l.calls.map((c) => c.sampledIds)).toEqual(answers[l.id]);
    for (const c of l.calls) expect(c.logprobs).toHaveLength(c.sampledIds.length);
  }
  expect(s.stderr()).toMatch(/1 episode\(s\) never finished, not written to .*: ep-open/);
  expect(s.stderr()).toContain('2 episode(s) written to');
}, 120_000);

test('a --record file whose last line is cut is refused, and left as it was', async () => {
  const file = join(dir, 'cut.jsonl');
  writeFileSync(file, '{"id":"x","calls":[]}\n{"id":"y","ca');
  const proc = spawn(process.execPath, [CLI, 'serve', '--port', '0', '--record', file], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  proc.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const code = await new Promise<number | null>((r) => proc.once('exit', (c) => r(c)));
  expect(code).not.toBe(0);
  expect(err).toContain('its last line is not whole');
  expect(readFileSync(file, 'utf8')).toBe('{"id":"x","calls":[]}\n{"id":"y","ca');
}, 60_000);
