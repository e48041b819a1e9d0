/**
 * Ctrl-C during `mempo rollout` (the built command, dist/cli/main.js, as `npm test` builds it
 * first): the process exits 130, batch.jsonl holds only whole lines, and --resume finishes it;
 * a --force run killed the same way leaves no summary.json / report.html of the run it replaced.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const BIN = resolve(__dirname, '..', '..', 'dist', 'cli', 'main.js');
const built = existsSync(BIN);
const maybe = built ? test : test.skip;
if (!built) console.warn(`cli-signal: ${BIN} is not built (npm run build:ts); skipping the Ctrl-C test`);

/** Runs the built CLI; `onLine` is called once `file` holds text (other than `before`, the text it had). */
function runBin(args: string[], onLine?: (child: ReturnType<typeof spawn>) => void, file?: string, before = ''): Promise<{ code: number | null; signal: string | null; err: string }> {
  return new Promise((res) => {
    const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
    let timer: NodeJS.Timeout | undefined;
    if (onLine && file) {
      timer = setInterval(() => {
        const now = existsSync(file) ? readFileSync(file, 'utf8') : '';
        if (now.length > 0 && now !== before) {
          clearInterval(timer);
          onLine(child);
        }
      }, 20);
    }
    child.on('exit', (code, signal) => {
      if (timer) clearInterval(timer);
      res({ code, signal, err });
    });
  });
}

maybe('Ctrl-C leaves only whole lines and --resume finishes the run', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'mempo-sig-'));
  const q = join(dir, 'q.jsonl');
  writeFileSync(q, Array.from({ length: 6 }, (_, i) => JSON.stringify({ id: `q${i}`, question: `In which country is Mamek ${i}?`, golds: ['Thersekle'] })).join('\n'));
  const out = join(dir, 'out');
  const file = join(out, 'batch.jsonl');
  const args = ['rollout', '--out', out, '--questions', q, '--limit', 'none', '-n', '2', '--questions-per-batch', '1', '--max-round-tokens', '48', '--max-turns', '2', '--threads', '1'];
  const first = await runBin(args, (child) => child.kill('SIGINT'), file);
  expect(first.code).toBe(130);
  expect(first.err).toContain('rerun with --resume to finish it');
  const text = readFileSync(file, 'utf8');
  expect(text.endsWith('\n')).toBe(true);
  const lines = text.split('\n').filter(Boolean);
  for (const l of lines) expect(() => JSON.parse(l)).not.toThrow();
  expect(lines.length).toBeLessThan(12);
  const second = await runBin([...args, '--resume', '--quiet']);
  expect(second.code).toBe(0);
  const done = readFileSync(file, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { uid: string; sample: number });
  expect(done.map((r) => `${r.uid}/${r.sample}`).sort()).toEqual(Array.from({ length: 12 }, (_, i) => `q${Math.floor(i / 2)}/${i % 2}`).sort());
  expect(existsSync(join(out, 'summary.json'))).toBe(true);
  expect(existsSync(join(out, 'report.html'))).toBe(true);

  // --force starts over: killed at its first line, the old summary and report are already gone.
  const forced = await runBin([...args, '--force'], (child) => child.kill('SIGINT'), file, readFileSync(file, 'utf8'));
  expect(forced.code).toBe(130);
  expect(existsSync(join(out, 'summary.json'))).toBe(false);
  expect(existsSync(join(out, 'report.html'))).toBe(false);
});
