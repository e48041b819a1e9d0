/**
 * `mempo train --resume` against run directories that must not be continued as they are
 * (docs/train.md "Resume"): no complete checkpoint (refused, metrics kept; --force starts over
 * saying what it replaces), other training data or settings (refused naming each setting with
 * both values, before the learner starts), a corrupt newest checkpoint (named, moved aside, the
 * previous one used), none that verifies (refused naming the files), and the temp directories
 * of a save that was killed (removed, and only those).
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from './run-cli';
import { describeWithTorch } from '../helpers';
import { EMBEDDED } from '../../src/paths';

const TINY = ['--limit', '8', '--questions-per-step', '1', '-n', '2', '--eval-every', '0', '--max-turns', '2', '--threads', '1'];
const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

type Line = Record<string, unknown> & { step: number };
const metrics = (out: string): Line[] => readFileSync(join(out, 'metrics.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Line);
const withoutTimes = (ls: Line[]) => ls.map(({ wallMs: _w, ...rest }) => rest);

describeWithTorch('mempo train --resume guards', () => {
  const root = mkdtempSync(join(tmpdir(), 'mempo-resume-guard-'));
  const base = join(root, 'base');
  const evalFile = join(root, 'dev.jsonl');
  const args = (out: string, ...more: string[]) => ['train', '--out', out, '--steps', '2', ...TINY, '--eval-file', evalFile, ...more];
  let n = 0;
  /** A copy of the finished two-step run (checkpoints step-1 and step-2). */
  const copy = () => {
    const out = join(root, `copy-${n++}`);
    cpSync(base, out, { recursive: true });
    return out;
  };
  const ckpt = (out: string, step: number) => join(out, 'checkpoints', `step-${step}`);

  beforeAll(async () => {
    cpSync(EMBEDDED.split('dev'), evalFile);
    const r = await runCli([...args(base), '--quiet']);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    for (const s of [1, 2]) expect(existsSync(join(ckpt(base, s), 'trainer.json'))).toBe(true);
  }, 180_000);
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  describe('no complete checkpoint', () => {
    it('is refused naming the directory, and metrics.jsonl is left as it was', async () => {
      const out = copy();
      for (const s of [1, 2]) rmSync(join(ckpt(out, s), 'trainer.json'));
      const before = readFileSync(join(out, 'metrics.jsonl'), 'utf8');
      const r = await runCli([...args(out), '--resume', '--quiet']);
      expect(r.code).toBe(1);
      expect(r.err).toBe(`error: --resume: no complete checkpoint exists in ${out} (a checkpoints/step-N/ with trainer.json); it holds metrics.jsonl (steps 1–2), checkpoints/step-1 (incomplete), checkpoints/step-2 (incomplete), train-report.html: nothing to continue from; pass --force to start over\n`);
      expect(readFileSync(join(out, 'metrics.jsonl'), 'utf8')).toBe(before);
      expect(existsSync(join(out, '.lock'))).toBe(false);
    });

    it('an empty or missing directory is refused too (a mistyped --out starts nothing)', async () => {
      const out = join(root, 'nothing-here');
      const r = await runCli([...args(out), '--resume', '--quiet']);
      expect(r.code).toBe(1);
      expect(r.err).toBe(`error: --resume: no complete checkpoint exists in ${out} (a checkpoints/step-N/ with trainer.json): nothing to continue from; pass --force to start over\n`);
    });

    it('with --force it starts over, saying what it replaces, and repeats the run', async () => {
      const out = copy();
      for (const s of [1, 2]) rmSync(join(ckpt(out, s), 'trainer.json'));
      const r = await runCli([...args(out), '--resume', '--force']);
      expect(r.code).toBe(0);
      expect(r.err).toContain(`mempo train: --force: removed metrics.jsonl (steps 1–2), checkpoints/step-1 (incomplete), checkpoints/step-2 (incomplete), train-report.html of the earlier run in ${out}\n`);
      expect(withoutTimes(metrics(out))).toEqual(withoutTimes(metrics(base)));
    }, 120_000);
  });

  describe('other training data or settings are refused, naming each with both values, before the learner starts', () => {
    const model = join(root, 'model-copy');
    const corpus = join(root, 'corpus.jsonl');
    const otherEval = join(root, 'dev-other.jsonl');
    beforeAll(() => {
      cpSync(EMBEDDED.model(), model, { recursive: true });
      cpSync(EMBEDDED.corpus(), corpus);
      cpSync(EMBEDDED.split('dev'), otherEval);
    });
    const cases: Array<[string, () => string[], () => string]> = [
      // The run trains in the embedded page world (docs/rollout.md "The embedded world").
      ['--split dev', () => ['--split', 'dev'], () => `questions: ${JSON.stringify([EMBEDDED.split('train'), EMBEDDED.split('train-pages')])} → ${JSON.stringify(EMBEDDED.split('dev'))}`],
      ['--limit 3', () => ['--limit', '3'], () => 'limit: 8 → 3'],
      ['--offset 1', () => ['--offset', '1'], () => 'offset: 0 → 1'],
      ['--shuffle', () => ['--shuffle'], () => 'shuffle: false → true'],
      ['--model', () => ['--model', model], () => `model: ${JSON.stringify(EMBEDDED.model())} → ${JSON.stringify(model)}`],
      ['--corpus', () => ['--corpus', corpus], () => `retriever: ${JSON.stringify(EMBEDDED.corpusPages())} → ${JSON.stringify(corpus)}`],
      ['--retriever', () => ['--retriever', 'http://127.0.0.1:9'], () => `retriever: ${JSON.stringify(EMBEDDED.corpusPages())} → "http://127.0.0.1:9"`],
      ['--no-pages', () => ['--no-pages'], () => `pages: ${JSON.stringify(EMBEDDED.pages())} → (none)`],
      ['--eval-file', () => ['--eval-file', otherEval], () => `evalFile: ${JSON.stringify(evalFile)} → ${JSON.stringify(otherEval)}`],
      ['-n 3', () => ['-n', '3'], () => 'pipeline.rollout.groupSize: 2 → 3'],
      ['--lr', () => ['--lr', '0.001'], () => 'train.optim.lr: 0.0001 → 0.001'],
    ];
    it.each(cases)('%s', async (_name, more, named) => {
      const out = copy();
      const before = readFileSync(join(out, 'metrics.jsonl'), 'utf8');
      const r = await runCli([...args(out), '--resume', '--quiet', ...more()]);
      expect(r.code).toBe(1);
      expect(r.err).toMatch(new RegExp(`^error: --resume: (a setting differs|\\d+ settings differ) from the run in ${esc(join(ckpt(out, 2), 'trainer.json'))} \\(only --steps may change on --resume\\): .*; pass the same settings, or --force without --resume to start over\\n$`));
      expect(r.err).toContain(named());
      expect(r.err).not.toContain('learner');
      expect(readFileSync(join(out, 'metrics.jsonl'), 'utf8')).toBe(before);
    });

    it('the same eval file with other questions in it is refused (the data is recorded, not only its path)', async () => {
      const out = copy();
      // The same questions in reverse order: the dev slice (a fixed shuffle of the file) holds others.
      writeFileSync(evalFile, `${readFileSync(evalFile, 'utf8').trim().split('\n').reverse().join('\n')}\n`);
      try {
        const r = await runCli([...args(out), '--resume', '--quiet']);
        expect(r.code).toBe(1);
        expect(r.err).toMatch(/: data\.dev: "[0-9a-f]{64}" → "[0-9a-f]{64}"; pass the same settings/);
      } finally {
        cpSync(EMBEDDED.split('dev'), evalFile);
      }
    });
  });

  describe('a corrupt checkpoint', () => {
    it('a truncated model.onnx in the newest: named, moved aside, and the run resumes from the previous one with the uninterrupted metrics', async () => {
      const out = copy();
      const bytes = statSync(join(ckpt(out, 2), 'model.onnx')).size;
      truncateSync(join(ckpt(out, 2), 'model.onnx'), 1000);
      const r = await runCli([...args(out), '--resume', '--quiet']);
      expect(r.err).toBe(
        `warning: ${ckpt(out, 2)} does not verify (${join(ckpt(out, 2), 'model.onnx')} is 1000 bytes, trainer.json recorded ${bytes}); moved to ${ckpt(out, 2)}.corrupt\n`
        + `warning: resuming from step 1 (${ckpt(out, 1)}), the newest complete checkpoint that verifies; the steps after it are redone\n`,
      );
      expect(r.code).toBe(0);
      expect(withoutTimes(metrics(out))).toEqual(withoutTimes(metrics(base)));
      expect(statSync(join(`${ckpt(out, 2)}.corrupt`, 'model.onnx')).size).toBe(1000); // kept, not deleted
      expect(existsSync(join(ckpt(out, 2), 'trainer.json'))).toBe(true); // step 2 redone
    }, 120_000);

    it("learner state with one byte changed (same size): its sha256 against manifest.json is named", async () => {
      const out = copy();
      // The learner's state: what the manifest lists beyond the model directory the engines load.
      const listed = Object.keys((JSON.parse(readFileSync(join(ckpt(out, 2), 'manifest.json'), 'utf8')) as { files: Record<string, unknown> }).files);
      const state = listed.filter((f) => !readdirSync(EMBEDDED.model()).includes(f)).sort((a, b) => statSync(join(ckpt(out, 2), b)).size - statSync(join(ckpt(out, 2), a)).size)[0]!;
      const file = join(ckpt(out, 2), state);
      const buf = readFileSync(file);
      buf[buf.length - 1] = buf[buf.length - 1]! ^ 0xff;
      writeFileSync(file, buf);
      const r = await runCli([...args(out), '--resume', '--quiet']);
      expect(r.err).toMatch(new RegExp(`^warning: ${esc(ckpt(out, 2))} does not verify \\(${esc(file)}: sha256 [0-9a-f]{12}… differs from manifest\\.json's [0-9a-f]{12}…\\); moved to ${esc(ckpt(out, 2))}\\.corrupt\\nwarning: resuming from step 1 `));
      expect(r.code).toBe(0);
      expect(withoutTimes(metrics(out))).toEqual(withoutTimes(metrics(base)));
    }, 120_000);

    it('none that verifies: refused naming every file, nothing moved or cut', async () => {
      const out = copy();
      for (const s of [1, 2]) truncateSync(join(ckpt(out, s), 'model.onnx'), 0);
      const before = readFileSync(join(out, 'metrics.jsonl'), 'utf8');
      const r = await runCli([...args(out), '--resume', '--quiet']);
      expect(r.code).toBe(1);
      expect(r.err).toMatch(new RegExp(`^error: --resume: no complete checkpoint in ${esc(out)} verifies: ${esc(ckpt(out, 2))}: ${esc(join(ckpt(out, 2), 'model.onnx'))} is 0 bytes, trainer.json recorded \\d+; ${esc(ckpt(out, 1))}: ${esc(join(ckpt(out, 1), 'model.onnx'))} is 0 bytes, trainer.json recorded \\d+\\n$`));
      expect(readdirSync(join(out, 'checkpoints')).sort()).toEqual(['step-1', 'step-2']);
      expect(readFileSync(join(out, 'metrics.jsonl'), 'utf8')).toBe(before);
    });
  });

  it("a run of an earlier mempo (settings as a string, learner state in a pickle) is refused before the learner starts", async () => {
    const out = copy();
    for (const s of [1, 2]) {
      const file = join(ckpt(out, s), 'trainer.json');
      const st = JSON.parse(readFileSync(file, 'utf8')) as { step: number; seed: number; settings: unknown };
      writeFileSync(file, JSON.stringify({ step: st.step, seed: st.seed, settings: JSON.stringify(st.settings) }));
    }
    const before = readFileSync(join(out, 'metrics.jsonl'), 'utf8');
    const r = await runCli([...args(out), '--resume', '--quiet']);
    expect(r.code).toBe(1);
    const old = (s: number) => `${esc(ckpt(out, s))}: ${esc(join(ckpt(out, s), 'trainer.json'))}: written by an earlier mempo, whose learner state is a pickle \\(learner\\.pt\\), never loaded \\(docs/learner\\.md\\)`;
    expect(r.err).toMatch(new RegExp(`^error: --resume: no complete checkpoint in ${esc(out)} verifies: ${old(2)}; ${old(1)}`));
    expect(readdirSync(join(out, 'checkpoints')).sort()).toEqual(['step-1', 'step-2']);
    expect(readFileSync(join(out, 'metrics.jsonl'), 'utf8')).toBe(before);
  });

  it('the temp directories of a killed save are removed on resume, and only those', async () => {
    const out = copy();
    const made = ['checkpoints/step-3.tmp-4242', 'checkpoints/step-3.old-4242', 'weights.tmp-4242', 'checkpoints/step-3.tmp-x', 'checkpoints/notes.tmp-1', 'weights.tmp-12a', 'keep.tmp-1'];
    for (const d of made) {
      mkdirSync(join(out, d));
      writeFileSync(join(out, d, 'model.onnx'), 'partial');
    }
    writeFileSync(join(out, '.metrics.jsonl.4242.tmp'), '{"step":');
    const r = await runCli([...args(out), '--resume']);
    expect(r.code).toBe(0);
    expect(r.err).toContain(`mempo train: removed .metrics.jsonl.4242.tmp, weights.tmp-4242, checkpoints/step-3.old-4242, checkpoints/step-3.tmp-4242 from ${out} (left by a save that was killed)\n`);
    for (const d of made.slice(0, 3)) expect(existsSync(join(out, d))).toBe(false);
    for (const d of made.slice(3)) expect(readFileSync(join(out, d, 'model.onnx'), 'utf8')).toBe('partial');
    expect(existsSync(join(out, '.metrics.jsonl.4242.tmp'))).toBe(false);
  }, 120_000);
});
