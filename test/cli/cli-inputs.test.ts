/**
 * What `mempo rollout` / `mempo eval` do with bad option values and hostile inputs: exit 2 for
 * a usage error, an empty --out, too many --threads, a question longer than the model's
 * context, bytes that are not UTF-8, an empty corpus, an eos id outside the vocabulary, a
 * corrupt manifest.json; and how the banner names an HTTP retriever.
 */
import { mkdtempSync, readdirSync, symlinkSync, writeFileSync, readFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createServer, type AddressInfo } from 'node:net';
import { questionsDir, runCli, TWO_QUESTIONS } from './run-cli';

const { dir, questions } = questionsDir('mempo-cli-inputs-');
// A quick eval: one round of four tokens per question.
const QUICK = ['--questions', questions, '--max-round-tokens', '4', '--max-turns', '1', '--threads', '1', '--json'];
const MODEL = resolve(__dirname, '..', '..', 'models', 'mempo-tiny');

/** A model directory whose files link to the embedded model's, with `changes` written instead. */
function modelWith(changes: Record<string, string>): string {
  const d = mkdtempSync(join(tmpdir(), 'mempo-model-'));
  for (const f of readdirSync(MODEL)) if (!(f in changes)) symlinkSync(join(MODEL, f), join(d, f));
  for (const [f, text] of Object.entries(changes)) writeFileSync(join(d, f), text);
  return d;
}

describe('usage errors exit 2', () => {
  test.each([
    [['-n', '-4'], "option '-n, --group-size <n>' argument '-4' is invalid"],
    [['--temperature', 'NaN'], "option '--temperature <t>' argument 'NaN' is invalid"],
    [['--no-such-flag'], "unknown option '--no-such-flag'"],
  ])('rollout %j', async (args, message) => {
    const r = await runCli(['rollout', '--out', join(dir, 'never'), ...args]);
    expect(r.code).toBe(2);
    expect(r.err).toContain(`error: ${message}`);
  });

  test('an unknown command, and a missing --out', async () => {
    expect((await runCli(['rollot'])).code).toBe(2);
    expect((await runCli(['rollout'])).code).toBe(2);
    expect((await runCli(['--help'])).code).toBe(0);
  });

  test('--out "" is an error (not the current directory)', async () => {
    const r = await runCli(['rollout', '--out', '', '--questions', join(dir, 'missing.jsonl'), '--quiet']);
    expect(r.code).toBe(2);
    expect(r.err).toBe('error: --out: the output directory is an empty path\n');
    const e = await runCli(['eval', '--out', '  ', '--questions', join(dir, 'missing.jsonl'), '--quiet']);
    expect(e.code).toBe(2);
  });
});

