#!/usr/bin/env bash
# `npm run train`: the three stages that make models/mempo-tiny (training/README.md), each exported
# to its own model directory under training/out/ so that the next stage can start from it or learn
# from it; only the last one is written to models/mempo-tiny.
#   1. stage 1, from random weights (34 min on 2 cores);
#   2. stage 2, the memory reward's probes with the agent distilled from stage 1 (about 21 min);
#   3. the repair: both models roll out train bundles of 6-10 objectives, where stage 2's greedy
#      agent breaks the format; stage 2 then learns stage 1's rounds on those rollouts while
#      everything else, probes included, is held to stage 2 (about 20 min of rollouts, 9 of training).
# STAGES="repair" runs the last stage alone, from the stage 1 and 2 directories already there.
set -euo pipefail
cd "$(dirname "$0")/.."
out=training/out
py=python3
python3 -c 'import torch' 2>/dev/null || py=/usr/bin/python3   # Debian's torch
[ -f dist/cli/main.js ] || npm run build:ts
[ -f dist-tools/tools/world/cli.js ] || npx tsc -p tsconfig.tools.json
model_dir() {  # an exported stage, made loadable by the runtime: the tokenizer is the world's, not trained
  cp models/mempo-tiny/tokenizer.json models/mempo-tiny/tokenizer_config.json "$1/"
}
for stage in ${STAGES:-stage1 stage2 repair}; do
  echo "$(date -u +%FT%TZ) train.sh: $stage" >&2
  case "$stage" in
    stage1)
      $py training/train.py --export-dir $out/stage1
      model_dir $out/stage1 ;;
    stage2)
      $py training/train.py --init $out/stage1 --steps 1000 --lr 3e-4 --copy-warmup 0 --skip-data \
        --mix probes-full --distill 5 --aux-weight 0 --run-dir $out/run-stage2 --export-dir $out/stage2
      model_dir $out/stage2 ;;
    repair)
      node training/rollout-questions.mjs 80 > $out/repair-questions.jsonl
      roll() {  # roll MODEL OFFSET NAME: 120 bundles, greedy, `memory` policy, mempo eval's budget
        rm -rf "$out/rollouts-$3"
        node dist/cli/main.js rollout --model "$1" --questions $out/repair-questions.jsonl --offset "$2" --limit 120 \
          -n 1 --context memory --max-turns 16 --max-response-tokens 4096 --temperature 0 --threads 1 --quiet \
          --out "$out/rollouts-$3" > /dev/null
        node dist-tools/tools/world/cli.js rollout-samples --batch "$out/rollouts-$3/batch.jsonl" \
          --samples-out "$out/rollouts-$3.jsonl"
      }
      roll $out/stage1 0 stage1 & p1=$!
      roll $out/stage2 120 stage2 & p2=$!
      wait $p1
      wait $p2
      cat $out/rollouts-stage1.jsonl $out/rollouts-stage2.jsonl > $out/repair-samples.jsonl.tmp
      mv $out/repair-samples.jsonl.tmp $out/repair-samples.jsonl
      $py training/train.py --init $out/stage2 --steps 400 --lr 1e-4 --copy-warmup 0 --skip-data \
        --mix repair --distill 5 --aux-weight 0 --anchor-probes --rollout-samples $out/repair-samples.jsonl \
        --rollout-teacher $out/stage1 --threads 1 --run-dir $out/run-repair --export-dir models/mempo-tiny ;;
    *) echo "train.sh: unknown stage $stage (stage1, stage2, repair)" >&2; exit 2 ;;
  esac
done
