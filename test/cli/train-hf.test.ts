/**
 * `mempo train --model HFDIR` end to end on the CPU (issue 44, item 4), per architecture of the
 * test zoo (test/python/zoo.py: Qwen3, Llama 3, Qwen2.5 with their real vocabularies), exported by
 * `python3 -m mempo_learner.export_onnx`, trained by the spawned learner's transformers path:
 * metrics, checkpoints whose weights moved, a SIGKILL + `--resume` equal to the uninterrupted run
 * (within this test, on this machine), the final weights loaded by transformers and by a real
 * `mempo serve` process whose greedy log-probs transformers recomputes, and a `--server` run whose
 * in-process server takes each step's weights through /update_weights_from_disk.
 *
 * The zoo's models answer nothing (random weights, every score 0): the PPO advantage is 0, so what
 * moves the policy here is AdamW's decoupled weight decay (set large) and then the KL term pulling
 * back toward the reference. That exercises the whole loop (log-probs, KL, backward, optimiser,
 * save, engine reload) but not the sign of the advantage, which test/cli/train.test.ts covers on
 * the embedded model.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import OpenAI from 'openai';
import { killOnceExists, runCli } from './run-cli';
import { describeWithTransformers, exportHf, PY, ROOT, zoo } from '../engines/local/hf-helpers';
import { LocalModel } from '../../src/engines/local/local-model';
import { CausalLM } from '../../src/engines/local/causal-lm';
import { createCompletionsServer, listen } from '../../src/servers/completions-server';

const CLI = resolve(ROOT, 'dist', 'cli', 'main.js');
const REF = resolve(ROOT, 'test', 'engines', 'local', 'hf_reference.py');
// Tiny: 2 questions × 2 samples, 2 rounds of at most 12 tokens; a large learning rate and weight
// decay so that two steps move the weights measurably (see the file comment); one ONNX thread.
const TINY = ['--questions-per-step', '2', '-n', '2', '--max-turns', '2', '--max-round-tokens', '12', '--max-response-tokens', '48',
  '--eval-every', '0', '--threads', '1', '--quiet', '--no-report', '--lr', '0.01', '--weight-decay', '1', '--kl-coef', '0.1', '--python', PY];

type Line = Record<string, unknown> & { step: number; wallMs: Record<string, number> };
const lines = (dir: string): Line[] => readFileSync(join(dir, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Line);
const withoutTimes = (ls: Line[]) => ls.map(({ wallMs: _w, ...rest }) => rest);

/** transformers' log_softmax of each item's tokens after its prompt (hf_reference.py score: loads DIR with from_pretrained). */
function transformersLogprobs(dir: string, items: { prompt: number[]; tokens: number[] }[], out: string): number[][] {
  writeFileSync(`${out}.request.json`, JSON.stringify({ items }));
  const r = spawnSync(PY, [REF, 'score', dir, `${out}.request.json`, out], { encoding: 'utf8', timeout: 300_000 });
  if (r.status !== 0) throw new Error(`hf_reference.py score ${dir} failed (exit ${r.status}):\n${r.stderr.slice(-4000)}`);
  return (JSON.parse(readFileSync(out, 'utf8')) as { logprobs: number[][] }).logprobs;
}

const maxAbsDiff = (a: readonly number[], b: readonly number[]) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i]!)), a.length === b.length ? 0 : Infinity);

