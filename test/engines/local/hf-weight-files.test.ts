/**
 * Which files of a Hugging Face directory are its weights (weightFiles): the shards the index
 * names, else model.safetensors — never another *.safetensors beside them, such as a training
 * checkpoint's learner.safetensors (optimiser state), which a reload once took for weights.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkExportFresh, hasSafetensors, weightFiles } from '../../../src/engines/local/hf-export';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mempo-weight-files-'));
  writeFileSync(join(dir, 'config.json'), '{}');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

test('model.safetensors alone is the weights; learner.safetensors beside it is not', () => {
  writeFileSync(join(dir, 'model.safetensors'), 'x');
  writeFileSync(join(dir, 'learner.safetensors'), 'y');
  expect(weightFiles(dir)).toEqual(['model.safetensors']);
  expect(hasSafetensors(dir)).toBe(true);
});

test('a checkpoint with only learner.safetensors has no weights', () => {
  writeFileSync(join(dir, 'learner.safetensors'), 'y');
  writeFileSync(join(dir, 'pytorch_model.bin'), 'pickle');
  expect(weightFiles(dir)).toEqual([]);
  expect(hasSafetensors(dir)).toBe(false);
});

test('an index: its shards, once each, sorted; a model.safetensors beside it is not read', () => {
  writeFileSync(join(dir, 'model.safetensors'), 'x');
  writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify({ metadata: {}, weight_map: { b: 'model-00002-of-00002.safetensors', a: 'model-00001-of-00002.safetensors', c: 'model-00002-of-00002.safetensors' } }));
  expect(weightFiles(dir)).toEqual(['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors']);
});

test('an index naming a path outside the directory, or no shard, is refused naming the file and field', () => {
  const index = join(dir, 'model.safetensors.index.json');
  writeFileSync(index, JSON.stringify({ weight_map: { 'lm_head.weight': '../elsewhere.safetensors' } }));
  expect(() => weightFiles(dir)).toThrow(`${index}: weight_map["lm_head.weight"] must be a .safetensors file name inside ${dir}, got "../elsewhere.safetensors"`);
  writeFileSync(index, JSON.stringify({ weight_map: { w: 'model.bin' } }));
  expect(() => weightFiles(dir)).toThrow('weight_map["w"] must be a .safetensors file name');
  writeFileSync(index, JSON.stringify({ weight_map: {} }));
  expect(() => weightFiles(dir)).toThrow(`${index}: "weight_map" names no shard`);
  writeFileSync(index, JSON.stringify({ weight_map: [] }));
  expect(() => weightFiles(dir)).toThrow(`${index}: "weight_map" must map tensor names to shard file names`);
});

test('an export is not stale for a learner.safetensors beside its weights', () => {
  writeFileSync(join(dir, 'model.safetensors'), 'x');
  mkdirSync(join(dir, 'onnx'));
  writeFileSync(join(dir, 'onnx', 'export.json'), JSON.stringify({ source: { 'model.safetensors': { bytes: 1, sha256: 'unused: not newer' } } }));
  writeFileSync(join(dir, 'learner.safetensors'), 'y');
  expect(() => checkExportFresh(dir)).not.toThrow();
  // a shard the export was not made from is still stale
  writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify({ weight_map: { a: 'model.safetensors', b: 'extra.safetensors' } }));
  writeFileSync(join(dir, 'extra.safetensors'), 'z');
  expect(() => checkExportFresh(dir)).toThrow(/stale: extra\.safetensors is not among the files it was made from/);
});
