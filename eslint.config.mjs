// ESLint flat config: the recommended JS and typescript-eslint rule sets. Not type-aware: tsc
// already type-checks in `npm run lint` (with --noUnusedLocals --noUnusedParameters), and the
// type-aware sets took 3x as long here (44 s vs 15 s on 2 cores).
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import globals from 'globals';
import tseslint from 'typescript-eslint';

export default defineConfig(
  {
    ignores: ['dist/', 'dist-tools/', 'build/', 'build-*/', 'prebuilds/', 'node_modules/', 'out/', '.bench-out/', 'training/', 'models/', 'data/'],
  },
  // A disable comment that no longer suppresses anything is an error: stale ones hide nothing but mislead.
  { linterOptions: { reportUnusedDisableDirectives: 'error' } },
  js.configs.recommended,
  tseslint.configs.recommended,
  // `new Function` is eval: the dynamic-import shims that need it say so with a disable comment.
  { rules: { 'no-new-func': 'error' } },
  // no-require-imports stays on in src/ and tools/: each lazy load of an optional or native module
  // (onnxruntime-node, @huggingface/transformers, the addon) carries its own disable comment.
  {
    files: ['**/*.ts', '**/*.mts', '**/*.cts'],
    languageOptions: { globals: { ...globals.node } },
    rules: {
      // `_`-prefixed names mark parameters kept for a signature (callbacks, interface methods).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
    },
  },
  {
    // Tests reload modules inside jest.isolateModules and load built addons by path.
    files: ['test/**/*.ts'],
    languageOptions: { globals: { ...globals.node, ...globals.jest } },
    // Parsed JSON bodies of fake servers are read field by field: `any` is the honest type there.
    rules: { '@typescript-eslint/no-require-imports': 'off', '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    // CommonJS scripts: jest config, jest environment/setup files, build scripts.
    files: ['**/*.js', '**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { ...globals.node } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    files: ['**/*.mjs'],
    languageOptions: { sourceType: 'module', globals: { ...globals.node } },
  },
);
