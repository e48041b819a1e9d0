// Where memoryAdvantage's native call spends its time (bench/README.md "Advantage stage"), at the
// bench's shape (B = 2048, T = 4096, 3 spans per row): the addon called directly, the checked
// wrapper, the JS twin's core and a full zero write; per phase the median of 60 calls (each after
// one event-loop turn, as in the bench) and V8's GC time per call (perf_hooks 'gc' entries).
//   npm run build:ts && node bench/profile-memory-advantage.mjs
import { createRequire } from 'node:module';
import { PerformanceObserver } from 'node:perf_hooks';
import { root } from './args.mjs';

const require = createRequire(import.meta.url);
const dist = (f) => require(`${root}/dist/${f}`);
const mempo = dist('index.js');
const { nativeAddon } = dist('kernels/backend.js');
const { denseGroups } = dist('kernels/groups.js');
const addon = nativeAddon();
if (!addon) throw new Error('no native addon: run npm run build first');

let seed = 7;
const r = () => (seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0) / 2 ** 32;
const B = 2048, T = 4096, M = B * 3;
const spans = new Int32Array(M * 3);
for (let m = 0; m < M; m++) {
  const start = (m % 3) * 1300 + Math.floor(r() * 200);
  spans.set([Math.floor(m / 3), start, start + 40 + Math.floor(r() * 80)], 3 * m);
}
const rewards = new Float32Array(M).map(() => r() - 0.5);
const rewards64 = Float64Array.from(rewards);
const memGroups = Array.from({ length: M }, (_, m) => Math.floor(m / 48));
const groups = denseGroups(memGroups, 'memGroups', M, 'M');

let gcMs = 0, gcRuns = 0;
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    gcMs += e.duration;
    gcRuns++;
  }
}).observe({ entryTypes: ['gc'] });
const median = (xs) => xs.slice().sort((a, b) => a - b)[xs.length >> 1];
const settle = () => new Promise((res) => setTimeout(res, 50));

async function phase(name, f, n = 60) {
  const ts = [];
  await settle();
  gcMs = 0;
  gcRuns = 0;
  for (let i = 0; i < n; i++) {
    await new Promise((res) => setImmediate(res));
    const t = performance.now();
    f();
    ts.push(performance.now() - t);
  }
  await settle();
  console.log(`${name.padEnd(52)} median ${median(ts).toFixed(2)} ms  min ${Math.min(...ts).toFixed(2)}  max ${Math.max(...ts).toFixed(2)}  GC ${gcRuns} runs, ${(gcMs / n).toFixed(2)} ms/call`);
}

await phase('addon.memoryAdvantage, direct', () => addon.memoryAdvantage(rewards64, groups.ids, groups.count, spans, B, T, 1e-6, true));
await phase('memoryAdvantage (checks + addon)', () => mempo.memoryAdvantage(rewards, memGroups, spans, B, T));
await phase('denseGroups of the 6,144 labels', () => denseGroups(memGroups, 'memGroups', M, 'M'));
await phase('JS twin core: new Float32Array(B*T) + span fills', () => {
  const out = new Float32Array(B * T);
  for (let m = 0; m < M; m++) {
    const base = spans[3 * m] * T;
    out.fill(0.1, base + spans[3 * m + 1], base + spans[3 * m + 2]);
  }
});
await phase('new Float32Array(B*T).fill(0): a full write', () => new Float32Array(B * T).fill(0));