describe('inputs', () => {
  test('--threads above the cores of the machine is lowered to them, with a warning', async () => {
    const cores = availableParallelism();
    const r = await runCli(['eval', ...QUICK, '--threads', String(cores + 1)]);
    expect(r.code).toBe(0);
    expect(r.err).toBe(`warning: --threads ${cores + 1} is more than the ${cores} cores this machine has; using ${cores}\n`);
  });

  test("a question whose prompt is longer than the model's context is left out with a warning naming it; all of them is an error", async () => {
    const long = { id: 'huge', question: `In which country is ${'Mamek and '.repeat(1500)}Vord?`, golds: ['x'] };
    const q = questionsDir('mempo-cli-long-', [TWO_QUESTIONS[0]!, long, TWO_QUESTIONS[1]!]);
    const r = await runCli(['eval', ...QUICK, '--questions', q.questions, '--limit', 'none']);
    expect(r.code).toBe(0);
    expect(r.err).toMatch(new RegExp(`^warning: the prompt of question "huge" \\(\\d+ tokens\\) in ${q.questions.replace(/[.\\/]/g, '\\$&')} is not shorter than the model's context \\(2048 tokens\\): 1 question left out of this run\\n$`));
    expect(JSON.parse(r.out).questions).toBe(2);
    const only = questionsDir('mempo-cli-long1-', [long]);
    const all = await runCli(['eval', ...QUICK, '--questions', only.questions]);
    expect(all.code).toBe(2);
    expect(all.err).toContain(': no question left to run');
  });

  test('a questions file with bytes that are not UTF-8 is refused naming the line', async () => {
    const bad = join(dir, 'latin1.jsonl');
    writeFileSync(bad, Buffer.concat([Buffer.from('{"id":"a","question":"Where is Mamek?","golds":["x"]}\n{"id":"b","question":"Caf'), Buffer.from([0xe9]), Buffer.from('?","golds":["x"]}\n')]));
    const r = await runCli(['eval', ...QUICK, '--questions', bad]);
    expect(r.code).toBe(2);
    expect(r.err).toBe(`error: ${bad}:2: not valid UTF-8 (byte 26 of the line is 0xe9)\n`);
  });

  test('an empty corpus is an error naming it', async () => {
    const empty = join(dir, 'empty-corpus.jsonl');
    writeFileSync(empty, '\n');
    const r = await runCli(['eval', ...QUICK, '--corpus', empty]);
    expect(r.code).toBe(2);
    expect(r.err).toBe(`error: ${empty}: the corpus has no documents\n`);
    const s = await runCli(['serve-retriever', '--corpus', empty, '--port', '0']);
    expect(s.code).toBe(2);
    expect(s.err).toBe(`error: ${empty}: the corpus has no documents\n`);
  });

  test('an eos_token_id outside the vocabulary is an error naming config.json', async () => {
    const cfg = JSON.parse(readFileSync(join(MODEL, 'config.json'), 'utf8'));
    const m = modelWith({ 'config.json': JSON.stringify({ ...cfg, eos_token_id: 99999 }) });
    const r = await runCli(['eval', ...QUICK, '--model', m]);
    expect(r.code).toBe(1);
    expect(r.err).toBe(`error: ${join(m, 'config.json')}: eos_token_id 99999 is outside the vocabulary (vocab_size 3072 in ${join(m, 'config.json')})\n`);
    const s = await runCli(['serve', '--model', m, '--port', '0']);
    expect(s).toMatchObject({ code: 1, err: r.err });
  });

  test('a corrupt manifest.json is a warning naming it (the model still loads)', async () => {
    const m = modelWith({ 'manifest.json': '{"name": "mempo-tiny", "files": {' });
    const r = await runCli(['eval', ...QUICK, '--model', m]);
    expect(r.code).toBe(0);
    expect(r.err).toMatch(new RegExp(`^warning: ${join(m, 'manifest.json').replace(/[.\\/]/g, '\\$&')} is not valid JSON \\(.*\\); the model files are not checked against it\\n$`));
  });

  test('the banner names an HTTP retriever as "retrieval server URL"', async () => {
    const port = await new Promise<number>((res) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as AddressInfo).port;
        s.close(() => res(p));
      });
    });
    const url = `http://127.0.0.1:${port}/retrieve`;
    const r = await runCli(['eval', ...QUICK.filter((a) => a !== '--json'), '--retriever', url, '--retriever-retries', '0']);
    expect(r.err).toContain(`, retrieval server ${url}, context full`);
    expect(r.err).not.toContain('http:http');
  });
});

test('a huge question is left out without encoding all of it', async () => {
  const huge = { id: 'huge', question: 'In which country is Mamek and Vord? '.repeat(300_000), golds: ['x'] };
  const q = questionsDir('mempo-cli-huge-', [TWO_QUESTIONS[0]!, huge]);
  const t0 = performance.now();
  const r = await runCli(['eval', ...QUICK, '--questions', q.questions, '--limit', 'none']);
  expect(r.code).toBe(0);
  expect(r.err).toMatch(/^warning: the prompt of question "huge" \(over \d+ tokens\) in .* 1 question left out of this run\n$/);
  expect(performance.now() - t0).toBeLessThan(30_000);
});
