#!/usr/bin/env bash
# Larger samples for the two quality figures that stage 2 did not match on docs/experiments.md's 400 questions
# (format-valid rounds, mixed groups at T = 1), for the shipped model (`base`), stage 1 alone
# (`stage1`, the models/mempo-tiny of commit d49cfb5), the stage 2 shipped before the repair
# (`prev`, that of commit a78a8c4) and the repaired model shipped until 2026-12-03 (`repaired`,
# that of commit ca31e82):
# - greedy, `memory` policy, on the other 600 test questions (--offset 400 of the same shuffle), so
#   that with evals.sh's 400 the whole test split is covered → eval/<model>-memory-rest.json;
# - T = 1 × 16 samples, `memory` policy, on 80 more test questions for each seed in SEEDS (the
#   docs/experiments.md's figure is seed 2) → eval/<model>-mixed-s<seed>.json.
#   bash results/quality.sh [base stage1 prev repaired]      (SEEDS="3 4" by default)
set -euo pipefail
cd "$(dirname "$0")/.."
source results/model-at.sh
mkdir -p results/eval out/evals
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(base stage1)
for m in "${models[@]}"; do
  case "$m" in
    base) dir=models/mempo-tiny ;;
    stage1) dir=out/stage1-model; model_at d49cfb5 "$dir" ;;
    prev) dir=out/prev-model; model_at a78a8c4 "$dir" ;;
    repaired) dir=out/repaired-model; model_at ca31e82 "$dir" ;;
    *) echo "unknown model $m (base, stage1, prev, repaired)" >&2; exit 2 ;;
  esac
  echo "$(date -u +%FT%TZ) $m: greedy memory, test questions 400-999" >&2
  node dist/cli/main.js eval --model "$dir" --split test --shuffle --seed 1 --offset 400 --limit 600 --context memory \
    --max-turns 16 --questions-per-batch 50 --threads 2 --quiet --resume --json --no-pages --out "out/evals/$m-memory-rest" > "results/eval/$m-memory-rest.json.tmp"
  mv "results/eval/$m-memory-rest.json.tmp" "results/eval/$m-memory-rest.json"
  for s in ${SEEDS:-3 4}; do
    echo "$(date -u +%FT%TZ) $m: T = 1 x 16, seed $s" >&2
    node dist/cli/main.js eval --model "$dir" --split test --shuffle --seed "$s" --limit 80 -n 16 --temperature 1 \
      --context memory --max-turns 16 --threads 2 --quiet --resume --json --no-pages --out "out/evals/$m-mixed-s$s" > "results/eval/$m-mixed-s$s.json.tmp"
    mv "results/eval/$m-mixed-s$s.json.tmp" "results/eval/$m-mixed-s$s.json"
  done
done
