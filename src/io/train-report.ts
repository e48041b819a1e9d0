/**
 * train-report.html: the curves of a `mempo train` run (metrics.jsonl, one StepMetrics a step,
 * docs/algorithm.md §9) as one self-contained page — inline CSS and SVG, no script, no network.
 * A null value is a gap in its curve, never a zero; evaluation curves have points only where
 * evaluation ran.
 */
import type { StepMetrics } from '../train/metrics';
import { escapeHtml as esc, legendHtml, lineChart } from './svg-chart';
import type { ChartSpec, Point, Series } from './svg-chart';

interface TrainReportOptions {
  title: string;
  /** false for --no-memory-reward (alpha 0, the GRPO baseline): no memory-reward chart. */
  memoryReward: boolean;
}

/** The keys of StepMetrics.wallMs that src/train/step.ts writes, in the order of a step. */
const PHASES = ['rollout', 'scoring', 'learnerForward', 'learnerBackward', 'loss', 'optimiser', 'save', 'sync', 'eval', 'total'];
const PALETTE = ['#2563eb', '#dc2626', '#16a34a', '#9333ea', '#ea580c', '#0891b2', '#ca8a04', '#db2777', '#65a30d', '#4b5563'];

const CSS = `
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#111;max-width:1200px}
h1{font-size:20px;margin:0 0 10px} h2{font-size:15px;margin:0 0 4px}
.notes{color:#4b5563;font-size:12px} .top{display:flex;gap:40px;flex-wrap:wrap;align-items:flex-start;margin-bottom:18px}
table{border-collapse:collapse;font-size:13px} td,th{padding:2px 12px 2px 0;text-align:left} th{color:#4b5563;font-weight:600}
table.sum td:first-child{color:#4b5563} table.wall td:not(:first-child),table.wall th:not(:first-child){text-align:right}
table.wall tr.total td{border-top:1px solid #d1d5db;font-weight:600}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:22px 28px}
figure.chart{margin:0} .chart svg{display:block;max-width:100%;height:auto} .chart text.lab{font-size:12px;fill:#374151}
.chart text.empty{font-size:13px;fill:#6b7280} .chart text{fill:#374151}
.legend{font-size:12px;color:#374151;display:flex;flex-wrap:wrap;gap:4px 14px;margin-left:62px}
.legend i{display:inline-block;width:18px;margin-right:5px;vertical-align:middle}
.off{border:1px dashed #d1d5db;border-radius:6px;padding:18px;color:#4b5563;font-size:13px}
`;

type Num = number | null | undefined;

function known(x: Num): x is number {
  return typeof x === 'number' && Number.isFinite(x);
}

function fmt(x: Num, digits = 3): string {
  return known(x) ? x.toFixed(digits) : '–';
}

function pct(x: Num): string {
  return known(x) ? `${(100 * x).toFixed(1)} %` : '–';
}

function duration(ms: Num): string {
  if (!known(ms)) return '–';
  return ms < 1000 ? `${ms.toFixed(0)} ms` : `${(ms / 1000).toFixed(2)} s`;
}

function seriesOf(lines: readonly StepMetrics[], f: (m: StepMetrics) => Num): Point[] {
  return lines.map((m) => ({ x: m.step, y: known(f(m)) ? f(m)! : null }));
}

/** The first and the last line where f is known, with their steps. */
function ends(lines: readonly StepMetrics[], f: (m: StepMetrics) => Num): { first: [number, number]; last: [number, number] } | null {
  const hits = lines.filter((m) => known(f(m)));
  if (hits.length === 0) return null;
  const at = (m: StepMetrics): [number, number] => [m.step, f(m)!];
  return { first: at(hits[0]!), last: at(hits[hits.length - 1]!) };
}

