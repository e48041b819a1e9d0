#!/usr/bin/env bash
# The training arms of docs/experiments.md "Does the memory reward help?": GRPO (--no-memory-reward), MemPO
# (alpha 1) and its variants (mempo-qr: pooled per question and round; mempo-a05: alpha 0.5; mempo-async:
# --async-level 1, issue 33), from
# the shipped checkpoint, same questions, seeds and steps. Resumable: each arm continues from its
# newest checkpoint when run again (a session that ends mid-arm loses at most one step). Outputs
# under out/arms/<arm>/ (metrics.jsonl, checkpoints/, train-report.html).
#   bash results/arms.sh [grpo|mempo|mempo-qr|mempo-a05|mempo-async ...]     (default: grpo mempo)
# An arm name ending in -sN (grpo-s2) runs that arm with --seed N (questions' order and sampling).
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${STEPS:-36}
mkdir -p out/arms
node results/questions.mjs > out/arms/train-questions.jsonl 2>/dev/null
common=(--questions out/arms/train-questions.jsonl --shuffle --steps "$STEPS"
  --questions-per-step 8 -n 8 --max-turns 8 --eval-every 6 --eval-questions 50 --threads 2 --quiet
  --no-pages)  # the search-only world, where the arms ran (docs/rollout.md "The embedded world")
arms=("$@")
[ ${#arms[@]} -gt 0 ] || arms=(grpo mempo)
for a in "${arms[@]}"; do
  seed=1
  base=$a
  if [[ "$a" =~ ^(.+)-s([0-9]+)$ ]]; then base=${BASH_REMATCH[1]}; seed=${BASH_REMATCH[2]}; fi
  case "$base" in
    grpo) extra=(--no-memory-reward) ;;
    mempo) extra=() ;;
    mempo-qr) extra=(--mem-grouping question-round) ;;
    mempo-a05) extra=(--alpha 0.5) ;;
    # overlapped steps (docs/train.md): rollout and update share the 2 cores, so ORT gets one thread
    mempo-async) extra=(--async-level 1 --threads 1) ;;
    *) echo "unknown arm $a (grpo, mempo, mempo-qr, mempo-a05, mempo-async, each optionally with -sN)" >&2; exit 2 ;;
  esac
  # --resume only where a checkpoint is there to continue (mempo train refuses it otherwise)
  resume=()
  compgen -G "out/arms/$a/checkpoints/step-*/trainer.json" > /dev/null && resume=(--resume)
  echo "$(date -u +%FT%TZ) arm $a: ${STEPS} steps, seed $seed ${resume[*]}" >&2
  node dist/cli/main.js train --out "out/arms/$a" --seed "$seed" "${common[@]}" "${extra[@]}" "${resume[@]}"
  echo "$(date -u +%FT%TZ) arm $a done" >&2
done
