/**
 * train-report.html in a real headless browser (Debian's chromium): the DOM it parses has the six
 * charts with their curves, and a screenshot shows them. Skipped only when no chromium binary is
 * installed (`apt-get install -y chromium`).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromiumBinary } from '../helpers';
import { inflateSync } from 'node:zlib';
import { trainReportHtml } from '../../src/io/train-report';
import type { StepMetrics } from '../../src/train/metrics';

const CHROMIUM = chromiumBinary();
const SKIP = CHROMIUM === null ? 'no chromium binary on PATH (apt-get install -y chromium)' : null;
if (SKIP) console.warn(`train-report-browser.test.ts skipped: ${SKIP}`);
const maybe = SKIP ? (name: string, fn: () => void) => it.skip(`${name} [skipped: ${SKIP}]`, fn) : it;

/** Twelve hand-made steps: a null score at step 5 (a gap), evaluation every 4 steps. */
function metrics(): StepMetrics[] {
  const score = [0.2, 0.25, 0.24, 0.3, null, 0.34, 0.38, 0.37, 0.42, 0.45, 0.44, 0.5];
  return score.map((meanScore, i) => {
    const step = i + 1;
    return {
      step, questions: 4, trajectories: 16, trained: 16, meanScore, em: 0.1 + 0.02 * step, formatValidRate: 0.9,
      memoryReward: { mean: 0.01 * (step % 3) - 0.01, std: 0.04 }, pFull: 0.4 + 0.01 * step, pMem: 0.41 + 0.01 * step,
      outcomeAdvantage: { mean: 0, std: 1 }, memoryAdvantage: { mean: 0, std: 0.2 }, loss: 0.05 - 0.004 * step,
      clipFrac: 0.01 * (step % 4), approxKl: 0.001 * step, klRef: 0.0005 * step, gradNorm: 3 - 0.1 * step, lr: 1e-5,
      tokens: { generated: 5000, trained: 4200 },
      wallMs: { rollout: 4000, scoring: 200, learnerForward: 600, learnerBackward: 900, loss: 20, optimiser: 80, save: 150, sync: 60, total: 6100 },
      eval: step % 4 === 0 ? { em: 0.1 * (step / 4), score: 0.1, byHops: {}, byObjectives: { '1': 0.15 * (step / 4), '2': 0.05 * (step / 4) } } : null,
    };
  });
}

function chromium(args: string[], profile: string): string {
  return execFileSync(CHROMIUM!, ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', `--user-data-dir=${profile}`, ...args], {
    encoding: 'utf8', timeout: 90_000, maxBuffer: 64 << 20, stdio: ['ignore', 'pipe', 'pipe'],
  });
}

