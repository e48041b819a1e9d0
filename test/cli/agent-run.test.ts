/**
 * `mempo rollout --agent` and `mempo train --agent` end to end with examples/search-agent.mjs (the
 * built command, dist/cli/main.js, real processes, the real torch learner): the rollout writes the
 * batch, summary, report and exports, every trajectory sampled by the endpoint and trained as
 * recorded; two training steps write metrics and checkpoints, and the last checkpoint's weights
 * differ from the starting model's; `--resume` adds a third step and refuses another agent module. Needs the endpoint's capture hook (branch capture:
 * createCompletionsServer's `recorder`).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { BatchRecord } from '../../src/contracts';
import { CausalLM } from '../../src/engines/local/causal-lm';
import { EMBEDDED } from '../../src/paths';

jest.setTimeout(300_000);

const ROOT = join(__dirname, '..', '..');
const BIN = join(ROOT, 'dist', 'cli', 'main.js');
const dir = mkdtempSync(join(tmpdir(), 'mempo-agent-run-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function mempo(args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((res, rej) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => { out += d.toString(); });
    child.stderr.on('data', (d: Buffer) => { err += d.toString(); });
    child.on('error', rej);
    child.on('close', (code) => res({ code, out, err }));
  });
}

it('rollout --agent writes the batch of the example agent', async () => {
  const out = join(dir, 'r');
  const r = await mempo(['rollout', '--agent', 'examples/search-agent.mjs', '--out', out, '-n', '2', '--limit', '2', '--threads', '1', '--export', 'trl']);
  expect(r.err).not.toMatch(/warning|error/);
  expect(r.code).toBe(0);
  for (const f of ['batch.jsonl', 'summary.json', 'report.html', 'batch.trl.json']) expect(existsSync(join(out, f))).toBe(true);
  const records = readFileSync(join(out, 'batch.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as BatchRecord);
  const tasks = readFileSync(EMBEDDED.split('train'), 'utf8').trim().split('\n').slice(0, 2).map((l) => (JSON.parse(l) as { id: string }).id);
  // the module's tasks (the first training questions), --limit 2, two runs each: one sample per episode (its calls extend each other)
  expect(records.map((x) => x.uid)).toEqual([tasks[0], tasks[0], tasks[1], tasks[1]]);
  for (const x of records) {
    expect(x.excluded).toBe(false);
    expect(x.responseIds.length).toBe(x.responseMask.length);
    expect(x.responseMask.some((m) => m === 1)).toBe(true);
    // every sampled token has the sampler's log-prob, every added (observation) token 0
    x.responseMask.forEach((m, i) => (m === 1 ? expect(x.oldLogp![i]).toBeLessThanOrEqual(0) : expect(x.oldLogp![i]).toBe(0)));
  }
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as { trajectories: number; tokensGenerated: number; episodes: unknown };
  expect(summary.trajectories).toBe(4);
  expect(summary.tokensGenerated).toBe(records.reduce((a, x) => a + x.responseMask.filter((m) => m === 1).length, 0));
  expect(summary.episodes).toEqual({ failed: [], expired: [] });
});

it('rollout --agent names the episodes whose agent threw in summary.json and trains on the rest', async () => {
  const out = join(dir, 'f');
  const file = join(dir, 'half-agent.mjs');
  // the example, except that the second run of every task gives up
  writeFileSync(file, `import * as ex from ${JSON.stringify(join(ROOT, 'examples', 'search-agent.mjs'))};
export const tasks = ex.tasks;
export const reward = ex.reward;
export async function agent(task, client) {
  if (client.episode.endsWith('-1')) throw new Error('agent gave up');
  return ex.agent(task, client);
}
`);
  const r = await mempo(['rollout', '--agent', file, '--out', out, '-n', '2', '--limit', '2', '--threads', '1']);
  expect(r.code).toBe(0);
  expect(r.err).toMatch(/warning: mempo rollout --agent: 2 episodes failed and were excluded: episode ep-\S+-1: agent gave up/);
  const tasks = readFileSync(EMBEDDED.split('train'), 'utf8').trim().split('\n').slice(0, 2).map((l) => (JSON.parse(l) as { id: string }).id);
  const summary = JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')) as { trajectories: number; episodes: { failed: Array<{ episode: string; error: string }>; expired: string[] } };
  expect(summary.episodes.failed.map((f) => f.episode)).toEqual([`ep-${tasks[0]}-1`, `ep-${tasks[1]}-1`]);
  for (const f of summary.episodes.failed) expect(f.error).toMatch(/agent gave up/);
  expect(summary.episodes.expired).toEqual([]);
  expect(summary.trajectories).toBe(2);
});

it('train --agent runs two steps on the example agent and writes checkpoints the endpoint then serves; --resume continues with the same agent only', async () => {
  const out = join(dir, 't');
  const r = await mempo(['train', '--agent', 'examples/search-agent.mjs', '--out', out, '-n', '2', '--steps', '2', '--questions-per-step', '2', '--threads', '1', '--lr', '1e-3']);
  expect(r.code).toBe(0);
  const lines = readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { step: number; trajectories: number; trained: number; loss: number | null; eval: unknown });
  expect(lines.map((m) => [m.step, m.trajectories, m.trained])).toEqual([[1, 4, 4], [2, 4, 4]]);
  for (const m of lines) {
    expect(m.loss).not.toBeNull();
    expect(m.eval).toBeNull(); // no dev evaluation with --agent
  }
  expect(existsSync(join(out, 'checkpoints', 'step-2'))).toBe(true);
  // the checkpoint's weights moved off the starting model
  const probe = [5, 17, 42, 99, 7, 3];
  const score = async (d: string) => {
    const m = await CausalLM.load(d, { sessionOptions: { intraOpNumThreads: 1 } });
    try {
      return Array.from((await m.scoreTargets([{ contextIds: probe.slice(0, 1), targetIds: probe.slice(1) }], { sharePrefixes: false }))[0]!);
    } finally {
      await m.dispose();
    }
  };
  const [a, b] = [await score(EMBEDDED.model()), await score(join(out, 'checkpoints', 'step-2'))];
  expect(Math.max(...a.map((x, i) => Math.abs(x - b[i]!)))).toBeGreaterThan(1e-4);

  // --resume continues the run with the same agent: a third step from step 2's checkpoint
  const flags = ['--out', out, '-n', '2', '--questions-per-step', '2', '--threads', '1', '--lr', '1e-3', '--resume'];
  const more = await mempo(['train', '--agent', 'examples/search-agent.mjs', '--steps', '3', ...flags]);
  expect([more.code, more.err]).toEqual([0, expect.stringContaining('step 3/3')]);
  expect(more.err).not.toContain('step 1/3');
  const steps = readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => (JSON.parse(l) as { step: number }).step);
  expect(steps).toEqual([1, 2, 3]);
  expect(existsSync(join(out, 'checkpoints', 'step-3'))).toBe(true);
  // another agent module is another run: refused, naming it, and nothing is trained
  const other = join(dir, 'other-agent.mjs');
  writeFileSync(other, `export * from ${JSON.stringify(pathToFileURL(join(ROOT, 'examples', 'search-agent.mjs')).href)};\n`);
  const refused = await mempo(['train', '--agent', other, '--steps', '4', ...flags]);
  expect(refused.code).not.toBe(0);
  expect(refused.err).toContain('--resume: a setting differs');
  expect(refused.err).toContain('other-agent.mjs');
  expect(existsSync(join(out, 'checkpoints', 'step-4'))).toBe(false);
});