/** A real `mempo serve` process on a free port; resolves with its URL once it says it listens. */
function serve(dir: string): Promise<{ url: string; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, [CLI, 'serve', '--model', dir, '--port', '0', '--threads', '1'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  return new Promise((res, rej) => {
    child.stderr.on('data', (c: Buffer) => {
      err += c.toString();
      const m = /listening on (http:\/\/\S+?)\s/.exec(err);
      if (m) res({ url: m[1]!, stop: () => new Promise<void>((r) => { child.once('exit', () => r()); child.kill('SIGTERM'); }) });
    });
    child.once('exit', (code) => rej(new Error(`mempo serve exited ${code}:\n${err}`)));
  });
}

describeWithTransformers('mempo train --model HFDIR', () => {
  const work = mkdtempSync(join(tmpdir(), 'mempo-train-hf-'));
  afterAll(() => rmSync(work, { recursive: true, force: true }));

  describe.each(['qwen3', 'llama3', 'qwen2.5'])('%s', (arch) => {
    let dir: string;
    const ref = join(work, `${arch}-ref`);
    beforeAll(() => {
      dir = zoo(arch, join(work, arch));
      exportHf(dir);
    }, 600_000);

    it('trains: metrics per step, checkpoints with the onnx export beside the weights, the policy moved', async () => {
      const r = await runCli(['train', '--model', dir, '--out', ref, '--steps', '2', ...TINY]);
      expect(r.err).toBe('');
      expect(r.code).toBe(0);
      const ls = lines(ref);
      expect(ls.map((l) => l.step)).toEqual([1, 2]);
      for (const l of ls) {
        expect(l['trajectories']).toBe(4);
        expect((l['tokens'] as { trained: number }).trained).toBeGreaterThan(0);
        expect(Number.isFinite(l['loss'])).toBe(true);
      }
      // Step 1 starts at the reference (KL 0); weight decay moved the weights, so step 2 sees a KL and a gradient.
      expect(ls[1]!['klRef'] as number).toBeGreaterThan(0);
      expect(ls[1]!['gradNorm'] as number).toBeGreaterThan(0);
      for (const s of [1, 2]) {
        const ck = join(ref, 'checkpoints', `step-${s}`);
        for (const f of ['model.safetensors', 'config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json', 'learner.json', 'learner.safetensors', 'trainer.json']) {
          expect(existsSync(join(ck, f))).toBe(true);
        }
        // the engine's reload wrote the export of the step's weights beside them (no Python, no re-export)
        expect(readdirSync(join(ck, 'onnx')).sort()).toEqual(['export.json', 'model.onnx']);
      }
    }, 420_000);

    it('the final weights load in transformers and in `mempo serve`, whose greedy log-probs transformers recomputes within 1e-3; they differ from the base model\'s', async () => {
      const final = join(ref, 'checkpoints', 'step-2');
      const server = await serve(final);
      try {
        const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'none' });
        const prompts = arch === 'llama3' ? [[128000, 9906, 1917, 0, 12345], [9906, 11, 1917]] : [[151644, 872, 198, 9707, 1879], [9707, 11, 1879]];
        const items: { prompt: number[]; tokens: number[] }[] = [];
        const served: number[][] = [];
        for (const prompt of prompts) {
          const c = await client.completions.create({ model: (await client.models.list()).data[0]!.id, prompt, max_tokens: 8, temperature: 0, logprobs: 0, return_token_ids: true } as OpenAI.CompletionCreateParamsNonStreaming);
          const choice = c.choices[0] as OpenAI.CompletionChoice & { token_ids: number[] };
          expect(choice.token_ids.length).toBeGreaterThan(0);
          items.push({ prompt, tokens: choice.token_ids });
          served.push(choice.logprobs!.token_logprobs!);
        }
        const want = transformersLogprobs(final, items, join(work, `${arch}-final.json`));
        for (let i = 0; i < items.length; i++) expect(maxAbsDiff(served[i]!, want[i]!)).toBeLessThan(1e-3);
        const base = transformersLogprobs(dir, items, join(work, `${arch}-base.json`));
        expect(Math.max(...items.map((_, i) => maxAbsDiff(base[i]!, want[i]!)))).toBeGreaterThan(1e-3);
      } finally {
        await server.stop();
      }
    }, 300_000);

    it('killed with SIGKILL during step 2 and resumed, it repeats the uninterrupted run: metrics and final weights', async () => {
      const out = join(work, `${arch}-killed`);
      const child = spawn(process.execPath, [CLI, 'train', '--model', dir, '--out', out, '--steps', '2', ...TINY], { stdio: 'ignore' });
      await killOnceExists(child, join(out, 'checkpoints', 'step-1', 'trainer.json'));
      await new Promise((r) => child.once('exit', r));
      expect(lines(out).at(-1)!.step).toBe(1);
      const r = await runCli(['train', '--model', dir, '--out', out, '--steps', '2', ...TINY, '--resume']);
      expect(r.err).toBe('');
      expect(r.code).toBe(0);
      expect(withoutTimes(lines(out))).toEqual(withoutTimes(lines(ref)));
      // One machine, one run of this test: the arithmetic is the same, so the weights are bit for bit.
      expect(readFileSync(join(out, 'checkpoints', 'step-2', 'model.safetensors')).equals(readFileSync(join(ref, 'checkpoints', 'step-2', 'model.safetensors')))).toBe(true);
    }, 420_000);

    // qwen3 only: the reload the server does is the engine's reload that every arch's first test ran (checkpoints/step-N/onnx).
    if (arch === 'qwen3') it('with --server (an in-process mempo serve), the server takes the step\'s weights from the saved directory', async () => {
      const model = await LocalModel.load(dir);
      const server = createCompletionsServer(model, { modelName: arch });
      const url = await listen(server, 0);
      const out = join(work, `${arch}-served`);
      try {
        const r = await runCli(['train', '--model', dir, '--out', out, '--steps', '1', ...TINY, '--server', url]);
        expect(r.err).toBe('');
        expect(r.code).toBe(0);
        const item = { contextIds: [9707, 11, 1879, 0, 12345], targetIds: [42, 7, 100] };
        const ck = await CausalLM.load(join(out, 'checkpoints', 'step-1'));
        const base = await CausalLM.load(dir);
        try {
          const want = (await ck.scoreTargets([item]))[0]!;
          expect(Array.from(want)).not.toEqual(Array.from((await base.scoreTargets([item]))[0]!));
          expect(Array.from((await model.score([item]))[0]!)).toEqual(Array.from(want));
        } finally {
          await ck.dispose();
          await base.dispose();
        }
      } finally {
        server.closeAllConnections();
        server.close();
        await model.dispose();
      }
    }, 300_000);
  });
});
