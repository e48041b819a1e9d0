/**
 * Tokenizer and chat template, loaded from a local model directory with @huggingface/tokenizers
 * (tokenizer.json: normalizer, pre-tokenizer, model, added tokens, decoder) and @huggingface/jinja
 * (the chat template): the two small packages transformers.js's PreTrainedTokenizer wraps, so
 * tokenizing needs neither transformers.js nor ONNX Runtime (`--server` rollouts, `mempo export`).
 * Special tokens and the template's variables follow that wrapper (transformers.js 4.x
 * tokenization_utils.js); its per-model subclasses only differ for encoder or speech models
 * (Whisper, VITS, translation language codes), none of which is a causal LM mempo can run.
 * Never reaches the network: files are read from disk and handed to the tokenizer constructor.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Tokenizer as HfTokenizer } from '@huggingface/tokenizers';
import type { Template } from '@huggingface/jinja';
import { MempoError } from '../../errors';
import { invalidArgument } from './errors';
import { readJson, requireDirectory } from './files';

interface TokenizerPackages {
  Tokenizer: new (tokenizerJson: object, config: object) => HfTokenizer;
  Template: new (template: string) => Template;
}
let packages: TokenizerPackages | undefined;

/** Loaded on first use, so that `require('mempo')` for the kernels loads neither package. */
function tokenizerPackages(): TokenizerPackages {
  if (packages === undefined) {
    /* eslint-disable @typescript-eslint/no-require-imports */
    packages = {
      Tokenizer: (require('@huggingface/tokenizers') as { Tokenizer: TokenizerPackages['Tokenizer'] }).Tokenizer,
      Template: (require('@huggingface/jinja') as { Template: TokenizerPackages['Template'] }).Template,
    };
    /* eslint-enable @typescript-eslint/no-require-imports */
  }
  return packages;
}

/** The special tokens a chat template may read by name (transformers.js passes the same ones). */
const TEMPLATE_TOKENS = ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token'] as const;

/** A token of tokenizer_config.json (a string, or an `AddedToken` object), or undefined when unset. */
function configToken(config: Record<string, unknown>, key: string, file: string): string | undefined {
  const v = config[key];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v === 'string') return v;
  const t = v as { __type?: unknown; content?: unknown };
  if (typeof v === 'object' && t.__type === 'AddedToken' && typeof t.content === 'string') return t.content;
  throw new MempoError('ERR_TOKENIZER', `${file}: ${key} must be a string or an AddedToken object, got ${JSON.stringify(v)}`);
}

/**
 * The model's chat template: a string, or (a list of named templates) the one named "default";
 * undefined when there is none.
 */
function defaultTemplate(value: unknown, file: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) {
    for (const t of value as { name?: unknown; template?: unknown }[]) {
      if (typeof t?.name !== 'string' || typeof t.template !== 'string') {
        throw new MempoError('ERR_TOKENIZER', `${file}: chat_template must be a string or a list of { name, template } strings`);
      }
    }
    return (value as { name: string; template: string }[]).find((t) => t.name === 'default')?.template;
  }
  throw new MempoError('ERR_TOKENIZER', `${file}: chat_template must be a string or a list of { name, template } strings`);
}

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
  /** The pad token, else eos (transformers' rule). */
  readonly padTokenId: number | undefined;
  readonly bosTokenId: number | undefined;
  /** The model's chat template (tokenizer_config.json, else chat_template.jinja), when it has one. */
  readonly chatTemplate: string | undefined;
  private readonly tok: HfTokenizer;
  private readonly vocab: Map<string, number>;
  private readonly special: Set<number>;
  /** The special tokens by name, as the chat template sees them. */
  private readonly templateTokens: Record<string, string> = {};
  private readonly templates = new Map<string, Template>();
  private readonly pieceCache = new Map<number, string>();

  private constructor(dir: string, tok: HfTokenizer, config: Record<string, unknown>, configFile: string) {
    this.dir = dir;
    this.tok = tok;
    this.vocab = tok.get_vocab();
    let max = -1;
    for (const id of this.vocab.values()) if (id > max) max = id;
    this.size = max + 1;
    const id = (token: string | undefined) => (token === undefined ? undefined : tok.token_to_id(token));
    this.eosTokenId = id(configToken(config, 'eos_token', configFile));
    this.padTokenId = id(configToken(config, 'pad_token', configFile) ?? configToken(config, 'eos_token', configFile));
    this.bosTokenId = id(configToken(config, 'bos_token', configFile));
    for (const key of TEMPLATE_TOKENS) {
      const t = configToken(config, key, configFile);
      if (t !== undefined) this.templateTokens[key] = t;
    }
    this.special = new Set([...tok.get_added_tokens_decoder().values()].filter((t) => t.special).map((t) => t.id));
    this.chatTemplate = defaultTemplate(config['chat_template'], configFile);
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
    const configFile = join(root, 'tokenizer_config.json');
    const config = readJson(configFile, 'tokenizer config');
    const jinja = join(root, 'chat_template.jinja');
    if (config['chat_template'] === undefined && existsSync(jinja)) {
      config['chat_template'] = readFileSync(jinja, 'utf8');
    }
    const { Tokenizer: Hf } = tokenizerPackages();
    let tok: HfTokenizer;
    try {
      tok = new Hf(tokenizerJson, config);
    } catch (err) {
      throw new MempoError('ERR_TOKENIZER', `Could not build the tokenizer from ${root}: ${(err as Error).message}`);
    }
    return new Tokenizer(root, tok, config, configFile);
  }

  /** Token ids of `text`. Special-token text (e.g. `<mem>`) maps to its single id. */
  encode(text: string, options: { addSpecialTokens?: boolean } = {}): number[] {
    if (typeof text !== 'string') throw invalidArgument('a string', 'text', text);
    return this.tok.encode(text, { add_special_tokens: options.addSpecialTokens ?? false }).ids;
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
    const source = options.chatTemplate ?? this.chatTemplate!;
    let template = this.templates.get(source);
    if (template === undefined) {
      try {
        template = new (tokenizerPackages().Template)(source);
      } catch (err) {
        throw new MempoError('ERR_TOKENIZER', `The chat template${options.chatTemplate === undefined ? ` of ${this.dir}` : ''} does not parse: ${(err as Error).message}`);
      }
      this.templates.set(source, template);
    }
    // The variables transformers.js's apply_chat_template passes (tools and documents unset).
    return template.render({
      messages: turns,
      add_generation_prompt: options.addGenerationPrompt ?? true,
      tools: null,
      documents: null,
      ...this.templateTokens,
    });
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
