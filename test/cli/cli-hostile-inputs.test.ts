/**
 * Hostile input files given to `mempo rollout`, `eval`, `train` and `serve-retriever` (issue 47,
 * item 5), through the built command (dist/cli/main.js, as `npm test` builds it first), each in
 * its own process so that a hang is a failed test rather than a stuck test runner:
 *
 * - a FIFO as --pages / --corpus / --questions is refused at once naming the file (it blocked the
 *   open for good, and rollout / eval then ignored SIGINT and SIGTERM);
 * - a symlink to /dev/zero is refused as a device (it was read without end);
 * - a 600 MB sparse file is refused by its size, naming it (it gave ERR_STRING_TOO_LONG without a name);
 * - bytes that are not UTF-8 are an error naming the file, line and byte (pages and corpora had
 *   them replaced silently).
 *
 * Every refusal exits 2 (an invalid input) within seconds.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const BIN = resolve(__dirname, '..', '..', 'dist', 'cli', 'main.js');
const built = existsSync(BIN);
if (!built) console.warn(`cli-hostile-inputs: ${BIN} is not built (npm run build:ts); skipping`);
const describeBuilt = built ? describe : describe.skip;

/** Longest a refusal may take: a few seconds of Node start-up and module loading on a busy machine. */
const PROMPT_MS = 20_000;

/** Runs the built CLI; a process still running after PROMPT_MS is killed with SIGKILL and reported as hung. */
function runBin(args: string[]): Promise<{ code: number | null; err: string; hung: boolean; ms: number }> {
  return new Promise((res) => {
    const t0 = Date.now();
    const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, MEMPO_SERVE_TOKEN: '' } });
    let err = '';
    let hung = false;
    child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
    const timer = setTimeout(() => {
      hung = true;
      child.kill('SIGKILL');
    }, PROMPT_MS);
    child.on('exit', (code) => {
      clearTimeout(timer);
      res({ code, err, hung, ms: Date.now() - t0 });
    });
  });
}

const dir = mkdtempSync(join(tmpdir(), 'mempo-hostile-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const fifo = join(dir, 'pipe.jsonl');
const zero = join(dir, 'zero.jsonl');
const huge = join(dir, 'huge.jsonl');
const latin1 = { pages: join(dir, 'latin1-pages.jsonl'), corpus: join(dir, 'latin1-corpus.jsonl'), questions: join(dir, 'latin1-questions.jsonl') };
let haveFifo = false;

beforeAll(() => {
  haveFifo = spawnSync('mkfifo', [fifo]).status === 0;
  symlinkSync('/dev/zero', zero);
  writeFileSync(huge, '');
  truncateSync(huge, 600 * 1e6); // sparse: no disk used
  const bad = (head: string, tail: string) => Buffer.concat([Buffer.from(head), Buffer.from([0xff]), Buffer.from(tail)]);
  writeFileSync(latin1.pages, bad('{"url":"https://a","title":"A","contents":"one"}\n{"url":"https://b","title":"B","contents":"Caf', '"}\n'));
  writeFileSync(latin1.corpus, bad('{"id":"1","title":"A","contents":"one"}\n{"id":"2","title":"B","contents":"Caf', '"}\n'));
  writeFileSync(latin1.questions, bad('{"id":"a","question":"Where is Mamek?","golds":["x"]}\n{"id":"b","question":"Caf', '?","golds":["x"]}\n'));
});

type Flag = '--pages' | '--corpus' | '--questions';
const what: Record<Flag, string> = { '--pages': 'pages file', '--corpus': 'corpus', '--questions': 'questions file' };
const latinOf: Record<Flag, string> = { '--pages': latin1.pages, '--corpus': latin1.corpus, '--questions': latin1.questions };

/** Each command with the flags that name an input file, and what else it needs to start. */
const COMMANDS: Array<{ cmd: string; flags: Flag[]; utf8: Flag; args: () => string[] }> = [
  { cmd: 'rollout', flags: ['--pages', '--corpus', '--questions'], utf8: '--pages', args: () => ['--out', join(dir, 'out-rollout'), '--quiet', '--threads', '1'] },
  { cmd: 'eval', flags: ['--corpus', '--pages', '--questions'], utf8: '--corpus', args: () => ['--quiet', '--threads', '1'] },
  { cmd: 'train', flags: ['--questions', '--corpus', '--pages'], utf8: '--pages', args: () => ['--out', join(dir, 'out-train'), '--quiet', '--threads', '1'] },
  { cmd: 'serve-retriever', flags: ['--pages', '--corpus'], utf8: '--corpus', args: () => ['--port', '0'] },
];

describeBuilt.each(COMMANDS)('mempo $cmd with hostile input files', ({ cmd, flags, utf8, args }) => {
  // Each hostile kind through each flag the command has, the flags taken in turn.
  const at = (i: number): Flag => flags[i % flags.length]!;

  test(`a FIFO as ${at(0)} is refused at once naming it (no hang)`, async () => {
    if (!haveFifo) return void console.warn('mkfifo is not available: FIFO case not run');
    const r = await runBin([cmd, ...args(), at(0), fifo]);
    expect(r.hung).toBe(false);
    expect(r.code).toBe(2);
    expect(r.err).toBe(`error: Cannot read ${fifo}: the ${what[at(0)]} is a FIFO (named pipe), not a regular file\n`);
  }, PROMPT_MS + 10_000);

  test(`a symlink to /dev/zero as ${at(1)} is refused as a device (not read without end)`, async () => {
    const r = await runBin([cmd, ...args(), at(1), zero]);
    expect(r.hung).toBe(false);
    expect(r.code).toBe(2);
    expect(r.err).toBe(`error: Cannot read ${zero}: the ${what[at(1)]} is a device, not a regular file\n`);
  }, PROMPT_MS + 10_000);

  test(`a 600 MB file as ${at(2)} is refused by its size, naming it, before it is read`, async () => {
    const r = await runBin([cmd, ...args(), at(2), huge]);
    expect(r.hung).toBe(false);
    expect(r.code).toBe(2);
    expect(r.err).toBe(`error: Cannot read ${huge}: the ${what[at(2)]} has 600000000 bytes, more than the 524288000 an input file may have\n`);
  }, PROMPT_MS + 10_000);

  // Questions files were strict already (test/cli/cli-inputs.test.ts); pages and corpora were not.
  test(`bytes that are not UTF-8 in ${utf8} are an error naming the file, line and byte`, async () => {
    const file = latinOf[utf8];
    const r = await runBin([cmd, ...args(), utf8, file]);
    expect(r.hung).toBe(false);
    expect(r.code).toBe(2);
    const col = utf8 === '--pages' ? 47 : 38;
    expect(r.err).toBe(`error: ${file}:2: not valid UTF-8 (byte ${col} of the line is 0xff)\n`);
  }, PROMPT_MS + 10_000);
});
