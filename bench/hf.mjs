// `node bench/hf.mjs`: a Hugging Face model on mempo's paths against transformers/torch on the same
// work, interleaved in one run (issue 44 item 6). Two parts, both on the zoo's tiny Qwen3 (real
// 151,936-token vocabulary, hidden 64, 2 layers; test/python/zoo.py) unless --model names an HF
// directory that already has its ONNX export:
//   decode   the embedded runtime (CausalLM on DIR/onnx/model.onnx) against transformers' own
//            `generate`: the same B prompts of P random ids, N new tokens each, greedy, no eos stop;
//            the tokens of both are compared. Also N = 1 (the prefill and one token), so that the
//            decode alone is B (N - 1) / (t_N - t_1).
//   learner  the mempo learner's step through its API (HttpLearner: forward with grad, backward of
//            the mean cross-entropy's gradient, optimStep AdamW) against a plain torch step
//            (transformers forward with full logits, the same loss, backward, the same clipping and
//            AdamW), the same batch of S samples of about T tokens.
// Each round runs both contestants of a part, the order alternating round by round; per-round ratios
// (torch time / mempo time = mempo tokens/s over torch tokens/s), median and range. The torch side
// is bench/hf_torch.py, one long-lived process; neither side's process start or model load is timed.
// Flags: --model DIR, --threads 1 (ORT intra-op, torch and the learner), --rounds 5, --batch 4,
// --prompt 32, --new 64, --samples 8, --tokens 128, --skip-decode, --skip-learner, --json.
import { execFileSync, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createInterface } from 'node:readline';
import os from 'node:os';
import path from 'node:path';
import { root, flag, value, int, median, spread } from './args.mjs';

const require = createRequire(import.meta.url);
const mempo = require(path.join(root, 'dist', 'index.js'));

const threads = int('--threads', 1);
const rounds = int('--rounds', 5);
const B = int('--batch', 4);
const P = int('--prompt', 32);
const N = int('--new', 64);
const S = int('--samples', 8);
const T = int('--tokens', 128);
const json = flag('--json');
const log = json ? (...a) => console.error(...a) : (...a) => console.log(...a);
const python = process.env.MEMPO_PYTHON || 'python3';


const flags = (readFileSync('/proc/cpuinfo', 'utf8').match(/^flags\s*:(.*)$/m) || ['', ''])[1].trim().split(/\s+/);
const machine = {
  cpu: os.cpus()[0]?.model ?? 'unknown', cores: os.cpus().length, node: process.version,
  simdFlags: flags.filter((f) => /^(avx2|avx512f|fma)$/.test(f)), native: mempo.nativeInfo(),
  loadavgBefore: os.loadavg().map((x) => +x.toFixed(2)), date: new Date().toISOString(),
};

// The model: the given HF directory, or the zoo's Qwen3 built and exported into a directory of our own.
let tmp;
let dir = value('--model', '');
if (dir === '') {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'mempo-bench-hf-'));
  // the directory made here goes however the run ends (a failed build or export included)
  process.on('exit', () => rmSync(tmp, { recursive: true, force: true }));
  dir = path.join(tmp, 'qwen3');
  const env = { ...process.env, PYTHONPATH: path.join(root, 'learner') };
  execFileSync(python, [path.join(root, 'test', 'python', 'zoo.py'), 'qwen3', dir], { env, stdio: ['ignore', 'ignore', 'inherit'] });
  execFileSync(python, ['-m', 'mempo_learner.export_onnx', dir], { env, stdio: ['ignore', 'ignore', 'inherit'] });
} else if (!existsSync(path.join(dir, 'onnx', 'model.onnx'))) {
  throw new Error(`--model ${dir}: no onnx/model.onnx; make it with PYTHONPATH=learner python3 -m mempo_learner.export_onnx ${dir}`);
}
const config = JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8'));

