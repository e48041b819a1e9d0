/**
 * report.html: a self-contained page (no external assets). Per question, the group's
 * trajectories with every response token coloured by its final advantage (blue > 0, red < 0),
 * mem spans outlined, observations greyed, and each round's outcome / memory reward beside it;
 * one summary chart (memory reward against outcome, inline SVG).
 */
import { escapeHtml } from './svg-chart';
import { maxOf } from '../util';
import type { BatchRecord } from '../contracts';
import type { RunSummary } from '../pipeline/summary';

export interface ReportOptions {
  /** Text of one token id (tokenizer.piece). */
  pieceOf: (id: number) => string;
  title?: string;
  /** Most questions shown (default 12); the chart uses every record. */
  maxQuestions?: number;
  summary?: RunSummary;
  /** Extra lines shown under the title (options, paths). */
  notes?: string[];
}

const esc = escapeHtml;

function fmt(x: number | null | undefined, digits = 3): string {
  if (x === null || x === undefined || Number.isNaN(x)) return '–';
  return (x >= 0 ? '+' : '') + x.toFixed(digits);
}

function colour(a: number, scale: number): string {
  const t = Math.max(-1, Math.min(1, scale > 0 ? a / scale : 0));
  const alpha = (0.08 + 0.62 * Math.abs(t)).toFixed(2);
  return t >= 0 ? `rgba(37,99,235,${alpha})` : `rgba(220,38,38,${alpha})`;
}

function tokensHtml(r: BatchRecord, from: number, to: number, pieceOf: (id: number) => string, scale: number, memSpan: [number, number] | null): string {
  let out = '';
  for (let i = from; i < to; i++) {
    if (memSpan !== null && i === memSpan[0]) out += '<span class="mem" title="mem span">';
    const text = esc(pieceOf(r.responseIds[i]!));
    if (r.responseMask[i] === 0) out += `<span class="obs">${text}</span>`;
    else {
      const a = r.advantages[i] ?? 0;
      out += `<span class="t" style="background:${colour(a, scale)}" title="#${i} adv ${a.toFixed(4)} (outcome ${(r.outcomeAdvantage[i] ?? 0).toFixed(4)}, memory ${(r.memoryAdvantage[i] ?? 0).toFixed(4)})">${text}</span>`;
    }
    if (memSpan !== null && i === memSpan[1] - 1) out += '</span>';
  }
  return out;
}

