/**
 * The published package: `npm pack` (whose prepack builds dist/ and prebuilds/), then install the
 * tarball into a fresh project where every compiler and make fail loudly, and check that the
 * prebuilt addon loads (backend 'native') and agrees with the JS path, from CommonJS and ESM.
 * Runs once, in the native project.
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { EXPECTED_BACKEND } from './helpers';

const root = path.resolve(__dirname, '..');
const run = EXPECTED_BACKEND === 'native' ? describe : describe.skip;

run('npm package (pack, install without a compiler, load the prebuild)', () => {
  let work = '';
  beforeAll(() => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'mempo-pack-'));
  });
  afterAll(() => {
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  it('installs from the tarball and loads the native prebuild with no compiler on PATH', () => {
    const packed = execFileSync('npm', ['pack', '--json', '--pack-destination', work], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    const info = JSON.parse(packed.slice(packed.indexOf('['))) as { filename: string; files: { path: string }[] }[];
    const files = info[0]!.files.map((f) => f.path);
    // Exactly the prebuilds the README claims: linux-x64 and linux-arm64 (glibc); every other platform builds or uses the JS twin.
    expect(files.filter((f) => f.startsWith('prebuilds/')).sort()).toEqual(['prebuilds/linux-arm64/mempo.node', 'prebuilds/linux-x64/mempo.node']);
    expect(files).toContain('dist/index.mjs');
    expect(files).toContain('dist/index.d.ts');
    expect(files).toContain('learner/mempo_learner/__main__.py'); // the torch learner `mempo train` spawns
    expect(files.some((f) => f.startsWith('test/') || f.startsWith('src/'))).toBe(false);
    for (const f of ['LICENSE', 'CHANGELOG.md', 'README.md', 'scripts/install.js']) expect(files).toContain(f);
    // The embedded world: search questions and corpus, and the page tool's pages, URL corpus and page questions (issue 32).
    expect(files.filter((f) => f.startsWith('data/')).sort()).toEqual([
      'corpus-pages.jsonl', 'corpus.jsonl', 'dev-pages.jsonl', 'dev.jsonl', 'meta-pages.json', 'meta.json', 'pages.jsonl',
      'test-pages.jsonl', 'test.jsonl', 'train-pages.jsonl', 'train.jsonl',
    ].map((f) => `data/world/${f}`));
    // Every docs/*.md that --help or an error message of the shipped code cites is in the package.
    const cited = new Set<string>();
    for (const f of files.filter((x) => x.startsWith('dist/') && x.endsWith('.js'))) {
      for (const m of fs.readFileSync(path.join(root, f), 'utf8').matchAll(/docs\/[a-z-]+\.md/g)) cited.add(m[0]);
    }
    expect(cited.size).toBeGreaterThan(3);
    expect([...cited].filter((d) => !files.includes(d))).toEqual([]);
    // Every relative link of a shipped Markdown page ([text](target), images too) leads to a file or
    // folder the user installed: repository-only pages (docs/experiments.md, bench/, training/) are named, not linked.
    const broken: string[] = [];
    for (const page of files.filter((f) => f.endsWith('.md'))) {
      // Code (fenced blocks, inline spans) holds no links: `[Doc 1](url)` there is an example of text.
      const text = fs.readFileSync(path.join(root, page), 'utf8').replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
      for (const m of text.matchAll(/\]\(([^)\s#]+)[^)]*\)/g)) {
        const target = m[1]!;
        if (/^[a-z]+:/i.test(target)) continue; // https:, mailto:
        const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(page), target)).replace(/\/$/, '');
        if (!files.some((f) => f === resolved || f.startsWith(`${resolved}/`))) broken.push(`${page}: ${target}`);
      }
    }
    expect(broken).toEqual([]);

    // Compilers and make that fail loudly: an install that tries to compile cannot pass quietly.
    const shims = path.join(work, 'no-compilers');
    fs.mkdirSync(shims);
    for (const tool of ['g++', 'gcc', 'cc', 'c++', 'clang', 'clang++', 'make', 'cmake']) {
      fs.writeFileSync(path.join(shims, tool), `#!/bin/sh\necho "COMPILER CALLED: ${tool} $*" >&2\nexit 127\n`, { mode: 0o755 });
    }
    const app = path.join(work, 'app');
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', version: '1.0.0', private: true }));
    const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${shims}:${process.env.PATH}`, ONNXRUNTIME_NODE_INSTALL: 'skip', MEMPO_BACKEND: '' };
    delete env.MEMPO_NATIVE_BINDING;
    const log = execFileSync('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', path.join(work, info[0]!.filename)], {
      cwd: app,
      env,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    expect(log).not.toMatch(/COMPILER CALLED/);
    expect(fs.existsSync(path.join(app, 'node_modules', 'mempo', 'build'))).toBe(false);

    const check = `
      const assert = require('assert');
      const m = require('mempo');
      assert.strictEqual(m.backend(), 'native');
      const V = 1000, R = 3;
      const logits = new Float32Array(R * V).map((_, i) => Math.sin(i) * 20);
      const t = new Int32Array([0, 500, 999]);
      const a = m.gatherLogProbs(logits, t, R, V);
      m.setBackend('js');
      const b = m.gatherLogProbs(logits, t, R, V);
      for (let i = 0; i < R; i++) assert.ok(Math.abs(a[i] - b[i]) <= 1e-5 + 1e-5 * Math.abs(b[i]), a[i] + ' vs ' + b[i]);
      console.log('cjs ok', require.resolve('mempo'));`;
    expect(execFileSync('node', ['-e', check], { cwd: app, env, encoding: 'utf8' })).toMatch(/^cjs ok/);
    const esm = `
      import { backend, emCheck } from 'mempo';
      import mempo from 'mempo';
      if (backend() !== 'native' || emCheck('The Paris', ['paris']) !== 1 || mempo.backend !== backend) process.exit(3);
      console.log('esm ok');`;
    expect(execFileSync('node', ['--input-type=module', '-e', esm], { cwd: app, env, encoding: 'utf8' })).toMatch(/^esm ok/);
  });

  it('installs the kernels and the pipeline without ONNX Runtime or transformers.js (--omit=optional) in at most 60 MB', () => {
    // The tarball the test above packed, else pack it here (prepack builds dist/ and both prebuilds).
    let tgz = fs.readdirSync(work).find((f) => /^mempo-.*\.tgz$/.test(f));
    if (tgz === undefined) {
      const packed = execFileSync('npm', ['pack', '--json', '--pack-destination', work], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
      tgz = (JSON.parse(packed.slice(packed.indexOf('['))) as { filename: string }[])[0]!.filename;
    }
    const app = path.join(work, 'kernels-only');
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'kernels-only', version: '1.0.0', private: true }));
    const env: NodeJS.ProcessEnv = { ...process.env, MEMPO_BACKEND: '' };
    delete env.MEMPO_NATIVE_BINDING;
    delete env.ONNXRUNTIME_NODE_INSTALL; // nothing of ONNX Runtime is installed, so nothing to skip
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--omit=optional', path.join(work, tgz)], { cwd: app, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    const nm = path.join(app, 'node_modules');
    for (const heavy of ['onnxruntime-node', 'onnxruntime-web', '@huggingface/transformers', 'sharp']) expect([heavy, fs.existsSync(path.join(nm, heavy))]).toEqual([heavy, false]);
    const kib = Number(execFileSync('du', ['-sk', nm], { encoding: 'utf8' }).split('\t')[0]);
    expect(kib).toBeGreaterThan(1024); // the package itself is in there
    expect(kib).toBeLessThanOrEqual(60 * 1024);

    const range = (JSON.parse(fs.readFileSync(path.join(nm, 'mempo', 'package.json'), 'utf8')) as { optionalDependencies: Record<string, string> }).optionalDependencies['onnxruntime-node']!;
    const check = `
      const assert = require('assert');
      const m = require('mempo');
      assert.deepStrictEqual(Object.keys(require.cache).filter((f) => /onnxruntime|@huggingface/.test(f)), []);
      assert.strictEqual(m.backend(), 'native');
      const B = 4, T = 6, uids = ['q', 'q', 'q', 'q'], scores = [1, 0, 1, 0];
      const mask = new Uint8Array(B * T).fill(1);
      const run = () => {
        const advantages = m.grpoOutcomeAdvantage(scores, uids, mask, T);
        const oldLogp = new Float32Array(B * T).map((_, i) => -0.1 - 0.01 * i);
        const logp = oldLogp.map((x, i) => x + 0.05 * Math.sin(i));
        const { loss, grad } = m.ppoPolicyLoss({ logp, oldLogp, advantages, mask, rows: B, cols: T });
        return [...advantages, loss, ...grad];
      };
      const a = run();
      m.setBackend('js');
      const b = run();
      assert.ok(a.some((x) => x !== 0));
      for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i] - b[i]) <= 1e-5 + 1e-5 * Math.abs(b[i]), i + ': ' + a[i] + ' vs ' + b[i]);
      (async () => {
        const err = await m.LocalModel.load(m.EMBEDDED.model()).then(() => null, (e) => e);
        assert.ok(err instanceof m.MempoError && err.code === 'ERR_MISSING_DEPENDENCY', String(err));
        assert.ok(err.message.includes('npm install onnxruntime-node@${range}'), err.message);
        // The pipeline on the user's own engines, with the embedded tokenizer.
        const tok = await m.Tokenizer.load(m.EMBEDDED.model());
        const q = m.readQuestions(m.EMBEDDED.split('dev'))[0];
        const gen = new m.ScriptedGenerator(tok, (tag) => (tag.round === 1
          ? '<mem>none</mem><think>Find it.</think><search>' + q.question + '</search>'
          : '<mem>found</mem><think>Done.</think><answer>' + q.golds[0] + '</answer>'));
        const scorer = { score: async (items) => items.map((it) => new Float32Array(it.targetIds.length).fill(-0.5)) };
        const { records } = await m.runPipeline({ questions: [q], generator: gen, scorer, retriever: m.Bm25Retriever.fromJsonl(m.EMBEDDED.corpus()), options: { rollout: { groupSize: 2 } } });
        assert.deepStrictEqual(records.map((r) => [r.rounds.length, r.score]), [[2, 1], [2, 1]]);
        assert.deepStrictEqual(Object.keys(require.cache).filter((f) => /onnxruntime-node|transformers/.test(f)), []);
        console.log('kernels-only ok');
      })().catch((e) => { console.error(e); process.exit(1); });`;
    expect(execFileSync('node', ['-e', check], { cwd: app, env, encoding: 'utf8' })).toMatch(/^kernels-only ok/);

    // The published types resolve without onnxruntime-node (ONNX Runtime's types come from onnxruntime-common), no skipLibCheck.
    fs.writeFileSync(path.join(app, 'consumer.ts'), "import { KVCache, LocalModel, memoryRewards, type LoadOptions } from 'mempo';\nconst o: LoadOptions = { executionProviders: ['cpu'] };\nexport const used = [KVCache, LocalModel, memoryRewards, o];\n");
    fs.writeFileSync(path.join(app, 'tsconfig.json'), JSON.stringify({
      compilerOptions: { strict: true, module: 'node16', moduleResolution: 'node16', noEmit: true, typeRoots: [path.join(root, 'node_modules', '@types')], types: ['node'] },
      files: ['consumer.ts'],
    }));
    execFileSync(process.execPath, [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', app], { cwd: app, encoding: 'utf8' });
  });
});
