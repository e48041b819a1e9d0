/**
 * The engine client against strict vLLM- and SGLang-shaped fakes (test/fakes/, written from those
 * projects' protocol definitions), end to end through the built CLI: `mempo rollout --server URL
 * --model <tokenizer-only dir>` exits 0 with every trajectory well formed and the memory rewards
 * the fake's prompt log-probs imply (test/fakes/rollout-check.ts).
 */
import { join } from 'node:path';
import { Tokenizer } from '../../../src/engines/local/tokenizer';
import { startVllmFake, type FakeServer } from '../../fakes/vllm-fake';
import { startSglangFake } from '../../fakes/sglang-fake';
import { fakeModel, rolloutAgainst, ROOT, tokenizerOnlyDir } from '../../fakes/rollout-check';

jest.setTimeout(120_000);

describe('mempo rollout --server against strict fakes (embedded tokenizer, tokenizer-only directory)', () => {
  const from = join(ROOT, 'models', 'mempo-tiny');
  let tok: Tokenizer;
  let dir: string;
  const servers: FakeServer[] = [];
  beforeAll(async () => {
    tok = await Tokenizer.load(from);
    dir = tokenizerOnlyDir(from);
  });
  afterAll(async () => {
    for (const s of servers) await s.close();
  });

  test('vLLM: an alias other than the first --served-model-name, max_model_len from /v1/models', async () => {
    const server = await startVllmFake(fakeModel(tok), { servedModelNames: ['served-a', 'served-b'], maxModelLen: 2048 });
    servers.push(server);
    await rolloutAgainst(server, 'vllm', dir, tok, ['--server-model', 'served-b']);
    const gen = server.requests.filter((b) => b['prompt_logprobs'] === undefined);
    const score = server.requests.filter((b) => b['prompt_logprobs'] !== undefined);
    expect(gen.length).toBeGreaterThan(0);
    expect(score.length).toBeGreaterThan(0);
    expect(new Set(server.requests.map((b) => b['model']))).toEqual(new Set(['served-b']));
  });

  test('SGLang /generate', async () => {
    const server = await startSglangFake(fakeModel(tok), { maxModelLen: 2048 });
    servers.push(server);
    await rolloutAgainst(server, 'sglang', dir, tok);
    expect(server.requests.some((b) => b['logprob_start_len'] !== undefined)).toBe(true);
  });
});
