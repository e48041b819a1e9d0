/**
 * No import circle in src/ (issue 45: cli/run.ts ↔ export/run-dir/run-output was one). Type-only
 * imports count as edges (see import-graph.ts). The detector is first shown to find circles in a
 * written-out tree, so an empty answer for src/ means something.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { findCycles, importGraph, specifiersOf } from './import-graph';

const src = path.resolve(__dirname, '..', '..', 'src');
const rel = (circle: string[], root: string): string => circle.map((f) => path.relative(root, f)).join(' -> ');

describe('import graph', () => {
  let dir = '';
  const write = (files: Record<string, string>): void => {
    for (const [name, text] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
      fs.writeFileSync(path.join(dir, name), text);
    }
  };
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mempo-cycles-'));
  });
  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('reads every form of import, multi-line and type-only included', () => {
    const text = [
      "import {\n  a,\n  b,\n} from './one';",
      "import type { T } from './two';",
      "import './three';",
      "export { c } from './four';",
      "export * from './five';",
      "import six = require('./six');",
      "const seven = require('./seven');",
      "void import('./eight');",
      "let nine: import('./nine').N;",
      "// import { no } from './comment';",
      "const s = \"import { no } from './string'\";",
    ].join('\n');
    expect(specifiersOf('x.ts', text)).toEqual(['./one', './two', './three', './four', './five', './six', './seven', './eight', './nine']);
  });

  it('finds a circle through a type-only import and names it as a path', () => {
    write({
      'cli/run.ts': "import { exportBatch } from './export';\nexport interface RunOptions { out: string }",
      'cli/export.ts': "import type { RunOptions } from './run';\nexport const exportBatch = (o: RunOptions) => o;",
      'cli/main.ts': "import './run';",
    });
    const { edges, unresolved } = importGraph(dir);
    expect(unresolved).toEqual([]);
    expect(findCycles(edges).map((c) => rel(c, dir))).toEqual([
      `${path.join('cli', 'export.ts')} -> ${path.join('cli', 'run.ts')} -> ${path.join('cli', 'export.ts')}`,
    ]);
  });

  it('finds a longer circle through directories and index files, and a file that imports itself', () => {
    write({
      'a.ts': "export * from './pipeline';",
      'pipeline/index.ts': "export { b } from '../b.js';",
      'b.ts': "import { a } from './a';\nexport const b = a;",
      'self.ts': "import { x } from './self';\nexport const x = 1;",
      'leaf.ts': "import { b } from './b';",
    });
    const found = findCycles(importGraph(dir).edges).map((c) => rel(c, dir)).sort();
    expect(found).toEqual([`a.ts -> ${path.join('pipeline', 'index.ts')} -> b.ts -> a.ts`, 'self.ts -> self.ts']);
  });

  it('reports a relative import that names no file, and finds no circle in a chain', () => {
    write({ 'a.ts': "import './b';\nimport './missing';", 'b.ts': "import 'zod';" });
    const { edges, unresolved } = importGraph(dir);
    expect(unresolved).toEqual(['a.ts: ./missing']);
    expect(findCycles(edges)).toEqual([]);
  });
});

describe('src/', () => {
  const { edges, unresolved } = importGraph(src);

  it('resolves every relative import to a file (so no edge is silently dropped)', () => {
    expect(unresolved).toEqual([]);
    // The graph is the real one: the CLI's entry reaches the commands.
    expect(edges.get(path.join(src, 'cli', 'main.ts'))).toEqual(expect.arrayContaining([path.join(src, 'cli', 'run.ts')]));
  });

  it('has no import circle, type-only imports included', () => {
    expect(findCycles(edges).map((c) => rel(c, src))).toEqual([]);
  });
});
