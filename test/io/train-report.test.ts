/** train-report.html and its SVG line chart: gaps, escaping, eval-only lines, one step, no steps. Expected values are worked out by hand. */
import { lineChart, niceAxis, runs, tickLabel, xTicks } from '../../src/io/svg-chart';
import { trainReportHtml } from '../../src/io/train-report';
import type { StepMetrics } from '../../src/train/metrics';

const none = { mean: null, std: null };

/** A step line with every value unknown; tests set what they need. */
function line(step: number, over: Partial<StepMetrics> = {}): StepMetrics {
  return {
    step, questions: 2, trajectories: 4, trained: 4, meanScore: null, em: null, formatValidRate: null, memoryReward: none,
    pFull: null, pMem: null, outcomeAdvantage: none, memoryAdvantage: none, loss: null, clipFrac: null, approxKl: null,
    klRef: null, gradNorm: null, lr: 1e-5, tokens: { generated: 10, trained: 8 }, wallMs: {}, eval: null, ...over,
  };
}

function figure(html: string, id: string): string {
  const m = new RegExp(`<figure class="chart" id="${id}">([\\s\\S]*?)</figure>`).exec(html);
  if (!m) throw new Error(`no figure ${id}`);
  return m[1]!;
}

/** The series group with this label inside a figure. */
function group(fig: string, label: string): string {
  const m = new RegExp(`<g class="series" data-label="${label}">([\\s\\S]*?)</g>`).exec(fig);
  if (!m) throw new Error(`no series ${label}`);
  return m[1]!;
}

const attrs = (s: string, tag: string) => [...s.matchAll(new RegExp(`<${tag} [^>]*data-steps="([^"]*)"`, 'g'))].map((m) => m[1]);
const page = (ms: StepMetrics[], memoryReward = true) => trainReportHtml(ms, { title: 'run', memoryReward });

describe('svg-chart axes', () => {
  it('rounds the y domain out to 1/2/5 ticks', () => {
    const a = niceAxis([0.05, 0.95]) // span 0.9: raw step 0.18, rounded to 0.2;
    expect(a.step).toBeCloseTo(0.2, 12);
    expect([a.lo, a.hi]).toEqual([0, 1]);
    expect(a.ticks.map((t) => tickLabel(t, a.step))).toEqual(['0', '0.2', '0.4', '0.6', '0.8', '1.0']);
    const flat = niceAxis([3, 3]); // padded by 10 %: [2.7, 3.3], step 0.1
    expect(flat.lo).toBeCloseTo(2.7, 12);
    expect(flat.hi).toBeCloseTo(3.3, 12);
    expect(flat.ticks).toHaveLength(7);
    expect(niceAxis([]).ticks.map((t) => tickLabel(t, 0.2))).toEqual(['0', '0.2', '0.4', '0.6', '0.8', '1.0']);
    expect(tickLabel(0.0008, 0.0002)).toBe('0.0008');
    expect(tickLabel(140000, 20000)).toBe('1.4e+5');
  });

  it('puts integer x ticks on steps', () => {
    expect(xTicks(0, 12)).toEqual([0, 2, 4, 6, 8, 10, 12]);
    expect(xTicks(4, 6)).toEqual([4, 5, 6]);
    expect(xTicks(0, 250)).toEqual([0, 50, 100, 150, 200, 250]);
  });

  it('splits a series into runs of known values', () => {
    const ok = [true, true, false, true, false, false, true];
    expect(runs(ok.length, (i) => ok[i]!)).toEqual([[0, 1], [3], [6]]);
    expect(runs(0, () => true)).toEqual([]);
  });

  it('maps values to the plot: x 0..10 onto 62..544, y 0..1 onto 208..12', () => {
    const svg = lineChart({ title: 't', xLabel: 'step', yLabel: 'y', xDomain: [0, 10], series: [{ label: 's', colour: '#000', points: [{ x: 0, y: 0 }, { x: 5, y: 0.5 }, { x: 10, y: 1 }] }] });
    expect(svg).toContain('points="62.0,208.0 303.0,110.0 544.0,12.0"');
  });
});

