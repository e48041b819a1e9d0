/** The `mempo` command in-process, with stdout and stderr captured (shared by the CLI tests). */
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { main } from '../../src/cli/main';

export function sink(): Writable & { text: () => string } {
  const chunks: string[] = [];
  const w = new Writable({ write(c: Buffer, _e, cb) { chunks.push(c.toString()); cb(); } }) as Writable & { text: () => string };
  w.text = () => chunks.join('');
  return w;
}

export async function runCli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const stdout = sink();
  const stderr = sink();
  const code = await main(args, { stdout, stderr });
  return { code, out: stdout.text(), err: stderr.text() };
}

export const TWO_QUESTIONS = [
  { id: 'a', question: 'In which country is Mamek?', golds: ['Thersekle'], hops: 1, objectives: 1 },
  { id: 'b', question: 'Who published The Hollow Winter?', golds: ['Faithhe Works'], hops: 1, objectives: 1 },
];

/** A temp directory with `q.jsonl` holding `questions`. */
export function questionsDir(prefix: string, questions: readonly object[] = TWO_QUESTIONS): { dir: string; questions: string } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const file = join(dir, 'q.jsonl');
  writeFileSync(file, questions.map((q) => JSON.stringify(q)).join('\n') + '\n');
  return { dir, questions: file };
}

/**
 * Kills `child` with SIGKILL as soon as `file` exists (polled every 20 ms; `hooks.tick` runs on each
 * poll, `hooks.beforeKill` just before the kill); rejects when the child exits before that.
 */
export function killOnceExists(child: ChildProcess, file: string, hooks: { tick?(): void; beforeKill?(): void } = {}): Promise<void> {
  return new Promise<void>((res, rej) => {
    const timer = setInterval(() => {
      hooks.tick?.();
      if (!existsSync(file)) return;
      clearInterval(timer);
      hooks.beforeKill?.();
      child.kill('SIGKILL');
      res();
    }, 20);
    child.on('exit', () => {
      clearInterval(timer);
      rej(new Error('the run ended before it could be killed'));
    });
  });
}
