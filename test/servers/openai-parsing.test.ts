/**
 * The pieces of the OpenAI endpoints that need no model: tool calls read back from Qwen/Hermes
 * output (vLLM's hermes parser's rules), the text a stream may show before a sequence ends, and
 * the tap's log-probs and alternatives, checked against a softmax written out here.
 */
import { parseToolCalls } from '../../src/servers/chat-tools';
import { safeText, TokenTap, type TapToken } from '../../src/servers/openai-stream';

describe('parseToolCalls', () => {
  test('content before the calls, each block a call with its arguments as JSON text', () => {
    const out = parseToolCalls('Let me check.\n<tool_call>\n{"name": "search", "arguments": {"query": "Ana Roe"}}\n</tool_call>\n<tool_call>\n{"name": "access", "arguments": {"url": "https://w/a", "n": 2}}\n</tool_call>');
    expect(out!.content).toBe('Let me check.\n');
    expect(out!.toolCalls.map((c) => [c.type, c.function.name, JSON.parse(c.function.arguments)])).toEqual([
      ['function', 'search', { query: 'Ana Roe' }],
      ['function', 'access', { url: 'https://w/a', n: 2 }],
    ]);
    expect(new Set(out!.toolCalls.map((c) => c.id)).size).toBe(2);
    out!.toolCalls.forEach((c) => expect(c.id).toMatch(/^call_[0-9a-f]{24}$/));
  });

  test('only calls: content null; a last block cut at end-of-turn still counts; missing arguments are {}', () => {
    const out = parseToolCalls('<tool_call>\n{"name": "now"}\n</tool_call><tool_call>{"name": "search", "arguments": {"q": "x"}}');
    expect(out!.content).toBeNull();
    expect(out!.toolCalls.map((c) => [c.function.name, c.function.arguments])).toEqual([['now', '{}'], ['search', '{"q":"x"}']]);
  });

  test('no call, or a malformed one: null (the whole output stays content)', () => {
    expect(parseToolCalls('<search>Ana Roe</search>')).toBeNull();
    expect(parseToolCalls('<tool_call>{"name": "search", "arguments": {"q": </tool_call>')).toBeNull();
    expect(parseToolCalls('<tool_call>{"arguments": {}}</tool_call>')).toBeNull();
    expect(parseToolCalls('<tool_call>["search"]</tool_call>')).toBeNull();
    expect(parseToolCalls('<tool_call>{"name": "a"}</tool_call> and then text')).toBeNull();
  });
});

describe('safeText', () => {
  test('holds back a possible start of a mark, cuts at a whole one, drops an incomplete character', () => {
    expect(safeText('The answer </sea', ['</search>'])).toBe('The answer ');
    expect(safeText('The answer <', ['</search>', '<tool_call>'])).toBe('The answer ');
    expect(safeText('x</search> y', ['</search>'])).toBe('x');
    expect(safeText('ok <tool_call>{"name"', ['<tool_call>'])).toBe('ok ');
    expect(safeText('caf\uFFFD', [])).toBe('caf');
    expect(safeText('plain text', ['</search>'])).toBe('plain text');
    expect(safeText('a <b', ['<tool_call>'])).toBe('a <b');
  });
});

describe('TokenTap', () => {
  /** log softmax(row / T)[i] in float64, written out (the raw softmax when greedy). */
  const logSoftmax = (row: number[], T: number) => {
    const z = row.map((v) => v / (T === 0 ? 1 : T));
    const m = Math.max(...z);
    const lse = m + Math.log(z.reduce((a, v) => a + Math.exp(v - m), 0));
    return z.map((v) => v - lse);
  };

  test.each([1, 0.7, 0])('temperature %s: each token once, in order, with its log-prob and the top alternatives', (T) => {
    const rows = [[0.5, 2, -1, 2, 0], [3, 1, 0, -2, 1.5], [0, 0, 0, 4, -4]];
    const ids = [1, 4, 3];
    const got: TapToken[] = [];
    let finished = false;
    const tap = new TokenTap(1, T, true, 2, (seq, toks, result) => {
      expect(seq).toBe(0);
      got.push(...toks);
      finished ||= result !== null;
    });
    // As generate calls it: row k before token k is sampled, with the ids sampled so far.
    rows.forEach((r, k) => tap.processor(Float32Array.from(r), 0, ids.slice(0, k)));
    const last = logSoftmax(rows[2]!.map((v) => Math.fround(v)), T)[3]!;
    tap.finish(0, { tokenIds: ids, logprobs: Float32Array.from([0, 0, last]), finishReason: 'length', promptLength: 3 });
    expect(finished).toBe(true);
    expect(got.map((t) => t.id)).toEqual(ids);
    got.forEach((t, k) => {
      const ref = logSoftmax(rows[k]!, T);
      expect(t.logprob).toBeCloseTo(ref[ids[k]!]!, 5);
      // Ties keep the lower id first; most likely first.
      const order = ref.map((v, i) => [i, v] as [number, number]).sort((a, b) => b[1] - a[1] || a[0] - b[0]).slice(0, 2);
      expect(t.top!.map(([i]) => i)).toEqual(order.map(([i]) => i));
      t.top!.forEach(([i, v]) => expect(v).toBeCloseTo(ref[i]!, 5));
    });
  });

  test('without log-probs asked, the row is only read for the alternatives, never changed', () => {
    const row = Float32Array.from([1, 2, 3]);
    const copy = Float32Array.from(row);
    const tap = new TokenTap(2, 1, false, 0, () => undefined);
    tap.processor(row, 1, []);
    expect(row).toEqual(copy);
  });
});
