#!/usr/bin/env bash
# `npm run train`: the three stages that make models/mempo-tiny (training/README.md), each exported
# to its own model directory under training/out/ so that the next stage can start from it or learn
# from it. Each stage must pass its dev check (check, below) before the next one starts; the last
# one then replaces models/mempo-tiny.
#   1. stage 1, from random weights: 7,000 steps (50 min on 2 cores; a step count, not a time
#      budget, so that every machine trains the same steps: training/README.md, "Stage 1's length");
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
fresh_dir() {  # a stage's export directory, emptied, with the world's tokenizer (not trained) in it first
  rm -rf "$1"  # so that a stage that fails leaves no earlier run's weights behind, and the export's
  mkdir -p "$1"  # manifest.json covers the tokenizer files too
  cp models/mempo-tiny/tokenizer.json models/mempo-tiny/tokenizer_config.json "$1/"
}
check() {  # check DIR: the stage must pass its dev check (a `memory` round reproduced greedily)
  # A stage that has not learnt to copy names scores 0 on every check; the shipped stages score
  # 0.52-0.55. Stop before anything builds on it, and before models/mempo-tiny is touched.
  node -e '
    const [file, min] = [process.argv[1], Number(process.argv[2])];
    let got;
    try {
      got = JSON.parse(require("fs").readFileSync(file, "utf8")).mempo?.dev_round_exact_match?.memory;
    } catch (e) {
      console.error(`train.sh: ${file}: cannot read it (${e.code ?? e.message}): run that stage first`);
      process.exit(3);
    }
    if (!(got >= min)) {
      console.error(`train.sh: ${file}: dev per-round check (memory) ${got} < ${min}: this stage did not learn ` +
        "to copy names (training/README.md, \"Names are copied, not memorised\"); models/mempo-tiny is left as it was");
      process.exit(3);
    }' "$1/config.json" 0.3
}
# PAGE_QUESTIONS=N: N page questions per world in the samples (issue 32, training/README.md "Pages"), the
# same N in every stage so that --skip-data finds stage 1's samples file; unset, the shipped model's samples.
# With pages the repair's rollouts have the page tool too (its prompt is the one the samples were written with).
pq=${PAGE_QUESTIONS:+--page-questions $PAGE_QUESTIONS}
rollpages=${PAGE_QUESTIONS:+--corpus data/world/corpus-pages.jsonl --pages data/world/pages.jsonl --page-chunk-chars 1000}
# STAGE1_STEPS: stage 1's length (default 7,000, the shipped model's). Every stage checkpoints each 200 steps
# into its run directory and `--resume`s from there, so a killed `npm run train` continues where it stopped
# when run again with the same settings (a stage's checkpoint written with other flags is refused, not overwritten).
steps1=${STAGE1_STEPS:-7000}
for stage in ${STAGES:-stage1 stage2 repair}; do
  echo "$(date -u +%FT%TZ) train.sh: $stage" >&2
  case "$stage" in
    stage1)
      fresh_dir $out/stage1
      $py training/train.py --steps $steps1 --resume $pq --export-dir $out/stage1
      check $out/stage1 ;;
    stage2)
      check $out/stage1
      fresh_dir $out/stage2
      $py training/train.py --init $out/stage1 --steps 1000 --resume --lr 3e-4 --copy-warmup 0 --skip-data \
        --mix probes-full --distill 5 --aux-weight 0 $pq --run-dir $out/run-stage2 --export-dir $out/stage2
      check $out/stage2 ;;
    repair)
      check $out/stage1
      check $out/stage2
      node training/rollout-questions.mjs 80 > $out/repair-questions.jsonl
      roll() {  # roll MODEL OFFSET NAME: 120 bundles, greedy, `memory` policy, mempo eval's budget
        rm -rf "$out/rollouts-$3"
        node dist/cli/main.js rollout --model "$1" --questions $out/repair-questions.jsonl --offset "$2" --limit 120 \
          -n 1 --context memory --max-turns 16 --max-response-tokens 4096 --temperature 0 --threads 1 --quiet $rollpages \
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
      fresh_dir $out/repair
      $py training/train.py --init $out/stage2 --steps 400 --resume --lr 1e-4 --copy-warmup 0 --skip-data \
        --mix repair --distill 5 --aux-weight 0 --anchor-probes --rollout-samples $out/repair-samples.jsonl \
        --rollout-teacher $out/stage1 --threads 1 $pq --run-dir $out/run-repair --export-dir $out/repair
      check $out/repair
      rm -rf models/mempo-tiny.new models/mempo-tiny.old  # replace the shipped model whole, never half-written
      cp -r $out/repair models/mempo-tiny.new
      mv models/mempo-tiny models/mempo-tiny.old
      mv models/mempo-tiny.new models/mempo-tiny
      rm -rf models/mempo-tiny.old ;;
    *) echo "train.sh: unknown stage $stage (stage1, stage2, repair)" >&2; exit 2 ;;
  esac
done