function summaryTable(lines: readonly StepMetrics[], train: readonly StepMetrics[]): string {
  const score = ends(train, (m) => m.meanScore);
  const em = ends(train, (m) => m.em);
  const ev = ends(lines, (m) => m.eval?.em);
  const last = train[train.length - 1];
  const rows: Array<[string, string]> = [
    ['steps done', train.length === 0 ? '0 (baseline only)' : `${train.length} (last step ${last!.step})`],
    ['mean score, first → last', score ? `${fmt(score.first[1])} (step ${score.first[0]}) → ${fmt(score.last[1])} (step ${score.last[0]})` : '–'],
    ['batch EM, last', em ? `${pct(em.last[1])} (step ${em.last[0]})` : '–'],
    ['eval EM, last', ev ? `${pct(ev.last[1])} (step ${ev.last[0]})${ev.first[0] !== ev.last[0] ? `; first ${pct(ev.first[1])} (step ${ev.first[0]})` : ''}` : 'not run'],
    ['trajectories / trained rows, last step', last ? `${last.trajectories} / ${last.trained}` : '–'],
    ['tokens generated / trained, all steps', `${train.reduce((a, m) => a + (m.tokens?.generated ?? 0), 0)} / ${train.reduce((a, m) => a + (m.tokens?.trained ?? 0), 0)}`],
    ['learning rate, last step', last ? String(last.lr) : '–'],
  ];
  return `<table class="sum">${rows.map(([k, v]) => `<tr><td>${esc(k)}</td><td>${esc(v)}</td></tr>`).join('')}</table>`;
}

/** Wall time per phase: mean over the training steps (a phase a step did not run counts 0 ms), its share of the total, and the last step's. */
function wallTable(train: readonly StepMetrics[]): string {
  if (train.length === 0) return '';
  const keys = [...PHASES, ...new Set(train.flatMap((m) => Object.keys(m.wallMs ?? {})).filter((k) => !PHASES.includes(k)))];
  const mean = (k: string) => train.reduce((a, m) => a + (known(m.wallMs?.[k]) ? m.wallMs[k]! : 0), 0) / train.length;
  const total = mean('total');
  const last = train[train.length - 1]!;
  const rows = keys.map((k) => {
    const share = k !== 'total' && total > 0 ? `${((100 * mean(k)) / total).toFixed(1)} %` : '';
    return `<tr${k === 'total' ? ' class="total"' : ''}><td>${esc(k)}</td><td>${duration(mean(k))}</td><td>${share}</td><td>${duration(last.wallMs?.[k] ?? null)}</td></tr>`;
  });
  return `<table class="wall"><tr><th>phase</th><th>mean / step</th><th>share</th><th>last step</th></tr>${rows.join('')}</table>`
    + `<div class="notes">over ${train.length} step${train.length === 1 ? '' : 's'}; a phase a step skipped counts 0 ms</div>`;
}

function figure(id: string, spec: ChartSpec, note = ''): string {
  return `<figure class="chart" id="${id}"><h2>${esc(spec.title)}</h2>${lineChart(spec)}${legendHtml(spec.series)}${note ? `<div class="notes">${esc(note)}</div>` : ''}</figure>`;
}

