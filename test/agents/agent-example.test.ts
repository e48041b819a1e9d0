/**
 * examples/search-agent.mjs (issue 45 item 5): an agent written with the `openai` SDK and its own
 * BM25 tool, run through collectEpisodes against `mempo serve`'s handler on loopback, recording
 * the calls (a process of its own, real HTTP), gives the records made from what the endpoint
 * recorded, and they equal the built-in pipeline's trajectories token for token: same prompt ids,
 * same response ids (sampled and observation), same mask, same sampling log-probs. The built-in
 * side runs under `--schedule continuous --max-generate-batch 1`: each request carries its own
 * seed, and each sequence is sampled alone, as the endpoint samples one request (docs/rollout.md,
 * "Reproducibility": a batch-mate of another length changes logits in their last bits).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BatchRecord } from '../../src/contracts';
import { LocalModel } from '../../src/engines/local/local-model';
import { readQuestions } from '../../src/io/questions';
import { resolveOptions } from '../../src/options';
import { EMBEDDED } from '../../src/paths';
import { runPipeline } from '../../src/pipeline/pipeline';
import { Bm25Retriever } from '../../src/retrieval/bm25';

jest.setTimeout(300_000);

const root = mkdtempSync(join(tmpdir(), 'mempo-agent-example-'));
let local: LocalModel;

beforeAll(async () => {
  local = await LocalModel.load(EMBEDDED.model(), { load: { sessionOptions: { intraOpNumThreads: 1 } } });
});
afterAll(async () => {
  await local.dispose();
  rmSync(root, { recursive: true, force: true });
});

/** The example through collectEpisodes in a node process of its own (dist/ via the package's self-reference). */
function runExample(seed: number, perBatch: number, groupSize: number, tasksFile: string): Promise<{ records: BatchRecord[]; failed: unknown[] }> {
  return new Promise((res, rej) => {
    const child = spawn(process.execPath, [join(__dirname, 'run-agent-example.mjs'), String(seed), String(perBatch), String(groupSize), tasksFile], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => { out += d.toString(); });
    child.stderr.on('data', (d: Buffer) => { err += d.toString(); });
    child.on('error', rej);
    child.on('close', (code) => (code === 0 ? res(JSON.parse(out) as { records: BatchRecord[]; failed: unknown[] }) : rej(new Error(`driver exited ${code}: ${err}`))));
  });
}

it('gives the built-in pipeline\'s trajectories token for token under the same seed', async () => {
  const questions = readQuestions(EMBEDDED.split('train')).slice(0, 3);
  const seed = 11;
  const groupSize = 3;
  const perBatch = 2;
  const builtIn = await runPipeline({
    questions, generator: local, scorer: null, retriever: Bm25Retriever.fromJsonl(EMBEDDED.corpus()),
    options: resolveOptions({
      rollout: { groupSize, seed, schedule: 'continuous', maxGenerateBatch: 1, questionsPerBatch: perBatch },
      memory: { enabled: false },
    }),
  });
  const file = join(root, 'tasks.json');
  writeFileSync(file, JSON.stringify(questions));
  const agent = await runExample(seed, perBatch, groupSize, file);
  expect(agent.failed).toEqual([]);

  const key = (r: BatchRecord) => `${r.uid}/${r.sample}`;
  const mine = new Map(agent.records.map((r) => [key(r), r]));
  expect(agent.records).toHaveLength(questions.length * groupSize);
  let searched = 0;
  let tokens = 0;
  for (const b of builtIn.records) {
    const a = mine.get(key(b));
    expect(a).toBeDefined();
    expect({ k: key(b), prompt: a!.promptIds }).toEqual({ k: key(b), prompt: b.promptIds });
    expect({ k: key(b), response: a!.responseIds }).toEqual({ k: key(b), response: b.responseIds });
    expect({ k: key(b), mask: a!.responseMask }).toEqual({ k: key(b), mask: b.responseMask });
    // The sampler's float32 log-probs, through JSON on the agent's side: the same numbers.
    expect({ k: key(b), logp: a!.oldLogp }).toEqual({ k: key(b), logp: (b.oldLogp ?? []).map((x) => Math.max(x, -9999)) });
    searched += b.rounds.filter((r) => r.action === 'search').length;
    tokens += b.responseIds.length;
  }
  // the comparison covered tool rounds, not only one-round answers
  expect(searched).toBeGreaterThan(0);
  expect(tokens).toBeGreaterThan(100);
});
