/**
 * `mempo rollout --server URL --server-api vllm|sglang --model <tokenizer-only dir>` against a
 * strict fake (test/fakes/vllm-fake.ts, sglang-fake.ts), spawned from the built CLI: every
 * trajectory must be well formed and each memory reward equal to what the fake's own prompt
 * log-probs imply (docs/algorithm.md §4), computed here from the fake's numbers.
 *
 * The canned agent: round 1 and 2 search, round 3 answers the gold. The fake's log-prob of a
 * prompt token is `-0.1 - 0.05 · (observations in the prefix) - 0.001 · (id mod 10)`, so the full
 * context of round r (r - 1 observations) and the memory context (prompt + the round's mem, no
 * observation) give different answer probabilities, all above τ = ln 0.5.
 */
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { FakeModel, FakeServer } from './vllm-fake';

export const ROOT = resolve(__dirname, '..', '..');
export const CLI = join(ROOT, 'dist', 'cli', 'main.js');

export interface Codec {
  encode(text: string): number[];
  decode(ids: readonly number[]): string;
  readonly size: number;
  readonly eosTokenId: number | undefined;
}

export const QUESTIONS = [
  { id: 'fq1', question: 'In which country is Mamek?', golds: ['Thersekle'] },
  { id: 'fq2', question: 'Who published The Hollow Winter?', golds: ['Faithhe Works'] },
];

const OBS = '</information>';
const count = (s: string, sub: string) => s.split(sub).length - 1;

/** Observations after the question (the system prompt may name the tag too). */
function observations(text: string): number {
  const q = QUESTIONS.map((x) => text.indexOf(x.question)).reduce((a, b) => (b >= 0 && (a < 0 || b < a) ? b : a), -1);
  return q < 0 ? 0 : count(text.slice(q), OBS);
}

export const tokenLogprob = (obs: number, id: number) => -0.1 - 0.05 * obs - 0.001 * (id % 10);

/** The canned rounds as text, by round (1-based), for the question in the prompt. */
export function cannedRound(promptText: string): string {
  const q = QUESTIONS.find((x) => promptText.includes(x.question))!;
  const r = observations(promptText) + 1;
  if (r === 1) return '<mem>none</mem><think>Search first.</think><search>' + q.question + '</search>';
  if (r === 2) return '<mem>searched once</mem><think>Search again.</think><search>' + q.question + '</search>';
  return '<mem>searched twice</mem><think>I know it.</think><answer>' + q.golds[0] + '</answer>';
}

export function fakeModel(codec: Codec): FakeModel {
  const eos = codec.eosTokenId === undefined ? [] : [codec.eosTokenId];
  return {
    vocabSize: codec.size,
    eosTokenIds: eos,
    decode: (ids) => codec.decode(ids),
    complete: (p) => ({ ids: [...codec.encode(cannedRound(codec.decode(p))), ...eos] }),
    promptLogprob: (prefix, id) => tokenLogprob(observations(codec.decode(prefix)), id),
  };
}

/** A model directory with only the tokenizer files (no config.json, no ONNX file). */
export function tokenizerOnlyDir(from: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'mempo-tok-'));
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(from, f), join(dir, f));
  return dir;
}

export function runCli(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((res) => {
    const proc = spawn(process.execPath, [CLI, ...args], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    proc.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    proc.once('exit', (code) => res({ code, stderr }));
  });
}

interface Round { index: number; action: string | null; answer: string | null; violations: unknown[]; memReward: number | null; pFull: number | null; pMem: number | null; memSpan: unknown }
interface Rec { uid: string; error: string | null; excluded: boolean; doneReason: string; score: number; golds: string[]; rounds: Round[]; responseIds: number[]; responseMask: number[]; advantages: number[] }

/** Runs the rollout against `server` and checks the batch; returns the records. */
export async function rolloutAgainst(server: FakeServer, api: 'vllm' | 'sglang', tokDir: string, codec: Codec, extra: string[] = []): Promise<Rec[]> {
  if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run npm run build:ts first`);
  const dir = mkdtempSync(join(tmpdir(), 'mempo-fake-'));
  const questions = join(dir, 'q.jsonl');
  writeFileSync(questions, QUESTIONS.map((q) => JSON.stringify(q)).join('\n') + '\n');
  const out = join(dir, 'out');
  const { code, stderr } = await runCli([
    'rollout', '--questions', questions, '--limit', 'none', '-n', '2', '--max-turns', '4', '--model', tokDir,
    '--server', server.url, '--server-api', api, '--server-retries', '0', '--out', out, '--quiet', '--seed', '3', ...extra,
  ]);
  if (code !== 0) throw new Error(`mempo rollout exited ${code}: ${stderr}`);
  const recs = readFileSync(join(out, 'batch.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Rec);
  checkRecords(recs, codec);
  return recs;
}

/** P = exp(mean logp over the gold's tokens), gold tokenised on its own (docs/algorithm.md §4). */
function expectedP(gold: string, obs: number, codec: Codec): number {
  const ids = codec.encode(gold);
  return Math.exp(ids.reduce((a, id) => a + tokenLogprob(obs, id), 0) / ids.length);
}

function checkRecords(recs: Rec[], codec: Codec): void {
  if (recs.length !== QUESTIONS.length * 2) throw new Error(`${recs.length} records`);
  for (const r of recs) {
    const where = `${r.uid}: `;
    const fail = (m: string) => { throw new Error(where + m + ' ' + JSON.stringify(r.rounds)); };
    if (r.error !== null || r.excluded) fail(`error ${r.error}`);
    if (r.doneReason !== 'answer' || r.score !== 1) fail(`doneReason ${r.doneReason}, score ${r.score}`);
    if (r.responseIds.length !== r.responseMask.length || r.advantages.length !== r.responseIds.length) fail('ragged arrays');
    if (r.rounds.map((x) => x.action).join() !== 'search,search,answer') fail('actions');
    if (r.rounds[2]!.answer !== r.golds[0]) fail('answer');
    for (const x of r.rounds) {
      if (x.violations.length > 0) fail(`round ${x.index} violations`);
      if (x.memSpan === null) fail(`round ${x.index} has no mem span`);
      if (x.index === 1) {
        if (x.memReward !== null) fail('round 1 has a memory reward');
        continue;
      }
      const pFull = expectedP(r.golds[0]!, x.index - 1, codec);
      const pMem = expectedP(r.golds[0]!, 0, codec);
      const close = (a: number | null, b: number) => a !== null && Math.abs(a - b) < 1e-5;
      if (!close(x.pFull, pFull) || !close(x.pMem, pMem) || !close(x.memReward, pMem - pFull)) {
        fail(`round ${x.index}: pFull ${x.pFull} (expected ${pFull}), pMem ${x.pMem} (expected ${pMem}), memReward ${x.memReward}`);
      }
    }
  }
}