function chartSvg(records: readonly BatchRecord[]): string {
  const pts: Array<{ x: number; y: number }> = [];
  for (const r of records) {
    if (r.excluded || r.score === null) continue;
    for (const rd of r.rounds) if (rd.memReward !== null) pts.push({ x: r.score, y: rd.memReward });
  }
  const W = 560;
  const H = 260;
  const L = 56;
  const B = 36;
  const xs = pts.map((p) => p.x);
  const ys = pts.map((p) => p.y);
  const x0 = -maxOf(0, xs.map((x) => -x));
  const x1 = maxOf(1, xs);
  const ymax = maxOf(0.05, ys.map(Math.abs));
  const px = (x: number) => L + ((x - x0) / (x1 - x0 || 1)) * (W - L - 20);
  const py = (y: number) => 10 + (1 - (y + ymax) / (2 * ymax)) * (H - B - 10);
  let dots = '';
  pts.forEach((p, i) => {
    // Deterministic horizontal jitter so that equal scores do not stack.
    const j = (((i * 2654435761) >>> 0) % 1000) / 1000 - 0.5;
    dots += `<circle cx="${(px(p.x) + j * 36).toFixed(1)}" cy="${py(p.y).toFixed(1)}" r="3" fill="${p.y >= 0 ? '#2563eb' : '#dc2626'}" fill-opacity="0.55"/>`;
  });
  // Mean memory reward per outcome value.
  const byX = new Map<number, number[]>();
  for (const p of pts) {
    const a = byX.get(p.x) ?? [];
    a.push(p.y);
    byX.set(p.x, a);
  }
  let means = '';
  for (const [x, v] of byX) {
    const m = v.reduce((a, y) => a + y, 0) / v.length;
    means += `<line x1="${px(x) - 24}" x2="${px(x) + 24}" y1="${py(m)}" y2="${py(m)}" stroke="#111" stroke-width="2"/><text x="${px(x) + 28}" y="${py(m) + 4}" font-size="11">mean ${fmt(m)} (n=${v.length})</text>`;
  }
  const ticks = [-ymax, -ymax / 2, 0, ymax / 2, ymax]
    .map((y) => `<line x1="${L - 4}" x2="${W - 20}" y1="${py(y)}" y2="${py(y)}" stroke="#e5e7eb"/><text x="${L - 8}" y="${py(y) + 4}" font-size="11" text-anchor="end">${y.toFixed(2)}</text>`)
    .join('');
  const xt = [...new Set([x0, x1, ...xs])].sort((a, b) => a - b).slice(0, 11)
    .map((x) => `<text x="${px(x)}" y="${H - B + 16}" font-size="11" text-anchor="middle">${x.toFixed(2)}</text>`).join('');
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" role="img" aria-label="memory reward against outcome">
${ticks}${xt}${dots}${means}
<text x="${(L + W - 20) / 2}" y="${H - 4}" font-size="12" text-anchor="middle">outcome score of the trajectory</text>
<text x="14" y="${(H - B) / 2}" font-size="12" text-anchor="middle" transform="rotate(-90 14 ${(H - B) / 2})">memory reward P_mem − P_full</text>
${pts.length === 0 ? `<text x="${W / 2}" y="${H / 2}" font-size="13" text-anchor="middle" fill="#6b7280">no memory rewards in this batch</text>` : ''}
</svg>`;
}

const CSS = `
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#111;max-width:1240px}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:28px 0 6px;border-top:1px solid #e5e7eb;padding-top:14px}
.notes{color:#4b5563;font-size:12px} .grid{display:flex;gap:28px;flex-wrap:wrap;align-items:flex-start}
table.sum{border-collapse:collapse;font-size:13px} table.sum td{padding:2px 10px 2px 0} table.sum td:first-child{color:#4b5563}
.traj{border:1px solid #e5e7eb;border-radius:6px;margin:8px 0;padding:6px 10px}
.traj.ok{border-left:4px solid #16a34a} .traj.bad{border-left:4px solid #dc2626} .traj.err{border-left:4px solid #9ca3af;background:#f9fafb}
.head{font-size:12px;color:#374151;margin-bottom:4px} .head b{color:#111}
.round{display:grid;grid-template-columns:1fr 230px;gap:12px;border-top:1px dashed #f0f0f0;padding:3px 0}
.toks{font:12px/1.7 ui-monospace,SFMono-Regular,Menlo,monospace;white-space:pre-wrap;word-break:break-word}
.t{border-radius:2px} .obs{color:#9ca3af} .mem{outline:2px solid #7c3aed;outline-offset:1px;border-radius:2px}
.side{font-size:11.5px;color:#374151} .side .v{color:#b91c1c} .legend span{padding:1px 6px;border-radius:3px;margin-right:6px;font-size:12px}
`;

/**
 * Advantage magnitude that gets the full colour: the 80th percentile of |advantage| over the
 * trajectories' outcome values and the mem spans' values (a few outliers do not wash out the page).
 */
function colourScale(records: readonly BatchRecord[]): number {
  const xs: number[] = [];
  for (const r of records) {
    const first = r.responseMask.indexOf(1);
    if (first >= 0) xs.push(Math.abs(r.advantages[first] ?? 0));
    for (const rd of r.rounds) if (rd.memSpan !== null && rd.memReward !== null) xs.push(Math.abs(r.advantages[rd.memSpan[0]] ?? 0));
  }
  if (xs.length === 0) return 1;
  xs.sort((a, b) => a - b);
  return Math.max(1e-6, xs[Math.min(xs.length - 1, Math.floor(0.8 * xs.length))]!);
}

export function renderReport(records: readonly BatchRecord[], options: ReportOptions): string {
  const title = options.title ?? 'mempo rollout';
  const maxQ = options.maxQuestions ?? 12;
  const scale = colourScale(records);
  const groups = new Map<string, BatchRecord[]>();
  for (const r of records) {
    let g = groups.get(r.uid);
    if (!g) groups.set(r.uid, (g = []));
    g.push(r);
  }
  const s = options.summary;
  const sumRows: Array<[string, string]> = s ? [
    ['questions / trajectories', `${s.questions} / ${s.trajectories}${s.excluded ? ` (${s.excluded} excluded)` : ''}`],
    ['mean score', fmt(s.meanScore)],
    ['format-valid trajectories', s.formatValidRate === null ? '–' : `${(100 * s.formatValidRate).toFixed(1)}%`],
    ['memory reward mean ± std', `${fmt(s.memoryReward.mean, 4)} ± ${s.memoryReward.std === null ? '–' : s.memoryReward.std.toFixed(4)} (n=${s.memoryReward.count})`],
    ['mean turns', s.meanTurns === null ? '–' : s.meanTurns.toFixed(2)],
    ['tokens generated', String(s.tokensGenerated)],
    // Runs with the page tool only: nothing changes for the others.
    ...(s.access === undefined ? [] : [
      ['access rounds / pages opened / chunks shown', `${s.access.rounds} / ${s.access.pagesOpened} / ${s.access.chunksShown}`],
      ...(s.access.pageQuestions === undefined ? [] : [
        ['page questions EM', `${(100 * s.access.pageQuestions.em).toFixed(1)}% (${s.access.pageQuestions.questions} question${s.access.pageQuestions.questions === 1 ? '' : 's'})`],
      ]),
    ] as Array<[string, string]>),
  ] : [];
  let body = '';
  let shown = 0;
  for (const [uid, g] of groups) {
    if (shown++ >= maxQ) break;
    const first = g[0]!;
    const scores = g.filter((r) => !r.excluded).map((r) => r.score ?? 0);
    const mean = scores.length ? scores.reduce((a, x) => a + x, 0) / scores.length : null;
    body += `<h2>${esc(uid)}: ${esc(first.question)}</h2><div class="notes">gold: ${esc(first.golds.join(' | '))} · group mean score ${fmt(mean, 2)} · ${g.length} samples</div>`;
    for (const r of [...g].sort((a, b) => a.sample - b.sample)) {
      const cls = r.excluded ? 'err' : (r.score ?? 0) > 0 ? 'ok' : 'bad';
      const outcomeAdv = r.excluded ? null : r.outcomeAdvantage[r.responseMask.indexOf(1)] ?? 0;
      body += `<div class="traj ${cls}"><div class="head"><b>sample ${r.sample}</b> · score ${r.score === null ? 'excluded' : r.score} · outcome advantage ${fmt(outcomeAdv)} · ${r.rounds.length} round${r.rounds.length === 1 ? '' : 's'} · ${esc(r.doneReason ?? '')}${r.formatValid ? '' : ` · <span class="v">format: ${esc(r.formatReason ?? '')}</span>`}${r.error ? ` · <span class="v">${r.doneReason === 'backend-error' ? 'server error' : 'tool error'}: ${esc(r.error)}</span>` : ''}</div>`;
      for (const rd of r.rounds) {
        const end = rd.observation ? rd.observation.end : rd.end;
        const side = [`round ${rd.index}${rd.action ? ` · ${rd.action}` : ''}`];
        if (rd.memReward !== null) side.push(`memory reward <b>${fmt(rd.memReward, 4)}</b><br>P_full ${rd.pFull!.toFixed(3)} · P_mem ${rd.pMem!.toFixed(3)}`);
        else side.push(rd.index === 1 ? 'no memory reward (round 1)' : rd.memSpan === null ? 'no memory reward (no closed &lt;mem&gt;)' : 'no memory reward');
        if (rd.memSpan && rd.memReward !== null) side.push(`memory advantage ${fmt(r.memoryAdvantage[rd.memSpan[0]] ?? 0)}`);
        if (rd.violations.length) side.push(`<span class="v">${rd.violations.map((v) => esc(v.message)).join('<br>')}</span>`);
        body += `<div class="round"><div class="toks">${tokensHtml(r, rd.start, end, options.pieceOf, scale, rd.memSpan)}</div><div class="side">${side.join('<br>')}</div></div>`;
      }
      body += '</div>';
    }
  }
  if (groups.size > maxQ) body += `<p class="notes">${groups.size - maxQ} more questions in batch.jsonl.</p>`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title><style>${CSS}</style></head>
<body>
<h1>${esc(title)}</h1>
${(options.notes ?? []).map((n) => `<div class="notes">${esc(n)}</div>`).join('')}
<div class="grid" style="margin-top:12px">
<div><table class="sum">${sumRows.map(([k, v]) => `<tr><td>${esc(k)}</td><td>${esc(v)}</td></tr>`).join('')}</table>
<p class="legend">token colour = final advantage: <span style="background:${colour(scale, scale)}">≥ +${scale.toFixed(2)}</span><span style="background:${colour(-scale, scale)}">≤ −${scale.toFixed(2)}</span><span class="mem">mem span</span><span class="obs">observation (masked)</span></p></div>
<div>${chartSvg(records)}</div>
</div>
${body}
</body></html>
`;
}
