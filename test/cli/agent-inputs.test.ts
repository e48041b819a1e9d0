/**
 * `mempo rollout|train --agent FILE` before any work (the built command, dist/cli/main.js, as a
 * user runs it: the module is an ES module, loaded by Node's own import): a module that is missing,
 * not JavaScript, fails to load, or lacks an export is refused naming the file and the export;
 * a flag that configures the built-in agent is refused by name; nothing is written to --out.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

jest.setTimeout(120_000);

const BIN = join(__dirname, '..', '..', 'dist', 'cli', 'main.js');
const dir = mkdtempSync(join(tmpdir(), 'mempo-agent-inputs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function mempo(args: string[]): Promise<{ code: number | null; err: string }> {
  return new Promise((res, rej) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d: Buffer) => { err += d.toString(); });
    child.on('error', rej);
    child.on('close', (code) => res({ code, err }));
  });
}

function module(name: string, text: string): string {
  writeFileSync(join(dir, name), text);
  return name;
}

const GOOD = 'export async function agent() { return 0; }\nexport function reward() { return 0; }\n';

it.each([
  ['a missing file', () => 'nope.mjs', /--agent nope\.mjs: cannot read the agent module \(ENOENT\)/],
  ['a TypeScript file', () => module('a.ts', GOOD), /--agent a\.ts: expected a JavaScript module \(\.mjs, \.js or \.cjs\) but the file ends in "\.ts"; compile TypeScript first/],
  ['a module that throws', () => module('throws.mjs', 'throw new Error("boom at load");\n'), /--agent throws\.mjs: the module failed to load: boom at load/],
  ['a syntax error', () => module('syntax.mjs', 'export const = 1;\n'), /--agent syntax\.mjs: the module failed to load: .*(Unexpected|token)/],
  ['no agent export', () => module('noagent.mjs', 'export function reward() { return 0; }\n'), /--agent noagent\.mjs: the export "agent" must be a function \(task, client\) => Promise<result> but it is nothing \(undefined\)/],
  ['a reward that is a number', () => module('num.mjs', 'export async function agent() {}\nexport const reward = 1;\n'), /--agent num\.mjs: the export "reward" must be a function \(task, episode\) => number but it is number 1/],
  ['tasks without ids', () => module('tasks.mjs', `${GOOD}export const tasks = [{ question: "q", golds: [] }];\n`), /--agent tasks\.mjs: the export "tasks"\[0\]\.id: expected a non-empty string but received nothing \(undefined\)/],
  ['tasks with a repeated id', () => module('dup.mjs', `${GOOD}export const tasks = [{ id: "a", question: "q", golds: [] }, { id: "a", question: "r", golds: [] }];\n`), /the export "tasks"\[1\]\.id: "a" appears twice/],
  ['a tasks function that throws', () => module('tthrow.mjs', `${GOOD}export function tasks() { throw new Error("no tasks today"); }\n`), /--agent tthrow\.mjs: the export "tasks" threw: no tasks today/],
  ['empty tasks', () => module('empty.mjs', `${GOOD}export const tasks = [];\n`), /--agent empty\.mjs: the export "tasks" holds no task/],
])('rollout --agent refuses %s (exit 2), writing nothing', async (_what, make, message) => {
  const file = make();
  const out = join(dir, `out-${file}`);
  const r = await mempo(['rollout', '--agent', file, '--out', out, '--quiet']);
  expect(r.err).toMatch(message);
  expect(r.code).toBe(2);
  expect(existsSync(out)).toBe(false);
});

it('accepts a CommonJS module (module.exports) as far as its exports go', async () => {
  const file = module('cjs.cjs', 'module.exports = { agent: async () => 0, reward: 5 };\n');
  const r = await mempo(['rollout', '--agent', file, '--out', join(dir, 'cjs-out'), '--quiet']);
  expect(r.err).toMatch(/--agent cjs\.cjs: the export "reward" must be a function \(task, episode\) => number but it is number 5/);
  expect(r.code).toBe(2);
});

it.each([
  [['rollout', '--temperature', '0.5'], /--temperature cannot go with --agent good\.mjs: it configures mempo's built-in agent/],
  [['rollout', '--retriever', 'http://127.0.0.1:9/retrieve'], /--retriever cannot go with --agent good\.mjs: your agent brings its own tools/],
  [['rollout', '--resume'], /--resume cannot go with --agent good\.mjs: mempo rollout --agent writes its batch whole; rerun with --force/],
  [['rollout', '--context', 'memory'], /--context cannot go with --agent good\.mjs/],
  [['rollout', '--server', 'http://127.0.0.1:9'], /--server cannot go with --agent good\.mjs: your agent brings its own tools/],
  [['train', '--eval-every', '1'], /--eval-every cannot go with --agent good\.mjs: the evaluation runs mempo's built-in agent, not yours/],
  [['train', '--async-level', '1'], /--async-level cannot go with --agent good\.mjs: overlapped steps are not supported with --agent/],
  [['train', '--max-turns', '3'], /--max-turns cannot go with --agent good\.mjs/],
  [['train', '--format-penalty', '1'], /--format-penalty cannot go with --agent good\.mjs: the format check reads the built-in agent's rounds/],
])('%j with --agent is refused by name (exit 2)', async (args, message) => {
  module('good.mjs', GOOD);
  const out = join(dir, `refused-${args.join('')}`);
  const r = await mempo([...args, '--agent', 'good.mjs', '--out', out, '--quiet']);
  expect(r.err).toMatch(message);
  expect(r.code).toBe(2);
  expect(existsSync(out)).toBe(false);
});
