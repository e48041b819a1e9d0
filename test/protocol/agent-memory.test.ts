/** AgentMemory.prepare_prompt (docs/algorithm.md §7). */
import { renderChat, renderMemoryContext, SYSTEM_PROMPT } from '../../src/protocol/chat';
import { AgentMemory, type MemoryRecord } from '../../src/protocol/agent-memory';

describe('AgentMemory.prepare_prompt', () => {
  test("the notes' example: at round 5 only llm_gen_4 and search_4 follow the question", () => {
    const m = new AgentMemory('original question', { systemPrompt: 'You are a helpful assistant.' });
    for (let k = 1; k <= 4; k++) {
      m.addGeneration(`memory ${k} ...`);
      m.addSearchResults(`<information>search result ${k} (full)</information>`);
    }
    expect(m.records.map((r) => r.type)).toEqual(['prompt', 'llm_gen', 'search_results', 'llm_gen', 'search_results', 'llm_gen', 'search_results', 'llm_gen', 'search_results']);
    expect(m.preparePrompt()).toEqual([
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: 'original question' },
      { role: 'assistant', content: 'memory 4 ...' },
      { role: 'user', content: '<information>search result 4 (full)</information>' },
    ]);
  });

  test('before any tool result everything after the prompt is kept', () => {
    const m = new AgentMemory('q');
    expect(m.preparePrompt()).toEqual([{ role: 'system', content: SYSTEM_PROMPT }, { role: 'user', content: 'q' }]);
    m.addGeneration('g1');
    m.addSearchResults('s1');
    expect(m.preparePrompt().slice(2)).toEqual([{ role: 'assistant', content: 'g1' }, { role: 'user', content: 's1' }]);
    m.addGeneration('g2');
    // Scanning back: g2 (skipped), s1 (1st tool result), g1, prompt → stop at the prompt.
    expect(m.preparePrompt().slice(2).map((x) => x.content)).toEqual(['g1', 's1', 'g2']);
  });

  test('windowToolResults widens the window', () => {
    const m = new AgentMemory('q', { windowToolResults: 2 });
    for (let k = 1; k <= 3; k++) {
      m.addGeneration(`g${k}`);
      m.addSearchResults(`s${k}`);
    }
    expect(m.preparePrompt().slice(2).map((x) => x.content)).toEqual(['g2', 's2', 'g3', 's3']);
  });

  test('shortText: search results keep the full text, webpages their first 100 characters (both options)', () => {
    const long = 'w'.repeat(250);
    const m = new AgentMemory('q', { windowToolResults: 3 });
    m.addGeneration('g');
    m.addSearchResults(long);
    m.addWebpage(long);
    m.addGeneration('g2');
    const msgs = m.preparePrompt();
    expect(msgs[3]!.content).toBe(long);
    expect(msgs[4]!.content).toBe('w'.repeat(100));
    const m2 = new AgentMemory('q', { windowToolResults: 3, searchShortTextChars: 10, webpageShortTextChars: null });
    m2.addSearchResults(long);
    m2.addWebpage(long);
    m2.addGeneration('g');
    expect(m2.preparePrompt().slice(2).map((x) => x.content.length)).toEqual([10, 250, 1]);
  });

  test('a tool result is shown whole in the round it arrives, afterwards by its shortText', () => {
    const page = 'p'.repeat(300);
    const m = new AgentMemory('q', { windowToolResults: 2, searchShortTextChars: 5 });
    m.addGeneration('g1');
    m.addWebpage(page, 'short page');
    expect(m.preparePrompt().slice(2).map((x) => x.content)).toEqual(['g1', page]);
    m.addGeneration('g2');
    expect(m.preparePrompt().slice(2).map((x) => x.content)).toEqual(['g1', 'short page', 'g2']);
    m.addSearchResults('search result');
    expect(m.preparePrompt().slice(2).map((x) => x.content)).toEqual(['g1', 'short page', 'g2', 'search result']);
    m.addGeneration('g3');
    m.addSearchResults('next result');
    // The window of 2 has left the page: nothing of it remains.
    expect(m.preparePrompt().slice(2).map((x) => x.content)).toEqual(['g2', 'searc', 'g3', 'next result']);
  });

  test('an unknown record type is an error', () => {
    const m = new AgentMemory('q');
    m.add({ type: 'video', text: 'x', shortText: 'x' } as unknown as MemoryRecord);
    expect(() => m.preparePrompt()).toThrow('Unknown record type: video (record 1)');
  });

  test("renders to the agent protocol's memory-policy context", () => {
    const m = new AgentMemory('Who?');
    m.addGeneration('<mem>none</mem><think>t</think><search>a</search>');
    m.addSearchResults('<information>one</information>');
    m.addGeneration('<mem>f</mem><think>t</think><search>b</search>');
    m.addSearchResults('<information>two</information>');
    expect(renderChat(m.preparePrompt(), true)).toBe(renderMemoryContext('Who?', '<mem>f</mem><think>t</think><search>b</search>', '<information>two</information>'));
  });

  test('rejects a window below 1', () => {
    expect(() => new AgentMemory('q', { windowToolResults: 0 })).toThrow('Expected a positive integer for windowToolResults but received 0');
  });
});