/** bench/hf_torch.py as a worker: one JSON request, one JSON answer. */
function startTorch() {
  const proc = spawn(python, [path.join(root, 'bench', 'hf_torch.py'), dir, String(threads)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: proc.stdout });
  const waiting = [];
  lines.on('line', (l) => waiting.shift()?.resolve(JSON.parse(l)));
  proc.once('exit', (code, sig) => { for (const w of waiting.splice(0)) w.reject(new Error(`hf_torch.py exited (${code ?? sig})`)); });
  const next = () => new Promise((resolve, reject) => waiting.push({ resolve, reject }));
  const ready = next();
  return {
    ready,
    ask: (req) => { const p = next(); proc.stdin.write(JSON.stringify(req) + '\n'); return p; },
    close: () => { proc.stdin.end(); return new Promise((r) => (proc.exitCode !== null ? r() : proc.once('exit', r))); },
  };
}

const rnd = mempo.createRng(11, 0);
// ids below the special tokens (Qwen3's start at 151,643): random text, as any prompt is to random weights
const idHi = Math.min(config.vocab_size, 151643);
const randomIds = (n) => Array.from({ length: n }, () => Math.floor(rnd() * idHi));

const torch = startTorch();
const info = await torch.ready;
const result = { machine, model: { dir: value('--model', '') || 'zoo qwen3 (test/python/zoo.py)', architecture: config.architectures?.[0], vocab: config.vocab_size, hidden: config.hidden_size, layers: config.num_hidden_layers }, threads, rounds, torch: info.torch, transformers: info.transformers };
log(`machine: ${machine.cpu}, ${machine.cores} cores, SIMD ${machine.native.simd}, Node ${machine.node}, load ${machine.loadavgBefore.join(' ')}; torch ${info.torch}, transformers ${info.transformers}; ${threads} thread(s) each`);

