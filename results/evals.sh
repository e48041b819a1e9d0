#!/usr/bin/env bash
# The evaluation of docs/experiments.md "Does the memory reward help?": base (models/mempo-tiny) and the last
# checkpoint of each arm (results/arms.sh) on 400 test questions, greedy, at most 16 rounds, under
# both context policies; then the memory reward (full-policy rollouts, greedy) on 100 dev questions. All in the
# search-only world (--no-pages), where these evaluations were made; the page world's are results/pages-eval.sh.
# Writes results/eval/<model>-<policy>.json, <model>-<policy>-endings.json (results/endings.mjs) and
# results/eval/<model>-dev-probes.json.
#   bash results/evals.sh [base start repaired grpo mempo ...]
# (start, repaired: the models/mempo-tiny of commits bcbbbe6 and ca31e82, from git)
set -euo pipefail
cd "$(dirname "$0")/.."
source results/model-at.sh
mkdir -p results/eval out/evals
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(base grpo mempo)
npx tsc -p tsconfig.tools.json
for m in "${models[@]}"; do
  if [ "$m" = base ]; then dir=models/mempo-tiny
  elif [ "$m" = start ]; then  # the model the committed arms started from: models/mempo-tiny of commit bcbbbe6
    dir=out/start-model; model_at bcbbbe6 "$dir"
  elif [ "$m" = repaired ]; then  # the repaired stage 2 shipped until 2026-12-03
    dir=out/repaired-model; model_at ca31e82 "$dir"
  else
    dir=$(ls -d out/arms/"$m"/checkpoints/step-* | sort -t- -k2 -n | tail -1)
  fi
  for ctx in memory full; do
    echo "$(date -u +%FT%TZ) eval $m ($dir) --context $ctx" >&2
    node dist/cli/main.js eval --model "$dir" --split test --shuffle --seed 1 --limit 400 --context "$ctx" \
      --max-turns 16 --questions-per-batch 50 --threads 2 --quiet --resume --json --no-pages --out "out/evals/$m-$ctx" > "results/eval/$m-$ctx.json.tmp"
    mv "results/eval/$m-$ctx.json.tmp" "results/eval/$m-$ctx.json"
    node results/endings.mjs "out/evals/$m-$ctx/batch.jsonl" > "results/eval/$m-$ctx-endings.json.tmp"
    mv "results/eval/$m-$ctx-endings.json.tmp" "results/eval/$m-$ctx-endings.json"
  done
  node dist/cli/main.js eval --model "$dir" --split dev --shuffle --seed 0 --limit 100 --context full --memory-reward \
    --threads 2 --quiet --resume --no-pages --out "out/evals/$m-dev" > /dev/null
  node dist-tools/tools/world/cli.js probes --batch "out/evals/$m-dev/batch.jsonl" > "results/eval/$m-dev-probes.json.tmp"
  mv "results/eval/$m-dev-probes.json.tmp" "results/eval/$m-dev-probes.json"
done
