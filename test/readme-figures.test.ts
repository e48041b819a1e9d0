/**
 * The README's "Measured figures" table against the files it names as sources: each figure is
 * formatted here from the source JSON and must appear in the table's row, so a rerun that
 * changes a result and leaves the README behind fails. Not checked here: the npm start wall time
 * (a log line, no file) and the arms' step times (bench/README.md).
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(__dirname, '..');
const json = (p: string) => JSON.parse(readFileSync(join(ROOT, p), 'utf8')) as Record<string, any>;
const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
const table = readme.slice(readme.indexOf('## Measured figures'), readme.indexOf('## Read more'));
const row = (what: string) => {
  const line = table.split('\n').find((l) => l.startsWith(`| ${what}`));
  if (line === undefined) throw new Error(`README "Measured figures" has no row starting "${what}"`);
  return line;
};
const pct = (x: number) => (100 * x).toFixed(1);
// the shipped model's name in results/ (results/README.md: `bash results/pages-eval.sh NAME models/mempo-tiny`)
const NAME = 'soup05';

describe('README "Measured figures" agree with their sources', () => {
  it('npm start: the summary.json shown in docs/experiments.md', () => {
    const exp = readFileSync(join(ROOT, 'docs', 'experiments.md'), 'utf8');
    const block = /```json\n(\{ "questions": 24,[\s\S]*?\})\n```/.exec(exp);
    expect(block).not.toBeNull();
    const s = JSON.parse(block![1]!) as { meanScore: number; formatValidRate: number; memoryReward: { mean: number; std: number; count: number }; access: { rounds: number; pagesOpened: number } };
    const r = row('`npm start`');
    expect(r).toContain(`mean score ${s.meanScore.toFixed(3)}`);
    expect(r).toContain(`${pct(s.formatValidRate)} % format-valid`);
    expect(r).toContain(`${s.access.rounds} access rounds (${s.access.pagesOpened} pages opened)`);
    expect(row('memory reward on that batch')).toContain(`${s.memoryReward.mean.toFixed(4)} ± ${s.memoryReward.std.toFixed(4)} over ${s.memoryReward.count} snapshots`);
  });

  it(`the memory reward probes of that batch: results/probes-${NAME}.json`, () => {
    const p = json(`results/probes-${NAME}.json`);
    const r = row('memory reward on that batch');
    expect(r).toContain(`${p.memReward.mean.toFixed(4)} ±`);
    expect(r).toContain(`P_full = 0 in ${pct(p.pFull.goldInContext.zeroShare)} % (${p.pFull.goldInContext.zero} of ${p.pFull.goldInContext.n})`);
    expect(p.pMem.goldInContext.zero).toBe(0);
    expect(r).toContain(`P_mem = 0 in none of the ${p.pMem.goldInContext.n}`);
  });

  it(`400 unseen test questions: results/eval/${NAME}-{memory,full}.json, before pages base-{memory,full}.json`, () => {
    const m = json(`results/eval/${NAME}-memory.json`);
    const f = json(`results/eval/${NAME}-full.json`);
    const bm = json('results/eval/base-memory.json');
    const bf = json('results/eval/base-full.json');
    const r = row('400 unseen test questions');
    expect([m.questions, bm.questions]).toEqual([400, 400]);
    expect(r).toContain(`exact match ${pct(m.em)} % (\`memory\` policy) / ${pct(f.em)} % (\`full\`) with the page tool (the model before pages, without it: ${pct(bm.em)} / ${pct(bf.em)} %)`);
    const hops = ['1', '2', '3'].map((h) => (100 * m.byHops[h].em).toFixed(1).replace(/\.0$/, ''));
    expect(r).toContain(`1/2/3 hops ${hops.join(' / ')} % under \`memory\``);
    expect(r).toContain(`peak context ${Math.round(m.contextTokens.meanPeakPerQuestion)} against ${Math.round(f.contextTokens.meanPeakPerQuestion)} tokens`);
  });

  it(`the same on the 450 dev questions, against the model before RL: results/eval/{${NAME},paged-stream}-dev-old-memory.json`, () => {
    const m = json(`results/eval/${NAME}-dev-old-memory.json`);
    const b = json('results/eval/paged-stream-dev-old-memory.json');
    expect([m.questions, b.questions]).toEqual([450, 450]);
    expect(row('400 unseen test questions')).toContain(`on the 450 dev questions ${pct(m.em)} against ${pct(b.em)} %`);
  });

  it(`200 unseen page questions: results/eval/${NAME}-page-questions-{memory,full}.json`, () => {
    const m = json(`results/eval/${NAME}-page-questions-memory.json`);
    const f = json(`results/eval/${NAME}-page-questions-full.json`);
    const r = row('200 unseen page questions');
    expect(m.questions).toBe(200);
    expect(r).toContain(`exact match ${pct(m.em)} % (\`memory\`) / ${pct(f.em)} % (\`full\`)`);
    expect(r).toContain(`${m.access.roundsPerTrajectory.toFixed(1)} access rounds per trajectory, ${m.access.pagesOpened} pages opened`);
    const g = m.access.goldInMemAfterShrink;
    expect(r).toContain(`the fact in \`<mem>\` after its chunk shrank in ${pct(g.rate)} % (${g.inMem} of ${g.shrank})`);
  });

  it(`memory reward on 100 dev questions: results/eval/${NAME}-dev-probes.json`, () => {
    const p = json(`results/eval/${NAME}-dev-probes.json`);
    const r = row('memory reward on 100 dev questions');
    expect(r).toContain(`${p.memReward.mean.toFixed(3)} over ${p.snapshots} snapshots`);
    expect(r).toContain(`P_full = 0 in ${pct(p.pFull.all.zeroShare)} % of all snapshots (${pct(p.pFull.goldInContext.zeroShare)} % of those whose full context holds the gold)`);
  });

  it('MemPO against GRPO on the page world: results/page-arms/{grpo,grpo-s2,mempo,mempo-s2}.json and compare-2seeds.md', () => {
    type Q = { em: number; shrank: number; inMem: number };
    const runs = (arms: string[]) => arms.map((a) => json(`results/page-arms/${a}.json`) as { pages: Record<string, Q>; old: Record<string, Q> });
    // pooled over seeds: the sum over every run's questions
    const pooled = (arms: string[], part: 'pages' | 'old', num: (q: Q) => number, den: (q: Q) => number) => {
      let n = 0;
      let d = 0;
      for (const r of runs(arms)) for (const q of Object.values(r[part])) { n += num(q); d += den(q); }
      return n / d;
    };
    const [g, m] = [['grpo', 'grpo-s2'], ['mempo', 'mempo-s2']];
    const em = (q: Q) => q.em;
    const one = () => 1;
    for (const r of [...runs(g), ...runs(m)]) expect([Object.keys(r.pages).length, Object.keys(r.old).length]).toEqual([200, 400]);
    const r = row('MemPO against GRPO on the page world');
    const diff = (x: number) => `${x >= 0 ? '+' : ''}${pct(x)} pt`;
    const pe = [pooled(m, 'pages', em, one), pooled(g, 'pages', em, one)];
    const fm = [pooled(m, 'pages', (q) => q.inMem, (q) => q.shrank), pooled(g, 'pages', (q) => q.inMem, (q) => q.shrank)];
    // the intervals are the bootstrap's, as results/page-arm-stats.mjs printed them
    const cmp = readFileSync(join(ROOT, 'results/page-arms/compare-2seeds.md'), 'utf8').split('\n');
    const ci = (label: string) => cmp.find((l) => l.startsWith(`| ${label} |`))!.split('|')[5]!.trim();
    expect(r).toContain(`page-question EM ${pct(pe[0]!)} % against ${pct(pe[1]!)} % (${diff(pe[0]! - pe[1]!)}, 95 % CI ${ci('page-question EM')})`);
    expect(r).toContain(`after its chunk shrank ${pct(fm[0]!)} % against ${pct(fm[1]!)} % (${diff(fm[0]! - fm[1]!)}, ${ci('fact in `<mem>` after the shrink')})`);
    expect(r).toContain(`old-kind EM ${pct(pooled(m, 'old', em, one))} % against ${pct(pooled(g, 'old', em, one))} %`);
  });

  it('kernels, native against JS: bench/runs/2026-12-04-all/kernels.json', () => {
    const b = json('bench/runs/2026-12-04-all/kernels.json');
    const k = (name: string, shape: string) => (b.kernels as Array<Record<string, any>>).find((x) => x.name === name && String(x.shape).startsWith(shape))!;
    const gather = k('gatherLogProbs', 'R=256 V=151936');
    const r = row('kernels, native against JS');
    expect(r).toContain(`\`gatherLogProbs\` ${gather.ratio.toFixed(1)}× (${Math.round(100 * gather.bandwidthShare)} % of read bandwidth)`);
    expect(r).toContain(`fused advantage stage ${k('advantage stage', 'B=2048 T=4096 3 spans/traj, fused').ratio.toFixed(1)}×`);
    // added memory = the pass's VmHWM less the RSS before it (bench/real-vocab.mjs)
    const v = (variant: string) => (b.realVocab.results as Array<Record<string, any>>).find((x) => x.model === 'real-vocab' && x.variant === variant)!;
    const added = (x: Record<string, any>) => x.peakRssMiB - x.rssBeforeMiB;
    expect(r).toContain(`V = 151,936 ${(v('full').ms / v('selected').ms).toFixed(1)}× faster, ${(added(v('full')) / added(v('selected'))).toFixed(1)}× less added memory`);
    expect(r).toContain(`${b.machine.cores}-core AMD EPYC VM, ${b.machine.simd === 'avx512' ? 'AVX-512' : b.machine.simd}`);
  });

  it('kernels against torch: bench/runs/2026-12-04-all/peer.json', () => {
    const p = json('bench/runs/2026-12-04-all/peer.json');
    const cells = p.results as Array<Record<string, any>>;
    const ratios = cells.map((c) => c.ratio as number);
    const r = row('kernels against torch');
    expect(cells).toHaveLength(24);
    expect(cells.every((c) => c.equal === true)).toBe(true);
    expect(r).toContain(`mempo faster in all ${cells.length} cells, ${Math.min(...ratios).toFixed(2)}× to ${Math.max(...ratios).toFixed(2)}×`);
    const alloc = cells.filter((c) => c.case === 'grpo B=512 T=1024').map((c) => (c.ratioAlloc as number).toFixed(2));
    expect(r).toContain(`B = 512, T = 1,024: ${alloc.join('× / ')}×`);
    expect(Math.min(...ratios)).toBeGreaterThanOrEqual(1);
  });
});
