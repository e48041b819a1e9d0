/**
 * scripts/redraw-train-report.mjs (issue 46): a finished run's train-report.html redrawn from its
 * metrics.jsonl with the run directory as typed in the title, run as a real process on copies of the
 * committed arms; and the committed reports of results/arms/ name no absolute path.
 */
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const root = path.resolve(__dirname, '..', '..');
const script = path.join(root, 'scripts', 'redraw-train-report.mjs');
const arms = path.join(root, 'results', 'arms');

const redraw = (...args: string[]) => spawnSync(process.execPath, [script, ...args], { encoding: 'utf8', timeout: 60_000 });
const titles = (html: string): string[] => [/<title>([^<]*)<\/title>/.exec(html)?.[1] ?? '(no title)', /<h1>([^<]*)<\/h1>/.exec(html)?.[1] ?? '(no h1)'];

describe('scripts/redraw-train-report.mjs', () => {
  let dir = '';
  let machine = '';
  /** A copy of results/arms/ARM as `mempo train` wrote it before issue 46: the title names MACHINE/out/arms/NAME. */
  const oldRun = (arm: string, name = arm): string => {
    const d = path.join(dir, arm);
    fs.mkdirSync(d);
    fs.copyFileSync(path.join(arms, arm, 'metrics.jsonl'), path.join(d, 'metrics.jsonl'));
    const html = fs.readFileSync(path.join(arms, arm, 'train-report.html'), 'utf8');
    expect(titles(html)).toEqual([`mempo train — out/arms/${name}`, `mempo train — out/arms/${name}`]);
    fs.writeFileSync(path.join(d, 'train-report.html'), html.split(`mempo train — out/arms/${name}`).join(`mempo train — ${machine}/out/arms/${name}`));
    return d;
  };
  const report = (d: string) => fs.readFileSync(path.join(d, 'train-report.html'), 'utf8');

  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mempo-redraw-'));
    machine = path.join(dir, 'home', 'someone', 'mempo');
  });
  afterEach(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('names the directory relative to --root, keeps the GRPO and MemPO charts apart, and is idempotent', () => {
    const grpo = oldRun('grpo');
    const mempo = oldRun('prev-mempo', 'mempo');
    expect(titles(report(grpo))).toEqual([`mempo train — ${machine}/out/arms/grpo`, `mempo train — ${machine}/out/arms/grpo`]);
    const r = redraw('--root', machine, grpo, mempo);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const g = report(grpo);
    const m = report(mempo);
    expect(titles(g)).toEqual(['mempo train — out/arms/grpo', 'mempo train — out/arms/grpo']);
    expect(titles(m)).toEqual(['mempo train — out/arms/mempo', 'mempo train — out/arms/mempo']);
    for (const html of [g, m]) {
      expect(html).not.toContain(machine);
      expect(html).not.toContain(dir);
      expect(html).toContain('<td>36 (last step 36)</td>');
    }
    // GRPO (no memory reward in its metrics): the memory chart is the "off" note; MemPO: a drawn chart
    expect(g).toContain('memory rewards off (--no-memory-reward');
    expect(m).not.toContain('memory rewards off');
    expect(m).toContain('data-label="memory reward mean (± std band)"');
    // a relative title is kept: a second run changes no byte
    expect(redraw(grpo, mempo).status).toBe(0);
    expect(report(grpo)).toBe(g);
    expect(report(mempo)).toBe(m);
  });

  it('refuses an absolute title outside --root, or with no --root, and changes nothing', () => {
    const grpo = oldRun('grpo');
    const before = report(grpo);
    const other = redraw('--root', path.join(dir, 'elsewhere'), grpo);
    expect(other.status).toBe(2);
    expect(other.stderr).toContain(`${path.join(grpo, 'train-report.html')}: the title names ${machine}/out/arms/grpo, an absolute path outside --root ${path.join(dir, 'elsewhere')}`);
    const none = redraw(grpo);
    expect(none.status).toBe(2);
    expect(none.stderr).toContain('give --root');
    expect(report(grpo)).toBe(before);
    expect(fs.readdirSync(grpo).sort()).toEqual(['metrics.jsonl', 'train-report.html']);
  });

  it('checks every run before writing any: a bad metrics line in the second leaves the first as it was', () => {
    const grpo = oldRun('grpo');
    const mempo = oldRun('mempo');
    const before = report(grpo);
    const lines = fs.readFileSync(path.join(mempo, 'metrics.jsonl'), 'utf8').split('\n');
    lines[4] = '{"step":4,';
    fs.writeFileSync(path.join(mempo, 'metrics.jsonl'), lines.join('\n'));
    const r = redraw('--root', machine, grpo, mempo);
    expect(r.status).toBe(2);
    expect(r.stderr).toBe(`redraw-train-report: ${path.join(mempo, 'metrics.jsonl')}:5: not JSON\n`);
    expect(report(grpo)).toBe(before);
  });

  it("refuses metrics whose memory reward disagrees with the old report, and a directory without metrics", () => {
    const grpo = oldRun('grpo');
    fs.copyFileSync(path.join(arms, 'mempo', 'metrics.jsonl'), path.join(grpo, 'metrics.jsonl'));
    const r = redraw('--root', machine, grpo);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('the metrics say MemPO (memory rewards) but the report says otherwise');
    fs.rmSync(path.join(grpo, 'metrics.jsonl'));
    const gone = redraw('--root', machine, grpo);
    expect(gone.status).toBe(2);
    expect(gone.stderr).toContain(`${path.join(grpo, 'metrics.jsonl')}: no such file`);
  });
});

describe('results/arms/*/train-report.html', () => {
  it('each names its run directory as typed (out/arms/<arm>), no absolute path', () => {
    const runs = fs.readdirSync(arms).filter((d) => fs.existsSync(path.join(arms, d, 'train-report.html')));
    expect(runs.length).toBeGreaterThanOrEqual(17);
    for (const run of runs) {
      const [title, h1] = titles(fs.readFileSync(path.join(arms, run, 'train-report.html'), 'utf8'));
      expect([run, title]).toEqual([run, h1]);
      expect([run, /^mempo train — out\/arms\/[a-z0-9-]+$/.test(h1!)]).toEqual([run, true]);
    }
  });
});
