#!/usr/bin/env node
/**
 * World generator CLI.
 *   node dist/world/cli.js [generate] [--seed N] [--out data/world] [--model models/mempo-tiny]
 *   node dist/world/cli.js tokenizer [--seed N] [--model models/mempo-tiny]
 */
import * as fs from 'fs';
import * as path from 'path';
import { buildKB, renderCorpus, relationsOf, factObject, objectName } from './kb';
import { buildTokenizerJson, tokenizerConfigJson } from './tokenizer';
import { SYSTEM_PROMPT, renderObservation, EMPTY_MEMORY } from '../agent/protocol';

export const DEFAULT_SEED = 20260529;
export const VOCAB_SIZE = 2048;
export const MAX_POSITIONS = 2048;

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? (process.argv[i + 1] as string) : dflt;
}

export function tokenizerTexts(seed: number): { texts: string[]; syllables: Map<string, string> } {
  const kb = buildKB(seed);
  const syllables = new Map<string, string>();
  for (const e of kb.entities) {
    const words = e.name.split(' ');
    const syls = e.syllabified.split(' ');
    words.forEach((w, i) => {
      const s = syls[i];
      if (s && s.includes('|')) syllables.set(w, s);
    });
  }
  const corpus = renderCorpus(kb);
  const texts: string[] = [SYSTEM_PROMPT, EMPTY_MEMORY];
  texts.push(renderObservation(corpus.slice(0, 50)));
  for (const d of corpus) texts.push(`Doc 1 (${d.title}): ${d.contents}`);
  for (const e of kb.entities) {
    for (const r of relationsOf(e.type)) {
      const o = factObject(kb, e.id, r.id);
      if (o === undefined) continue;
      const on = objectName(kb, r.id, o);
      texts.push(`${r.question(e.name)} ${r.query(e.name)} ${r.think(e.name)} The answer is ${on}. ${on}, ${on}`);
      if (r.nounPhrase) texts.push(r.nounPhrase(e.name));
    }
  }
  return { texts, syllables };
}

function writeTokenizer(seed: number, modelDir: string): void {
  const { texts, syllables } = tokenizerTexts(seed);
  const tok = buildTokenizerJson(texts, { vocabSize: VOCAB_SIZE, syllables });
  fs.mkdirSync(modelDir, { recursive: true });
  fs.writeFileSync(path.join(modelDir, 'tokenizer.json'), JSON.stringify(tok, null, 1) + '\n');
  fs.writeFileSync(path.join(modelDir, 'tokenizer_config.json'), JSON.stringify(tokenizerConfigJson(MAX_POSITIONS), null, 2) + '\n');
  const n = Object.keys((tok as { model: { vocab: object } }).model.vocab).length;
  console.log(`tokenizer: ${n} tokens -> ${modelDir}`);
}

function main(): void {
  const cmd = process.argv[2] && !process.argv[2].startsWith('--') ? process.argv[2] : 'generate';
  const seed = Number(arg('seed', String(DEFAULT_SEED)));
  const modelDir = arg('model', 'models/mempo-tiny');
  if (cmd === 'tokenizer') {
    writeTokenizer(seed, modelDir);
    return;
  }
  throw new Error(`unknown command ${cmd}`);
}

if (require.main === module) main();