try {
  if (!flag('--skip-decode')) {
    const model = await mempo.CausalLM.load(dir, { sessionOptions: { intraOpNumThreads: threads, interOpNumThreads: 1 } });
    const prompts = Array.from({ length: B }, () => randomIds(P));
    const ours = async (n) => {
      const t = performance.now();
      const r = await model.generate(prompts.map((ids) => ({ ids })), { maxNewTokens: n, temperature: 0, eosTokenIds: [], maxBatchSize: B, decode: false });
      return { s: (performance.now() - t) / 1000, tokens: r.map((x) => x.tokenIds) };
    };
    const theirs = (n) => torch.ask({ op: 'generate', ids: prompts, new: n });
    await ours(N); await theirs(N); // warm-up
    const rows = [];
    for (let r = 0; r < rounds; r++) {
      const pair = {};
      for (const who of r % 2 === 0 ? ['mempo', 'torch'] : ['torch', 'mempo']) {
        const f = who === 'mempo' ? ours : theirs;
        pair[who] = { full: await f(N), one: await f(1) };
      }
      rows.push(pair);
    }
    const same = rows[0].mempo.full.tokens.reduce((a, t, i) => a + t.filter((x, j) => x === rows[0].torch.full.tokens[i][j]).length, 0);
    const firstDiff = rows[0].mempo.full.tokens.map((t, i) => { const j = t.findIndex((x, k) => x !== rows[0].torch.full.tokens[i][k]); return j < 0 ? N : j; });
    const tps = (who, k) => rows.map((x) => (k === 'full' ? B * N / x[who].full.s : B * (N - 1) / (x[who].full.s - x[who].one.s)));
    await model.dispose();
    result.decode = {
      batch: B, prompt: P, new: N,
      identical_tokens: `${same} / ${B * N}`, first_difference_per_row: firstDiff,
      mempo_tokens_per_s: Math.round(median(tps('mempo', 'full'))), torch_tokens_per_s: Math.round(median(tps('torch', 'full'))),
      mempo_decode_only_tokens_per_s: Math.round(median(tps('mempo', 'decode'))), torch_decode_only_tokens_per_s: Math.round(median(tps('torch', 'decode'))),
      ratio: spread(rows.map((x) => x.torch.full.s / x.mempo.full.s)),
      decode_only_ratio: spread(rows.map((x) => (x.torch.full.s - x.torch.one.s) / (x.mempo.full.s - x.mempo.one.s))),
      seconds: rows.map((x) => ({ mempo: +x.mempo.full.s.toFixed(4), mempo_n1: +x.mempo.one.s.toFixed(4), torch: +x.torch.full.s.toFixed(4), torch_n1: +x.torch.one.s.toFixed(4) })),
    };
    const d = result.decode;
    log(`decode, B ${B} × (${P} prompt + ${N} new) greedy: mempo ${d.mempo_tokens_per_s} tok/s, transformers generate ${d.torch_tokens_per_s} tok/s: ${d.ratio.median}× (${d.ratio.min}–${d.ratio.max}); ` +
      `decode alone ${d.mempo_decode_only_tokens_per_s} against ${d.torch_decode_only_tokens_per_s} tok/s: ${d.decode_only_ratio.median}× (${d.decode_only_ratio.min}–${d.decode_only_ratio.max}); identical tokens ${d.identical_tokens}`);
  }

  if (!flag('--skip-learner')) {
    const samples = Array.from({ length: S }, () => ({ ids: randomIds(Math.round(T * (0.9 + 0.2 * rnd()))), targetStart: 1 }));
    const tokens = samples.reduce((a, s) => a + s.ids.length, 0);
    const targets = tokens - S;
    const optim = { lr: 1e-6, weightDecay: 0.01, maxGradNorm: 1, betas: [0.9, 0.999], eps: 1e-8 };
    const learner = await mempo.spawnLearner({ model: dir, threads, seed: 0, python, device: 'cpu' });
    try {
      const grad = samples.map((s) => new Float32Array(s.ids.length - s.targetStart).fill(-1 / targets)); // d(mean CE)/d(log p)
      const ours = async () => {
        const t = performance.now();
        await learner.forward(samples, { grad: true });
        await learner.backward(grad);
        await learner.optimStep(optim);
        return (performance.now() - t) / 1000;
      };
      const theirs = async () => (await torch.ask({ op: 'train', ids: samples.map((s) => s.ids), target_start: samples.map((s) => s.targetStart),
        optim: { lr: optim.lr, weight_decay: optim.weightDecay, max_grad_norm: optim.maxGradNorm, betas: optim.betas, eps: optim.eps } })).s;
      await ours(); await theirs(); // warm-up (AdamW state made)
      const rows = [];
      for (let r = 0; r < rounds; r++) {
        const pair = {};
        for (const who of r % 2 === 0 ? ['mempo', 'torch'] : ['torch', 'mempo']) pair[who] = await (who === 'mempo' ? ours : theirs)();
        rows.push(pair);
      }
      result.learner = {
        samples: S, tokens,
        mempo_tokens_per_s: Math.round(median(rows.map((x) => tokens / x.mempo))), torch_tokens_per_s: Math.round(median(rows.map((x) => tokens / x.torch))),
        ratio: spread(rows.map((x) => x.torch / x.mempo)),
        seconds: rows.map((x) => ({ mempo: +x.mempo.toFixed(4), torch: +x.torch.toFixed(4) })),
      };
      const l = result.learner;
      log(`learner step, ${S} samples, ${tokens} tokens: mempo learner ${l.mempo_tokens_per_s} tok/s, plain torch ${l.torch_tokens_per_s} tok/s: ${l.ratio.median}× (${l.ratio.min}–${l.ratio.max})`);
    } finally {
      await learner.close();
    }
  }
} finally {
  await torch.close();
}
result.machine.loadavgAfter = os.loadavg().map((x) => +x.toFixed(2));
if (json) console.log(JSON.stringify(result, null, 1));