describe('trainReportHtml', () => {
  it('leaves a gap at a null value instead of drawing a zero', () => {
    const ms = [1, 2, 3, 4].map((s) => line(s, { meanScore: [0.2, null, 0.4, 0.5][s - 1]!, em: [0.1, 0.2, 0.3, Number.NaN][s - 1]! }));
    const fig = figure(page(ms), 'chart-score');
    const score = group(fig, 'mean score');
    expect(attrs(score, 'polyline')).toEqual(['3,4']);
    expect(attrs(score, 'circle')).toEqual(['1']); // the lone value before the gap is a dot
    const em = group(fig, 'EM');
    expect(attrs(em, 'polyline')).toEqual(['1,2,3']); // NaN is unknown, not a value
    expect(attrs(em, 'circle')).toEqual([]);
    // Values 0.1..0.5 give the axis 0.1..0.5 in steps of 0.1: no zero tick was made up for the gap.
    expect(fig).not.toMatch(/>0<\/text>/);
  });

  it('draws the memory reward ±std band per run of known moments', () => {
    const mr = [{ mean: 0.1, std: 0.05 }, { mean: 0.2, std: 0.05 }, { mean: 0.1, std: null }, { mean: 0, std: 0.1 }];
    const ms = mr.map((m, i) => line(i + 1, { memoryReward: m, pFull: 0.5, pMem: 0.6 }));
    const g = group(figure(page(ms), 'chart-memory'), 'memory reward mean \\(± std band\\)');
    expect(attrs(g, 'polygon')).toEqual(['1,2']);
    expect(attrs(g, 'line')).toEqual(['4']);
    expect(attrs(g, 'polyline')).toEqual(['1,2,3,4']); // the mean is known at all four steps
  });

  it('escapes the title, objectives buckets and phase names', () => {
    const ms = [line(1, { wallMs: { '<i>x</i>': 5, total: 10 }, eval: { em: 0.5, score: 0.5, byHops: {}, byObjectives: { '<b>"q"</b>': 0.25 } } })];
    const html = trainReportHtml(ms, { title: '<script>alert("x")</script> & co', memoryReward: true });
    expect(html).toContain('<title>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; co</title>');
    expect(html).toContain('<h1>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; co</h1>');
    expect(html).not.toContain('<script');
    expect(html).not.toContain('<b>');
    expect(html).toContain('EM, &lt;b&gt;&quot;q&quot;&lt;/b&gt; objectives');
    expect(html).toContain('<td>&lt;i&gt;x&lt;/i&gt;</td>');
  });

  it('plots evaluation only where it ran, and reads eval-only lines', () => {
    const ev = (em: number, by: Record<string, number>) => ({ em, score: em, byHops: {}, byObjectives: by });
    const ms = [
      line(0, { questions: 0, trajectories: 0, trained: 0, tokens: { generated: 0, trained: 0 }, eval: ev(0.2, { '1': 0.4, '2': 0 }) }),
      line(1, { meanScore: 0.3 }), line(2, { meanScore: 0.35 }),
      line(3, { meanScore: 0.4, eval: ev(0.5, { '1': 0.6 }) }),
    ];
    const html = page(ms);
    const fig = figure(html, 'chart-eval');
    const all = group(fig, 'EM, all questions');
    expect(attrs(all, 'polyline')).toEqual(['0,3']);
    expect(attrs(all, 'circle')).toEqual(['0', '3']);
    expect(attrs(group(fig, 'EM, 1 objective'), 'circle')).toEqual(['0', '3']);
    expect(attrs(group(fig, 'EM, 2 objectives'), 'circle')).toEqual(['0']); // no bucket at step 3: no point
    expect(fig).toContain('evaluated at steps 0, 3');
    expect(html).toContain('<td>eval EM, last</td><td>50.0 % (step 3); first 20.0 % (step 0)</td>');
    expect(html).toContain('<td>steps done</td><td>3 (last step 3)</td>');
    expect(html).toContain('<td>mean score, first → last</td><td>0.300 (step 1) → 0.400 (step 3)</td>');

    const baselineOnly = page([ms[0]!]);
    expect(baselineOnly).toContain('<td>steps done</td><td>0 (baseline only)</td>');
    expect(attrs(group(figure(baselineOnly, 'chart-eval'), 'EM, all questions'), 'circle')).toEqual(['0']);
    expect(figure(baselineOnly, 'chart-score')).toContain('no values yet');
    expect(baselineOnly).not.toContain('<table class="wall">');
  });

  it('one step: dots, no lines, x axis around the step', () => {
    const html = page([line(5, { meanScore: 0.5, em: 0.25, klRef: 0.01, approxKl: 0.02, clipFrac: 0.1, gradNorm: 1.5, loss: -0.2, memoryReward: { mean: 0.1, std: 0.2 }, pFull: 0.3, pMem: 0.4 })]);
    for (const id of ['chart-score', 'chart-eval', 'chart-memory', 'chart-kl', 'chart-clip', 'chart-grad']) expect(figure(html, id)).not.toContain('<polyline');
    const score = figure(html, 'chart-score');
    expect(attrs(score, 'circle')).toEqual(['5', '5']);
    expect(score).toContain('cx="303.0"'); // x domain 4..6, step 5 in the middle of 62..544
    expect([...score.matchAll(/text-anchor="middle">(\d+)<\/text>/g)].map((m) => m[1])).toEqual(['4', '5', '6']);
    expect(figure(html, 'chart-eval')).toContain('no evaluation yet');
  });

  it('splits wall time per phase: mean per step, share of the total, last step', () => {
    const ms = [
      line(1, { wallMs: { rollout: 100, sync: 10, total: 1000 } }),
      line(2, { wallMs: { rollout: 300, sync: 30, eval: 2000, total: 3000 } }),
    ];
    const html = page(ms);
    expect(html).toContain('<tr><td>rollout</td><td>200 ms</td><td>10.0 %</td><td>300 ms</td></tr>');
    expect(html).toContain('<tr><td>sync</td><td>20 ms</td><td>1.0 %</td><td>30 ms</td></tr>');
    expect(html).toContain('<tr><td>eval</td><td>1.00 s</td><td>50.0 %</td><td>2.00 s</td></tr>');
    expect(html).toContain('<tr><td>learnerBackward</td><td>0 ms</td><td>0.0 %</td><td>–</td></tr>');
    expect(html).toContain('<tr class="total"><td>total</td><td>2.00 s</td><td></td><td>3.00 s</td></tr>');
  });

  it('says when memory rewards are off instead of drawing them', () => {
    const ms = [line(1, { memoryReward: { mean: 0, std: 0 }, pFull: 0.5, pMem: 0.5 }), line(2)];
    const off = figure(page(ms, false), 'chart-memory');
    expect(off).toContain('memory rewards off');
    expect(off).not.toContain('<svg');
    expect(figure(page(ms, true), 'chart-memory')).toContain('<svg');
  });

  it('an empty list is a page saying there are no steps yet', () => {
    const html = trainReportHtml([], { title: 'a < b', memoryReward: true });
    expect(html).toMatch(/^<!doctype html>/);
    expect(html).toContain('<h1>a &lt; b</h1>');
    expect(html).toContain('No steps yet');
    expect(html).not.toContain('<svg');
  });

  it('orders lines by step and keeps six charts', () => {
    const html = page([line(2, { meanScore: 0.6 }), line(1, { meanScore: 0.2 })]);
    expect(attrs(group(figure(html, 'chart-score'), 'mean score'), 'polyline')).toEqual(['1,2']);
    expect(html.match(/<svg /g)).toHaveLength(6);
  });
});
