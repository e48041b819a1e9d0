#!/usr/bin/env bash
# Issue 46: MemPO against GRPO in the embedded page world (docs/experiments.md "Where memory matters").
# Each arm trains from the model shipped from 2026-12-04 to 2026-12-07 (paged-stream, taken from git at 0ded60e:
# the model shipped since then is one such RL run) on the page world's default training split
# (`train,train-pages` interleaved, shuffled with the arm's seed), the same steps, questions and budget in
# every arm; only --no-memory-reward differs. Then its last checkpoint is evaluated on held-out questions,
# greedy, `memory` policy (results/pages-eval.sh: the 200 test page questions, the 400 old-kind test
# questions, the memory reward on 100 dev questions), and results/page-arm-stats.mjs keeps the per-question
# figures in results/page-arms/<arm>.json for the bootstrap.
#   bash results/page-arms.sh [grpo|mempo][-sN] ...      (default: grpo mempo grpo-s2 mempo-s2)
#   STEPS (36), THREADS (2), PHASES ("train eval stats")
# Resumable: a trained arm continues from its newest checkpoint, an evaluation whose JSON exists is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-36}
threads=${THREADS:-2}
arms=("$@")
[ ${#arms[@]} -gt 0 ] || arms=(grpo mempo grpo-s2 mempo-s2)
mkdir -p out/page-arms results/page-arms
source results/model-at.sh
start=out/page-arms/paged-stream-model
if [ ! -f "$start/manifest.json" ]; then  # whole or not at all (a clone made with --depth 1 lacks 0ded60e)
  rm -rf "$start" "$start.tmp"
  model_at 0ded60e "$start.tmp"
  mv "$start.tmp" "$start"
fi
# 8 questions x 8 samples per step, at most 12 rounds (a page question takes a search, an access and up to
# three reading rounds before its answer), the default 1,024-token response budget; an evaluation on 50 dev
# questions every 12 steps gives the curves.
common=(--shuffle --steps "$STEPS" --questions-per-step 8 -n 8 --max-turns 12 --eval-every 12 --eval-questions 50
  --threads "$threads" --quiet)
for a in "${arms[@]}"; do
  seed=1 base=$a
  if [[ "$a" =~ ^(.+)-s([0-9]+)$ ]]; then base=${BASH_REMATCH[1]}; seed=${BASH_REMATCH[2]}; fi
  case "$base" in
    grpo) extra=(--no-memory-reward) ;;
    mempo) extra=() ;;
    *) echo "page-arms: unknown arm $a (grpo or mempo, each optionally with -sN)" >&2; exit 2 ;;
  esac
  dir=out/page-arms/$a
  for phase in ${PHASES:-train eval stats}; do
    case "$phase" in
      train)
        last=$(ls -d "$dir"/checkpoints/step-"$STEPS" 2>/dev/null || true)
        [ -n "$last" ] && [ -f "$dir/metrics.jsonl" ] && grep -q "\"step\":$STEPS[,}]" "$dir/metrics.jsonl" && continue
        resume=()
        compgen -G "$dir/checkpoints/step-*/trainer.json" > /dev/null && resume=(--resume)
        echo "$(date -u +%FT%TZ) page arm $a: ${STEPS} steps, seed $seed ${resume[*]}" >&2
        node dist/cli/main.js train --model "$start" --out "$dir" --seed "$seed" "${common[@]}" "${extra[@]}" "${resume[@]}"
        cp "$dir/metrics.jsonl" "results/page-arms/$a-metrics.jsonl.tmp" && mv "results/page-arms/$a-metrics.jsonl.tmp" "results/page-arms/$a-metrics.jsonl" ;;
      eval)
        model=$dir/checkpoints/step-$STEPS
        [ -f "$model/model.onnx" ] || { echo "page-arms: $model has no model.onnx (train $a first)" >&2; exit 2; }
        THREADS=$threads CONTEXTS=memory PARTS="pages old probes" bash results/pages-eval.sh "page-$a" "$model" ;;
      stats)
        node results/page-arm-stats.mjs keep "page-$a" > "results/page-arms/$a.json.tmp"
        mv "results/page-arms/$a.json.tmp" "results/page-arms/$a.json" ;;
      *) echo "page-arms: unknown phase $phase (train, eval, stats)" >&2; exit 2 ;;
    esac
  done
done
