/**
 * The package root keeps the stable kernel API: trainers import these names, so a refactor that
 * drops or renames one (or exports a type where a function was) fails here. The list is written
 * out, not read from src/index.ts.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as api from '../src';

const KERNEL_FUNCTIONS = [
  'gatherLogProbs',
  'answerProbability',
  'memoryRewards',
  'grpoOutcomeAdvantage',
  'memoryAdvantage',
  'finalAdvantage',
  'groupNormalize',
  'ppoPolicyLoss',
  'extractSolution',
  'normalizeAnswer',
  'emCheck',
  'f1Score',
  'itemF1',
  'validateFormat',
  'computeScore',
  'backend',
  'setBackend',
  'nativeLoadErrors',
  'nativeInfo',
] as const;

describe('package root exports', () => {
  const exported = api as unknown as Record<string, unknown>;

  it.each(KERNEL_FUNCTIONS)('exports the kernel function %s', (name) => {
    expect(typeof exported[name]).toBe('function');
  });

  it('exports EMBEDDED: the model, corpus and question splits inside the package', () => {
    const e = exported.EMBEDDED as { model(): string; corpus(): string; corpusPages(): string; pages(): string; pagesMeta(): string; split(n: string): string; learner(): string };
    // the paging the embedded pages were built for, which the command line's embedded world uses
    expect((JSON.parse(readFileSync(e.pagesMeta(), 'utf8')) as { paging: unknown }).paging).toEqual({ pageMaxChars: 250_000, pageChunkChars: 1000, pageMaxChunks: 10 });
    for (const p of [join(e.model(), 'model.onnx'), e.corpus(), e.split('train'), e.split('dev'), e.split('test'), join(e.learner(), 'mempo_learner', '__main__.py')]) {
      expect(existsSync(p)).toBe(true);
    }
    // the page world: its corpus names each document's page, and that page is in the pages file
    expect([e.corpusPages(), e.pages(), e.split('test-pages')].map((p) => p.split(/[\\/]/).slice(-3).join('/')))
      .toEqual(['data/world/corpus-pages.jsonl', 'data/world/pages.jsonl', 'data/world/test-pages.jsonl']);
    const first = JSON.parse(readFileSync(e.corpusPages(), 'utf8').split('\n')[0]!) as { url: string };
    expect(readFileSync(e.pages(), 'utf8').includes(`"url":"${first.url}"`)).toBe(true);
  });

  it('exports the loss and metric enums as lists', () => {
    expect(exported.AGG_MODES).toEqual(['token-mean', 'seq-mean-token-sum', 'seq-mean-token-mean']);
    expect(exported.KL_TYPES).toEqual(['k1', 'k2', 'k3', 'low_var_kl']);
    expect(exported.METRICS).toEqual(['em', 'f1', 'item-f1']);
  });
});
