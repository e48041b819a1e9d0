/**
 * `--system-prompt TEXT` (rollout, eval, train): the agent's system message, in every prompt the run
 * samples from, recorded in run.json; `--resume` continues only the same message, and a run.json
 * written before the flag existed resumes as it did, saying it could not check it.
 */
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SYSTEM_PROMPT } from '../../src/protocol/chat';
import { tokenizer } from '../pipeline/helpers';
import { ACCESS_PROMPT } from '../pipeline/page-fixture';
import { questionsDir, runCli } from './run-cli';

const { dir, questions } = questionsDir('mempo-cli-system-prompt-');
const SMALL = ['--questions', questions, '-n', '2', '--max-round-tokens', '24', '--max-turns', '2', '--threads', '1', '--questions-per-batch', '1', '--quiet'];
const MINE = 'You answer questions about a made-up world. Search, then answer.';
const base = join(dir, 'base');
let full = '';

beforeAll(async () => {
  const r = await runCli(['rollout', '--out', base, ...SMALL, '--system-prompt', MINE]);
  expect(r.code).toBe(0);
  full = readFileSync(join(base, 'batch.jsonl'), 'utf8');
});

/** A copy of the base run cut to its first group (2 lines), its run.json passed through `edit`. */
function cut(name: string, edit: (runJson: { settings: Record<string, unknown> }) => void = () => undefined): string {
  const out = join(dir, name);
  cpSync(base, out, { recursive: true });
  writeFileSync(join(out, 'batch.jsonl'), full.split('\n').slice(0, 2).map((l) => `${l}\n`).join(''));
  const runJson = JSON.parse(readFileSync(join(out, 'run.json'), 'utf8')) as { settings: Record<string, unknown> };
  edit(runJson);
  writeFileSync(join(out, 'run.json'), JSON.stringify(runJson));
  return out;
}

test('the prompt of every trajectory carries the message, and run.json records it', async () => {
  const tok = await tokenizer();
  const recs = full.trimEnd().split('\n').map((l) => JSON.parse(l) as { promptIds: number[]; question: string });
  expect(recs).toHaveLength(4);
  for (const r of recs) expect(tok.decode(r.promptIds)).toBe(`<|im_start|>system\n${MINE}<|im_end|>\n<|im_start|>user\n${r.question}<|im_end|>\n<|im_start|>assistant\n`);
  const settings = (JSON.parse(readFileSync(join(base, 'run.json'), 'utf8')) as { settings: { systemPrompt: string; options: { rollout: { systemPrompt: string } } } }).settings;
  expect([settings.systemPrompt, settings.options.rollout.systemPrompt]).toEqual([MINE, MINE]);
});

test('a run without the flag records the message it used: mempo\'s own, the page-tool agent\'s in the embedded page world', async () => {
  for (const [name, more, message] of [['default', [], ACCESS_PROMPT], ['no-pages', ['--no-pages'], SYSTEM_PROMPT]] as const) {
    const out = join(dir, name);
    expect((await runCli(['rollout', '--out', out, ...SMALL, '--limit', '1', '-n', '1', ...more])).code).toBe(0);
    const settings = (JSON.parse(readFileSync(join(out, 'run.json'), 'utf8')) as { settings: { systemPrompt: string; options: { rollout: Record<string, unknown> } } }).settings;
    expect(settings.systemPrompt).toBe(message);
    expect('systemPrompt' in settings.options.rollout).toBe(false);
  }
});

test('--resume with the same message finishes the very file; another message, or none, is refused naming both', async () => {
  const same = cut('same');
  expect((await runCli(['rollout', '--out', same, ...SMALL, '--system-prompt', MINE, '--resume'])).code).toBe(0);
  expect(readFileSync(join(same, 'batch.jsonl'), 'utf8')).toBe(full);
  const other = await runCli(['rollout', '--out', cut('other'), ...SMALL, '--system-prompt', 'Be brief.', '--resume']);
  expect(other.code).toBe(1);
  expect(other.err).toContain(`systemPrompt: ${JSON.stringify(MINE)} → "Be brief."`);
  const none = await runCli(['rollout', '--out', cut('none'), ...SMALL, '--resume']);
  expect(none.code).toBe(1);
  expect(none.err).toContain(`systemPrompt: ${JSON.stringify(MINE)} → ${JSON.stringify(ACCESS_PROMPT)}`);
});

test('a run.json without it (an older mempo) resumes as before, saying it could not check it', async () => {
  const older = cut('older', (j) => {
    delete j.settings['systemPrompt'];
    delete (j.settings['options'] as { rollout: Record<string, unknown> }).rollout['systemPrompt'];
  });
  const r = await runCli(['rollout', '--out', older, ...SMALL.filter((a) => a !== '--quiet'), '--system-prompt', MINE, '--resume']);
  expect(r.code).toBe(0);
  expect(r.err).toContain('does not record systemPrompt, options.rollout.systemPrompt (options its mempo did not have): not checked on --resume');
  expect(readFileSync(join(older, 'batch.jsonl'), 'utf8')).toBe(full);
});

test('an empty message is a usage error naming the flag; eval and train take the flag too', async () => {
  const r = await runCli(['rollout', '--out', join(dir, 'empty'), ...SMALL, '--system-prompt', ' ']);
  expect(r.code).toBe(2);
  expect(r.err).toContain("error: option '--system-prompt <text>' argument ' ' is invalid. Expected a non-empty text.");
  for (const cmd of ['eval', 'train']) expect((await runCli([cmd, '--help'])).out).toMatch(/--system-prompt <text> +the agent's system message/);
});