function paeth(a: number, b: number, c: number): number {
  const p = a + b - c;
  const pa = Math.abs(p - a);
  const pb = Math.abs(p - b);
  const pc = Math.abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

/** RGB pixels of an 8-bit RGB / RGBA PNG (the filters of the PNG spec, §9). */
function decodePng(buf: Buffer): { width: number; height: number; px: (x: number, y: number) => [number, number, number] } {
  const width = buf.readUInt32BE(16);
  const height = buf.readUInt32BE(20);
  if (buf[24] !== 8 || (buf[25] !== 2 && buf[25] !== 6)) throw new Error(`PNG bit depth ${buf[24]} colour type ${buf[25]}: not 8-bit RGB(A)`);
  const bpp = buf[25] === 6 ? 4 : 3;
  const idat: Buffer[] = [];
  for (let o = 8; o < buf.length; ) {
    const len = buf.readUInt32BE(o);
    if (buf.toString('ascii', o + 4, o + 8) === 'IDAT') idat.push(buf.subarray(o + 8, o + 8 + len));
    o += 12 + len;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * bpp;
  const out = Buffer.alloc(stride * height);
  for (let y = 0; y < height; y++) {
    const f = raw[y * (stride + 1)]!;
    for (let i = 0; i < stride; i++) {
      const x = raw[y * (stride + 1) + 1 + i]!;
      const a = i >= bpp ? out[y * stride + i - bpp]! : 0;
      const b = y > 0 ? out[(y - 1) * stride + i]! : 0;
      const c = i >= bpp && y > 0 ? out[(y - 1) * stride + i - bpp]! : 0;
      out[y * stride + i] = (x + (f === 0 ? 0 : f === 1 ? a : f === 2 ? b : f === 3 ? (a + b) >> 1 : paeth(a, b, c))) & 255;
    }
  }
  return { width, height, px: (x, y) => [out[y * stride + x * bpp]!, out[y * stride + x * bpp + 1]!, out[y * stride + x * bpp + 2]!] };
}

describe('train-report.html in headless chromium', () => {
  let dir = '';
  let file = '';
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'mempo-train-report-'));
    file = join(dir, 'train-report.html');
    writeFileSync(file, trainReportHtml(metrics(), { title: 'mempo train <12 steps> & "demo"', memoryReward: true }));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  maybe('parses into six chart SVGs with their curves, and no parse error', () => {
    const dom = chromium(['--dump-dom', `file://${file}`], join(dir, 'profile-dom'));
    expect(dom).not.toMatch(/This page contains the following errors|error on line/i);
    expect(dom).toContain('<h1>mempo train &lt;12 steps&gt; &amp; "demo"</h1>');
    const ids = ['chart-score', 'chart-eval', 'chart-memory', 'chart-kl', 'chart-clip', 'chart-grad'];
    for (const id of ids) {
      const fig = new RegExp(`<figure class="chart" id="${id}">([\\s\\S]*?)</figure>`).exec(dom);
      expect(fig).not.toBeNull();
      // The browser re-serialises the source's self-closing tags: these are parsed SVG elements.
      expect(fig![1]).toMatch(/<svg [^>]*viewBox="0 0 560 250"[\s\S]*<\/svg>/);
      expect(fig![1]).toMatch(/<polyline [^>]*points="[\d.]+,[\d.]+ [\d.]+,[\d.]+[^"]*"[^>]*><\/polyline>/);
    }
    expect(dom.match(/<svg /g)).toHaveLength(6);
    // The null score at step 5 splits the mean-score curve in two; eval ran at steps 4, 8, 12.
    expect(dom).toMatch(/data-label="mean score"><polyline data-steps="1,2,3,4"[^>]*><\/polyline><polyline data-steps="6,7,8,9,10,11,12"/);
    expect(dom).toMatch(/data-label="EM, all questions"><polyline data-steps="4,8,12"/);
    expect(dom).toContain('<polygon class="band" data-steps="1,2,3,4,5,6,7,8,9,10,11,12"');
  });

  maybe('screenshots to a 1200×1800 PNG that shows the curves', () => {
    const png = join(dir, 'train-report.png');
    chromium([`--screenshot=${png}`, '--window-size=1200,1800', `file://${file}`], join(dir, 'profile-shot'));
    const buf = readFileSync(png);
    expect(buf.subarray(0, 8).toString('hex')).toBe('89504e470d0a1a0a');
    const img = decodePng(buf);
    expect([img.width, img.height]).toEqual([1200, 1800]);
    // A blank 1200×1800 page is ~10 kB here; the report with its charts ~150 kB.
    expect(buf.length).toBeGreaterThan(40_000);
    // Pixels in the colours of the mean-score curve (#2563eb) and the clip fraction (#ca8a04): the SVG was drawn.
    const count = (q: readonly number[]) => {
      let n = 0;
      for (let y = 0; y < img.height; y++) {
        for (let x = 0; x < img.width; x++) {
          const p = img.px(x, y);
          if (Math.abs(p[0] - q[0]!) + Math.abs(p[1] - q[1]!) + Math.abs(p[2] - q[2]!) < 40) n++;
        }
      }
      return n;
    };
    expect(count([0x25, 0x63, 0xeb])).toBeGreaterThan(300);
    expect(count([0xca, 0x8a, 0x04])).toBeGreaterThan(300);
  });
});
