#!/usr/bin/env bash
# Every figure of bench/README.md from one run of the committed code, one harness after another on
# an otherwise idle machine: the kernels against the JS twin (`npm run bench -- --json`), against
# torch (`bench/peer.mjs`), the rollout schedules on both mixes, and the sync / async training
# steps. Writes DIR/<part>.json, DIR/<part>.log (stderr) and DIR/machine.json (CPU, SIMD path,
# cores, versions, the commit and load of the last invocation; parts.log: each part's commit and the load
# average before and after it).
#   bash bench/all.sh DIR [PART ...]    (parts: kernels peer rollout-bundle rollout-defaults train hf pythons endpoint episode)
# hf, pythons, endpoint and episode are not in the default list (they need transformers, and pythons
# Debian's /usr/bin/python3 with torch 1.13): name them.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: bash bench/all.sh DIR [kernels|peer|rollout-bundle|rollout-defaults|train|hf|pythons|endpoint|episode ...]" >&2; exit 2; }
dir=$(realpath -m "$1"); shift
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(kernels peer rollout-bundle rollout-defaults train)
mkdir -p "$dir"
[ -z "$(git status --porcelain -- src native bench learner models ':!bench/runs')" ] || echo "warning: src, native, bench, learner or models differ from the commit" >&2
npm run -s build:ts >&2
node -e '
const os = require("os"); const fs = require("fs"); const { execSync } = require("child_process");
const flags = (fs.readFileSync("/proc/cpuinfo", "utf8").match(/^flags\s*:(.*)$/m) || ["", ""])[1].trim().split(/\s+/);
const { nativeInfo } = require("./dist/index.js");
const doc = { date: new Date().toISOString(), commit: execSync("git rev-parse HEAD").toString().trim(),
  cpu: os.cpus()[0] && os.cpus()[0].model, cores: os.cpus().length, memGiB: +(os.totalmem() / 2 ** 30).toFixed(1),
  simdFlags: flags.filter((f) => /^(avx2|avx512f|avx512bw|avx512vl|fma)$/.test(f)), native: nativeInfo(),
  node: process.version, loadavg: os.loadavg() };
fs.writeFileSync(process.argv[1], JSON.stringify(doc, null, 1) + "\n");
' "$dir/machine.json"
for p in "${parts[@]}"; do
  case "$p" in
    kernels) cmd=(node bench/run.mjs --json) ;;
    peer) cmd=(node bench/peer.mjs --json --rounds 3) ;;
    rollout-bundle) cmd=(node bench/rollout.mjs --mix bundle --reps 2 --json) ;;
    rollout-defaults) cmd=(node bench/rollout.mjs --mix defaults --reps 1 --json) ;;
    # arms name:asyncLevel:ortThreads:torchThreads; the async ones split the 2 cores three ways
    train) cmd=(node bench/train-overlap.mjs --out "$dir/train-runs" --steps 6 --questions-per-step 2 --eval-every 6 --eval-questions 20 --rounds 2
      --arms sync:0:2:2,async-11:1:1:1,async-12:1:1:2,async-22:1:2:2) ;;
    hf) cmd=(node bench/hf.mjs --json) ;;
    pythons) cmd=(node bench/learner.mjs --pythons python3,/usr/bin/python3 --samples 8 --tokens 250 --reps 5 --json) ;;
    endpoint) cmd=(node bench/endpoint.mjs --json) ;;
    episode) cmd=(node bench/episode.mjs --json) ;;
    *) echo "unknown part $p" >&2; exit 2 ;;
  esac
  echo "$(date -u +%FT%TZ) $p at $(git rev-parse --short HEAD): ${cmd[*]} (load $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$dir/parts.log" >&2
  "${cmd[@]}" > "$dir/$p.json.part" 2> "$dir/$p.log"
  mv "$dir/$p.json.part" "$dir/$p.json"
  rm -rf "$dir"/train-runs/*/checkpoints  # the runs' weights (13 MB a step): metrics.jsonl and summary.json stay
  echo "$(date -u +%FT%TZ) $p done (load $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$dir/parts.log" >&2
done
