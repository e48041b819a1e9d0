#!/usr/bin/env bash
# Stage 2's bar (training/README.md "Stage 2: probes without moving the agent") for one candidate
# model directory, before it is shipped. PARTS picks and orders the checks (default all):
# - greedy: `memory` policy, greedy, the whole test split (the docs/experiments.md's 400 questions, then the
#   other 600 of the same shuffle) → eval/NAME-memory.json, eval/NAME-memory-rest.json;
# - start: the `npm start` rollout (24 × 16, `full`, T = 1) and its probe statistics
#   (tools/world probes; bar: P_full = 0 in ≤ 30 % of snapshots whose full context holds the gold)
#   → eval/NAME-start-probes.json;
# - full: `full` policy, greedy, the 400 → eval/NAME-full.json;
# - mixed: T = 1 × 16, `memory`, 80 test questions per seed 2, 3, 4 → eval/NAME-mixed-s<seed>.json.
#   bash results/stage2-check.sh NAME DIR      (THREADS=2, PARTS="greedy start full mixed")
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: bash results/stage2-check.sh NAME DIR" >&2; exit 2; }
name=$1 dir=$2 threads=${THREADS:-2}
[ -f "$dir/model.onnx" ] || { echo "stage2-check: $dir has no model.onnx" >&2; exit 2; }
mkdir -p results/eval out/check
run() {  # run OUT-JSON COMMAND...: the command's stdout into OUT-JSON, whole or not at all
  local out=$1; shift
  "$@" > "$out.tmp"
  mv "$out.tmp" "$out"
}
# The search-only world (--no-pages), where stage 2's bar was set.
eval_() { node dist/cli/main.js eval --model "$dir" --split test --threads "$threads" --quiet --resume --json --no-pages "$@"; }
for part in ${PARTS:-greedy start full mixed}; do
  echo "$(date -u +%FT%TZ) $name: $part" >&2
  case "$part" in
    greedy)
      run "results/eval/$name-memory.json" eval_ --shuffle --seed 1 --limit 400 --context memory --max-turns 16 \
        --questions-per-batch 50 --out "out/check/$name-memory"
      run "results/eval/$name-memory-rest.json" eval_ --shuffle --seed 1 --offset 400 --limit 600 --context memory \
        --max-turns 16 --questions-per-batch 50 --out "out/check/$name-memory-rest" ;;
    start)
      rm -rf "out/check/$name-start"
      node dist/cli/main.js rollout --model "$dir" --threads "$threads" --quiet --no-pages --out "out/check/$name-start" > /dev/null
      run "results/eval/$name-start-probes.json" node dist-tools/tools/world/cli.js probes \
        --batch "out/check/$name-start/batch.jsonl" ;;
    full)
      run "results/eval/$name-full.json" eval_ --shuffle --seed 1 --limit 400 --context full --max-turns 16 \
        --questions-per-batch 50 --out "out/check/$name-full" ;;
    mixed)
      for s in 2 3 4; do
        run "results/eval/$name-mixed-s$s.json" eval_ --shuffle --seed "$s" --limit 80 -n 16 --temperature 1 \
          --context memory --max-turns 16 --out "out/check/$name-mixed-s$s"
      done ;;
    *) echo "stage2-check: unknown part $part (greedy, start, full, mixed)" >&2; exit 2 ;;
  esac
done
