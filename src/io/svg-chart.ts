/**
 * A line chart as inline SVG (no script, no external assets): axes with "nice" ticks, labels, one
 * polyline per run of consecutive known values (a null or non-finite value is a gap, never a zero),
 * an isolated known value drawn as a dot, optional ±bands and a right-hand axis.
 */
import { maxOf } from '../util';

export interface Point {
  x: number;
  y: number | null;
}

export interface Series {
  label: string;
  colour: string;
  points: readonly Point[];
  /** [low, high] around points[i].y, null where unknown (drawn as a shaded band). */
  band?: ReadonlyArray<readonly [number, number] | null>;
  dashed?: boolean;
  /** A dot on every known point (sparse series such as evaluations). */
  markers?: boolean;
  /** Plotted against the right-hand axis. */
  right?: boolean;
  width?: number;
}

export interface ChartSpec {
  title: string;
  xLabel: string;
  yLabel: string;
  y2Label?: string;
  /** Shared by every chart of a page so that steps line up. */
  xDomain: readonly [number, number];
  series: readonly Series[];
  /** Shown inside the plot when no series has a known value. */
  emptyText?: string;
}

export const CHART = { width: 560, height: 250, left: 62, right: 16, right2: 62, top: 12, bottom: 42 };

/** Text for HTML content and attribute values (both reports). */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

function known(y: number | null | undefined): y is number {
  return typeof y === 'number' && Number.isFinite(y);
}

/** Tick step 1, 2 or 5 × 10^k giving about `target` intervals over [lo, hi]; hi > lo. */
export function tickStep(lo: number, hi: number, target = 5): number {
  const raw = (hi - lo) / target;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const n = raw / mag;
  return (n < 1.5 ? 1 : n < 3 ? 2 : n < 7 ? 5 : 10) * mag;
}

