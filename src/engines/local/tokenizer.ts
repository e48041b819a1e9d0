/**
 * Tokenizer and chat template, loaded from a local model directory with transformers.js.
 * Never reaches the network: files are read from disk and handed to the tokenizer constructor.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { MempoError } from '../../errors';
import { invalidArgument } from './errors';
import { readJson, requireDirectory } from './files';
import { loadTransformers, type TransformersTokenizer } from './esm';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool' | (string & {});
  content: string;
  /** Passed to the template when given (Qwen3's reads it instead of splitting the content at `</think>`). */
  reasoning_content?: string;
}

export interface ChatTemplateOptions {
  /** Append the assistant generation prompt (default true). */
  addGenerationPrompt?: boolean;
  /** A Jinja template to use instead of the model's own. */
  chatTemplate?: string;
}

export class Tokenizer {
  /** The directory the tokenizer was loaded from. */
  readonly dir: string;
  /** Number of ids the tokenizer can produce (base vocabulary plus added tokens). */
  readonly size: number;
  readonly eosTokenId: number | undefined;
  readonly padTokenId: number | undefined;
  readonly bosTokenId: number | undefined;
  private readonly tok: TransformersTokenizer;
  private readonly vocab: Map<string, number>;
  private readonly special: Set<number>;
  private readonly pieceCache = new Map<number, string>();

  private constructor(dir: string, tok: TransformersTokenizer) {
    this.dir = dir;
    this.tok = tok;
    this.vocab = tok.get_vocab();
    let max = -1;
    for (const id of this.vocab.values()) if (id > max) max = id;
    this.size = max + 1;
    this.eosTokenId = tok.eos_token_id ?? undefined;
    this.padTokenId = tok.pad_token_id ?? undefined;
    this.bosTokenId = tok.bos_token_id ?? undefined;
    this.special = new Set(tok.all_special_ids);
  }

  /**
   * Loads `tokenizer.json` and `tokenizer_config.json` (and `chat_template.jinja` when the config
   * has no template) from `dir`. A missing file is an error naming its path.
   */
  static async load(dir: string): Promise<Tokenizer> {
    if (typeof dir !== 'string' || dir.length === 0) throw invalidArgument('a directory path', 'dir', dir);
    const root = resolve(dir);
    requireDirectory(root, 'tokenizer directory');
    const tokenizerJson = readJson(join(root, 'tokenizer.json'), 'tokenizer file');
    const config = readJson(join(root, 'tokenizer_config.json'), 'tokenizer config');
    const jinja = join(root, 'chat_template.jinja');
    if (config['chat_template'] === undefined && existsSync(jinja)) {
      config['chat_template'] = readFileSync(jinja, 'utf8');
    }
    const transformers = await loadTransformers();
    const className = typeof config['tokenizer_class'] === 'string'
      ? config['tokenizer_class'].replace(/Fast$/, '')
      : 'PreTrainedTokenizer';
    const candidate = transformers[className];
    const Cls = (typeof candidate === 'function' ? candidate : transformers.PreTrainedTokenizer) as
      new (json: unknown, cfg: unknown) => TransformersTokenizer;
    let tok: TransformersTokenizer;
    try {
      tok = new Cls(tokenizerJson, config);
    } catch (err) {
      throw new MempoError('ERR_TOKENIZER', `Could not build the tokenizer from ${root}: ${(err as Error).message}`);
    }
    return new Tokenizer(root, tok);
  }

  /** Token ids of `text`. Special-token text (e.g. `<mem>`) maps to its single id. */
  encode(text: string, options: { addSpecialTokens?: boolean } = {}): number[] {
    if (typeof text !== 'string') throw invalidArgument('a string', 'text', text);
    return this.tok.encode(text, { add_special_tokens: options.addSpecialTokens ?? false });
  }

  decode(ids: ArrayLike<number>, options: { skipSpecialTokens?: boolean } = {}): string {
    const arr = Array.from(ids);
    if (arr.length === 0) return '';
    return this.tok.decode(arr, {
      skip_special_tokens: options.skipSpecialTokens ?? false,
      clean_up_tokenization_spaces: false,
    });
  }

  /** Text of one token id on its own (cached). */
  piece(id: number): string {
    let s = this.pieceCache.get(id);
    if (s === undefined) {
      s = this.tok.decode([id], { skip_special_tokens: false, clean_up_tokenization_spaces: false });
      this.pieceCache.set(id, s);
    }
    return s;
  }

  /** The id of a token string (e.g. `"</search>"`), or undefined when it is not one token. */
  tokenId(token: string): number | undefined {
    return this.vocab.get(token);
  }

  isSpecial(id: number): boolean {
    return this.special.has(id);
  }

  get chatTemplate(): string | undefined {
    const t = this.tok.chat_template;
    return typeof t === 'string' ? t : undefined;
  }

  /** Renders `messages` with the model's chat template and returns the text. */
  renderChat(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}): string {
    this.checkMessages(messages);
    if (options.chatTemplate === undefined && this.chatTemplate === undefined) {
      throw new MempoError(
        'ERR_TOKENIZER',
        `The tokenizer in ${this.dir} has no chat_template (tokenizer_config.json or chat_template.jinja)`,
      );
    }
    const turns = messages.map((m) => (m.reasoning_content === undefined
      ? { role: m.role, content: m.content }
      : { role: m.role, content: m.content, reasoning_content: m.reasoning_content }));
    const out = this.tok.apply_chat_template(turns, {
      tokenize: false,
      add_generation_prompt: options.addGenerationPrompt ?? true,
      ...(options.chatTemplate !== undefined ? { chat_template: options.chatTemplate } : {}),
    });
    return out as string;
  }

  /** Renders `messages` with the chat template and tokenises the result (prompt ids). */
  applyChatTemplate(messages: readonly ChatMessage[], options: ChatTemplateOptions = {}): number[] {
    return this.encode(this.renderChat(messages, options));
  }

  private checkMessages(messages: readonly ChatMessage[]): void {
    if (!Array.isArray(messages)) throw invalidArgument('an array of messages', 'messages', messages);
    messages.forEach((m, i) => {
      if (m === null || typeof m !== 'object' || typeof m.role !== 'string' || typeof m.content !== 'string'
        || (m.reasoning_content !== undefined && typeof m.reasoning_content !== 'string')) {
        throw invalidArgument('{ role: string, content: string }', `messages[${i}]`, m);
      }
    });
  }
}
