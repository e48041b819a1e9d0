/**
 * `AgentMemory` and `prepare_prompt` (docs/algorithm.md §7): the record log of one trajectory and
 * the compressed context an agent conditions on under the `memory` policy.
 */
import { SYSTEM_PROMPT, type ChatMessage } from './chat';

export type MemoryRecordType = 'prompt' | 'llm_gen' | 'search_results' | 'webpage';

export interface MemoryRecord {
  type: MemoryRecordType;
  /** Full text. */
  text: string;
  /** What a later prompt shows of a tool result (docs/algorithm.md §7 defaults: search = full text, webpage = first 100 chars of the chunk). */
  shortText: string;
}

export interface AgentMemoryOptions {
  /** Tool results kept in the window (default 1: only the most recent round). */
  windowToolResults?: number;
  /** Characters of a search result kept in its shortText; null (default) keeps the full text. */
  searchShortTextChars?: number | null;
  /** Characters of a webpage kept in its shortText (default 100). */
  webpageShortTextChars?: number | null;
  /** The system message (default: the agent protocol's SYSTEM_PROMPT). */
  systemPrompt?: string;
}

const TOOL_TYPES: ReadonlySet<string> = new Set(['search_results', 'webpage']);

function cut(text: string, n: number | null): string {
  return n === null || text.length <= n ? text : text.slice(0, n);
}

export class AgentMemory {
  readonly records: MemoryRecord[] = [];
  readonly windowToolResults: number;
  readonly searchShortTextChars: number | null;
  readonly webpageShortTextChars: number | null;
  readonly systemPrompt: string;

  constructor(question: string, options: AgentMemoryOptions = {}) {
    this.windowToolResults = options.windowToolResults ?? 1;
    if (!Number.isInteger(this.windowToolResults) || this.windowToolResults < 1) {
      throw new RangeError(`Expected a positive integer for windowToolResults but received ${String(options.windowToolResults)}`);
    }
    this.searchShortTextChars = options.searchShortTextChars === undefined ? null : options.searchShortTextChars;
    this.webpageShortTextChars = options.webpageShortTextChars === undefined ? 100 : options.webpageShortTextChars;
    this.systemPrompt = options.systemPrompt ?? SYSTEM_PROMPT;
    this.records.push({ type: 'prompt', text: question, shortText: question });
  }

  /** The question (`memory[0]`). */
  get question(): string {
    return this.records[0]!.text;
  }

  addGeneration(text: string): void {
    this.records.push({ type: 'llm_gen', text, shortText: text });
  }

  addSearchResults(text: string, shortText?: string): void {
    this.records.push({ type: 'search_results', text, shortText: shortText ?? cut(text, this.searchShortTextChars) });
  }

  addWebpage(text: string, shortText?: string): void {
    this.records.push({ type: 'webpage', text, shortText: shortText ?? cut(text, this.webpageShortTextChars) });
  }

  /** Appends any record (an unknown type is an error when the prompt is prepared, as in the notes). */
  add(record: MemoryRecord): void {
    this.records.push(record);
  }

  /**
   * docs/algorithm.md §7: system + question, then every record after the stop point: scanning backward from
   * the newest record, stop at the (windowToolResults + 1)-th tool result from the end, or at
   * the prompt. `llm_gen` → assistant (full text); tool results → user: the newest record, a tool
   * result that has just arrived, with its full text (ASearcher shows a page chunk whole in the
   * round it arrives), every earlier one with its shortText.
   */
  preparePrompt(): ChatMessage[] {
    const messages: ChatMessage[] = [
      { role: 'system', content: this.systemPrompt },
      { role: 'user', content: this.question },
    ];
    const recs = this.records;
    let flag = 0;
    let stop = 0;
    for (let i = recs.length - 1; i >= 0; i--) {
      const r = recs[i]!;
      if (r.type === 'prompt') flag = this.windowToolResults + 1;
      else if (TOOL_TYPES.has(r.type)) flag += 1;
      else if (r.type !== 'llm_gen') throw new Error(`Unknown record type: ${String(r.type)} (record ${i})`);
      if (flag === this.windowToolResults + 1) {
        stop = i;
        break;
      }
    }
    for (let j = stop + 1; j < recs.length; j++) {
      const r = recs[j]!;
      if (TOOL_TYPES.has(r.type)) messages.push({ role: 'user', content: j === recs.length - 1 ? r.text : r.shortText });
      else if (r.type === 'llm_gen') messages.push({ role: 'assistant', content: r.text });
      else throw new Error(`Unknown record type: ${String(r.type)} (record ${j})`);
    }
    return messages;
  }
}