/** The y domain widened to whole ticks, and its ticks. A flat or empty series still gets an axis. */
export function niceAxis(values: readonly number[]): { lo: number; hi: number; ticks: number[]; step: number } {
  let lo = values.length ? -maxOf(-Infinity, values.map((v) => -v)) : 0;
  let hi = values.length ? maxOf(-Infinity, values) : 1;
  if (hi === lo) {
    const pad = lo === 0 ? 1 : Math.abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const step = tickStep(lo, hi);
  lo = Math.floor(lo / step + 1e-9) * step;
  hi = Math.ceil(hi / step - 1e-9) * step;
  const ticks: number[] = [];
  for (let i = 0; i <= 100 && lo + i * step <= hi + step * 1e-6; i++) ticks.push(lo + i * step);
  return { lo, hi, ticks, step };
}

/** Integer ticks inside [lo, hi] (steps are whole numbers). */
export function xTicks(lo: number, hi: number): number[] {
  if (hi <= lo) return [lo];
  const step = Math.max(1, tickStep(lo, hi, 8));
  const out: number[] = [];
  for (let x = Math.ceil(lo / step) * step; x <= hi; x += step) out.push(x);
  return out;
}

export function tickLabel(v: number, step: number): string {
  if (Math.abs(v) < step * 1e-6) return '0';
  if (Math.abs(v) >= 1e5 || step < 1e-6) return v.toExponential(1);
  return v.toFixed(Math.max(0, -Math.floor(Math.log10(step) + 1e-9)));
}

/** Indices of the maximal runs of consecutive points where `ok` holds. */
export function runs(n: number, ok: (i: number) => boolean): number[][] {
  const out: number[][] = [];
  let cur: number[] = [];
  for (let i = 0; i < n; i++) {
    if (ok(i)) cur.push(i);
    else if (cur.length) {
      out.push(cur);
      cur = [];
    }
  }
  if (cur.length) out.push(cur);
  return out;
}

type Scale = (v: number) => number;
const f1 = (v: number) => v.toFixed(1);

function bandSvg(s: Series, px: Scale, py: Scale): string {
  const band = s.band;
  if (!band) return '';
  let out = '';
  for (const run of runs(s.points.length, (i) => band[i] != null && known(band[i]![0]) && known(band[i]![1]))) {
    const steps = run.map((i) => s.points[i]!.x).join(',');
    if (run.length === 1) {
      const i = run[0]!;
      const x = f1(px(s.points[i]!.x));
      out += `<line class="band" data-steps="${steps}" x1="${x}" x2="${x}" y1="${f1(py(band[i]![0]))}" y2="${f1(py(band[i]![1]))}" stroke="${s.colour}" stroke-opacity="0.35" stroke-width="6"/>`;
      continue;
    }
    const upper = run.map((i) => `${f1(px(s.points[i]!.x))},${f1(py(band[i]![1]))}`);
    const lower = [...run].reverse().map((i) => `${f1(px(s.points[i]!.x))},${f1(py(band[i]![0]))}`);
    out += `<polygon class="band" data-steps="${steps}" points="${[...upper, ...lower].join(' ')}" fill="${s.colour}" fill-opacity="0.16" stroke="none"/>`;
  }
  return out;
}

function seriesSvg(s: Series, px: Scale, py: Scale): string {
  const dash = s.dashed ? ' stroke-dasharray="6 4"' : '';
  let out = `<g class="series" data-label="${escapeHtml(s.label)}">${bandSvg(s, px, py)}`;
  const dot = (i: number, r: number) => {
    const p = s.points[i]!;
    return `<circle data-steps="${p.x}" cx="${f1(px(p.x))}" cy="${f1(py(p.y!))}" r="${r}" fill="${s.colour}"><title>${escapeHtml(s.label)} at step ${p.x}: ${p.y!.toPrecision(4)}</title></circle>`;
  };
  for (const run of runs(s.points.length, (i) => known(s.points[i]!.y))) {
    if (run.length === 1 && !s.markers) out += dot(run[0]!, 3.5);
    if (run.length > 1) {
      const pts = run.map((i) => `${f1(px(s.points[i]!.x))},${f1(py(s.points[i]!.y!))}`).join(' ');
      out += `<polyline data-steps="${run.map((i) => s.points[i]!.x).join(',')}" points="${pts}" fill="none" stroke="${s.colour}" stroke-width="${s.width ?? 1.8}" stroke-linejoin="round"${dash}/>`;
    }
    if (s.markers) out += run.map((i) => dot(i, 3)).join('');
  }
  return `${out}</g>`;
}

function axisValues(series: readonly Series[]): number[] {
  const out: number[] = [];
  for (const s of series) {
    for (const p of s.points) if (known(p.y)) out.push(p.y);
    for (const b of s.band ?? []) if (b && known(b[0]) && known(b[1])) out.push(b[0], b[1]);
  }
  return out;
}

/** One chart: an <svg> with its title, axes, grid, series; the legend is HTML under it. */
export function lineChart(c: ChartSpec): string {
  const { width: W, height: H, left: L, top: T, bottom: B } = CHART;
  const leftSeries = c.series.filter((s) => !s.right);
  const rightSeries = c.series.filter((s) => s.right);
  const R = rightSeries.length ? CHART.right2 : CHART.right;
  const [x0, x1] = c.xDomain[1] > c.xDomain[0] ? c.xDomain : [c.xDomain[0] - 1, c.xDomain[0] + 1];
  const ya = niceAxis(axisValues(leftSeries));
  const yb = niceAxis(axisValues(rightSeries));
  const px: Scale = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const py = (a: typeof ya): Scale => (y) => T + (1 - (y - a.lo) / (a.hi - a.lo)) * (H - T - B);
  const pyA = py(ya);
  const pyB = py(yb);
  let g = '';
  for (const t of ya.ticks) {
    g += `<line x1="${L}" x2="${W - R}" y1="${f1(pyA(t))}" y2="${f1(pyA(t))}" stroke="${t === 0 ? '#9ca3af' : '#e5e7eb'}"/>`;
    g += `<text x="${L - 6}" y="${f1(pyA(t) + 4)}" text-anchor="end">${tickLabel(t, ya.step)}</text>`;
  }
  if (rightSeries.length) for (const t of yb.ticks) g += `<text x="${W - R + 6}" y="${f1(pyB(t) + 4)}">${tickLabel(t, yb.step)}</text>`;
  for (const x of xTicks(x0, x1)) {
    g += `<line x1="${f1(px(x))}" x2="${f1(px(x))}" y1="${H - B}" y2="${H - B + 4}" stroke="#6b7280"/>`;
    g += `<text x="${f1(px(x))}" y="${H - B + 16}" text-anchor="middle">${x}</text>`;
  }
  const frame = `<rect x="${L}" y="${T}" width="${W - L - R}" height="${H - T - B}" fill="none" stroke="#d1d5db"/>`;
  const midY = (T + H - B) / 2;
  const labels = `<text x="${(L + W - R) / 2}" y="${H - 6}" text-anchor="middle" class="lab">${escapeHtml(c.xLabel)}</text>`
    + `<text x="14" y="${midY}" text-anchor="middle" class="lab" transform="rotate(-90 14 ${midY})">${escapeHtml(c.yLabel)}</text>`
    + (c.y2Label && rightSeries.length ? `<text x="${W - 10}" y="${midY}" text-anchor="middle" class="lab" transform="rotate(90 ${W - 10} ${midY})">${escapeHtml(c.y2Label)}</text>` : '');
  const empty = axisValues(c.series).length === 0
    ? `<text x="${(L + W - R) / 2}" y="${midY}" text-anchor="middle" class="empty">${escapeHtml(c.emptyText ?? 'no values yet')}</text>` : '';
  const body = leftSeries.map((s) => seriesSvg(s, px, pyA)).join('') + rightSeries.map((s) => seriesSvg(s, px, pyB)).join('');
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="${escapeHtml(c.title)}" font-size="11" font-family="system-ui,sans-serif">`
    + `<title>${escapeHtml(c.title)}</title>${g}${frame}${labels}${body}${empty}</svg>`;
}

/** The chart's legend: one swatch per series, in the series' colour and dash. */
export function legendHtml(series: readonly Series[]): string {
  return `<div class="legend">${series.map((s) => `<span><i style="border-top:3px ${s.dashed ? 'dashed' : 'solid'} ${s.colour}"></i>${escapeHtml(s.label)}${s.right ? ' (right axis)' : ''}</span>`).join('')}</div>`;
}