/** Objectives buckets in numeric order, others ('unknown') after. */
function bucketOrder(a: string, b: string): number {
  const na = Number(a);
  const nb = Number(b);
  if (Number.isFinite(na) && Number.isFinite(nb)) return na - nb;
  if (Number.isFinite(na) !== Number.isFinite(nb)) return Number.isFinite(na) ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

function evalChart(lines: readonly StepMetrics[], xDomain: readonly [number, number]): string {
  const evals = lines.filter((m) => m.eval !== null && m.eval !== undefined);
  const buckets = [...new Set(evals.flatMap((m) => Object.keys(m.eval!.byObjectives ?? {})))].sort(bucketOrder);
  const series: Series[] = [
    { label: 'EM, all questions', colour: '#111827', points: seriesOf(evals, (m) => m.eval!.em), markers: true, width: 2.6 },
    ...buckets.map((k, i) => ({
      label: `EM, ${k} objective${k === '1' ? '' : 's'}`, colour: PALETTE[i % PALETTE.length]!, markers: true, dashed: true,
      points: seriesOf(evals, (m) => m.eval!.byObjectives?.[k]),
    })),
  ];
  return figure('chart-eval', {
    title: '(b) Eval EM (memory policy), overall and by objectives', xLabel: 'step', yLabel: 'exact match', xDomain, series,
    emptyText: 'no evaluation yet (--eval-every 0, or not reached)',
  }, evals.length ? `evaluated at step${evals.length === 1 ? '' : 's'} ${evals.map((m) => m.step).join(', ')}` : '');
}

function memoryChart(lines: readonly StepMetrics[], xDomain: readonly [number, number], on: boolean): string {
  const title = '(c) Memory reward and P_full / P_mem';
  if (!on) return `<figure class="chart" id="chart-memory"><h2>${esc(title)}</h2><div class="off">memory rewards off (--no-memory-reward: alpha 0, the GRPO baseline)</div></figure>`;
  const band = lines.map((m) => {
    const { mean, std } = m.memoryReward ?? { mean: null, std: null };
    return known(mean) && known(std) ? ([mean - std, mean + std] as const) : null;
  });
  return figure('chart-memory', {
    title, xLabel: 'step', yLabel: 'reward / probability', xDomain, series: [
      { label: 'memory reward mean (± std band)', colour: '#9333ea', points: seriesOf(lines, (m) => m.memoryReward?.mean), band, width: 2.2 },
      { label: 'mean P_full', colour: '#2563eb', points: seriesOf(lines, (m) => m.pFull), dashed: true },
      { label: 'mean P_mem', colour: '#16a34a', points: seriesOf(lines, (m) => m.pMem), dashed: true },
    ],
  });
}

function charts(lines: readonly StepMetrics[], o: TrainReportOptions): string[] {
  const xDomain = [lines[0]!.step, lines[lines.length - 1]!.step] as const;
  const spec = (title: string, yLabel: string, series: Series[], extra: Partial<ChartSpec> = {}): ChartSpec => ({ title, xLabel: 'step', yLabel, xDomain, series, ...extra });
  return [
    figure('chart-score', spec('(a) Training batch: mean score and EM', 'score / exact match', [
      { label: 'mean score', colour: '#2563eb', points: seriesOf(lines, (m) => m.meanScore), width: 2.2 },
      { label: 'EM', colour: '#ea580c', points: seriesOf(lines, (m) => m.em) },
    ])),
    evalChart(lines, xDomain),
    memoryChart(lines, xDomain, o.memoryReward),
    figure('chart-kl', spec('(d) KL to the reference and approx KL', 'KL', [
      { label: 'KL to the reference', colour: '#dc2626', points: seriesOf(lines, (m) => m.klRef), width: 2.2 },
      { label: 'approx KL (to the old policy)', colour: '#0891b2', points: seriesOf(lines, (m) => m.approxKl) },
    ], { emptyText: 'no KL values (no update yet, or the reference KL is off)' })),
    figure('chart-clip', spec('(e) Clip fraction', 'fraction clipped', [
      { label: 'clip fraction', colour: '#ca8a04', points: seriesOf(lines, (m) => m.clipFrac), width: 2.2 },
    ])),
    figure('chart-grad', spec('(f) Grad norm and loss', 'grad norm', [
      { label: 'grad norm', colour: '#4b5563', points: seriesOf(lines, (m) => m.gradNorm), width: 2.2 },
      { label: 'loss', colour: '#db2777', points: seriesOf(lines, (m) => m.loss), right: true, dashed: true },
    ], { y2Label: 'loss' })),
  ];
}

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>${esc(title)}</title><style>${CSS}</style></head>
<body>
<h1>${esc(title)}</h1>
${body}
</body></html>
`;
}

export function trainReportHtml(metrics: readonly StepMetrics[], o: { title: string; memoryReward: boolean }): string {
  if (metrics.length === 0) return page(o.title, '<p class="off">No steps yet: metrics.jsonl has no lines.</p>');
  const lines = [...metrics].sort((a, b) => a.step - b.step);
  const train = lines.filter((m) => m.step >= 1);
  const top = `<div class="top"><div>${summaryTable(lines, train)}</div><div>${wallTable(train)}</div></div>`;
  return page(o.title, `${top}<div class="charts">\n${charts(lines, o).join('\n')}\n</div>`);
}
