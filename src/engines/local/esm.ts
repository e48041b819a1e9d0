/**
 * Loading @huggingface/transformers from CommonJS.
 *
 * transformers 4.x ships a CommonJS build under the `node`/`require` export condition, so a plain
 * `require` works from compiled dist/ and under ts-jest (where a native dynamic `import()` is not
 * available without --experimental-vm-modules). Should a future release be ESM-only, `require`
 * fails with ERR_REQUIRE_ESM and we fall back to a real dynamic import that TypeScript cannot
 * rewrite into `require` (it is built with `new Function`).
 */
// eslint-disable-next-line no-new-func
const dynamicImport = new Function('specifier', 'return import(specifier)') as (s: string) => Promise<unknown>;

let cached: Promise<TransformersModule> | undefined;

/** The subset of @huggingface/transformers the runtime uses. */
export interface TransformersModule {
  PreTrainedTokenizer: new (tokenizerJSON: unknown, tokenizerConfig: unknown) => TransformersTokenizer;
  [name: string]: unknown;
}

/** The subset of transformers.js' PreTrainedTokenizer the runtime uses. */
export interface TransformersTokenizer {
  encode(text: string, options?: { add_special_tokens?: boolean }): number[];
  decode(ids: number[], options?: { skip_special_tokens?: boolean; clean_up_tokenization_spaces?: boolean }): string;
  apply_chat_template(messages: unknown[], options?: Record<string, unknown>): unknown;
  get_vocab(): Map<string, number>;
  convert_tokens_to_ids(token: string): number | undefined;
  chat_template?: unknown;
  eos_token_id?: number;
  pad_token_id?: number;
  bos_token_id?: number;
  eos_token?: string;
  pad_token?: string;
  all_special_ids: number[];
}

export function loadTransformers(): Promise<TransformersModule> {
  if (cached === undefined) {
    cached = (async () => {
      let mod: unknown;
      try {
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        mod = require('@huggingface/transformers');
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (code !== 'ERR_REQUIRE_ESM' && code !== 'ERR_PACKAGE_PATH_NOT_EXPORTED') throw err;
        mod = await dynamicImport('@huggingface/transformers');
      }
      const m = mod as Partial<TransformersModule> & { default?: Partial<TransformersModule> };
      const resolved = typeof m.PreTrainedTokenizer === 'function' ? m : m.default;
      if (resolved === undefined || typeof resolved.PreTrainedTokenizer !== 'function') {
        throw new Error('@huggingface/transformers loaded but exports no PreTrainedTokenizer');
      }
      return resolved as TransformersModule;
    })();
    cached.catch(() => {
      cached = undefined;
    });
  }
  return cached;
}
