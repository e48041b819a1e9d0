#!/usr/bin/env bash
# `npm run train`: the six stages that make models/mempo-tiny (training/README.md), each exported
# to its own model directory under training/out/ so that the next stage can start from it or learn
# from it. Each stage must pass its dev check (check, below) before the next one starts; the last
# one then replaces models/mempo-tiny. First the search-only model (the one shipped before pages):
#   1. stage1, from random weights: 7,000 steps (50 min on 2 cores; a step count, not a time
#      budget, so that every machine trains the same steps: training/README.md, "Stage 1's length");
#   2. stage2, the memory reward's probes with the agent distilled from stage 1 (about 21 min);
#   3. repair: both models roll out train bundles of 6-10 objectives, where stage 2's greedy
#      agent breaks the format; stage 2 then learns stage 1's rounds on those rollouts while
#      everything else, probes included, is held to stage 2 (about 20 min of rollouts, 9 of training).
# Then the page tool on top of it (training/README.md, "Pages"), the same three steps in the page world:
#   4. pages1, from the search-only model: 4,500 steps of bundles, page questions and the URL drill (46 min),
#      then 1,500 with the chains' `full` rounds raised (21 min);
#   5. pages2, the probes, with the bundles' share of the agent rounds raised to pages1's (14 min);
#   6. pages-repair, the repair with the page tool, pages1 the teacher, on bundles under `memory` and 3-hop
#      chains under `full` (about 13 min of rollouts, 10 of training).
# And last, RL on top of it (training/README.md, "RL: MemPO itself"):
#   7. rl, from pages-repair: `mempo train` with the memory reward in the page world, the settings of the
#      MemPO arm of docs/experiments.md ("Where memory matters"): 8 questions x 8 samples a step, at most 12
#      rounds, the default training split and budget, RL_STEPS steps (default 48), seed RL_SEED (default 1);
#      RL_FORMAT_SCORE, RL_BUDGET_SCORE and RL_FORMAT_PENALTY set --format-score (default 0), --budget-score
#      (default none) and --format-penalty (default 1: the round that broke the format, not the trajectory);
#      one run per outcome --metric in RL_METRICS (default "f1 item-f1": f1 lets a question of several objectives,
#      which EM almost never credits, still rank its samples; item-f1 pays nothing for a name copied half right),
#      each about 50 min on 2 cores; training/README.md "RL: MemPO itself" for what each did. Each run's last
#      checkpoint's model files make training/out/rl-METRIC, refused if its greedy dev check fell by more than 5 of
#      50 questions, or its greedy EM on 50 dev page questions did; with several runs, their weights averaged
#      (training/interpolate.py, python3 with requirements.txt's onnx) make training/out/rl.
# STAGES="pages2 pages-repair" runs those stages alone, from the directories of the earlier ones.
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
# PAGE_QUESTIONS=N: N page questions per world in the page stages' samples (default 200, the shipped model's);
# PAGE_QUESTIONS=0: the search-only recipe alone (stage1 stage2 repair), whose repair then replaces the model.
pages=${PAGE_QUESTIONS-200}
[ "$pages" = 0 ] && pages=
pq="--page-questions ${pages:-0}"
search_only=(--no-pages)
page_world=(--corpus data/world/corpus-pages.jsonl --pages data/world/pages.jsonl --page-chunk-chars 1000)
final=rl
[ -n "$pages" ] || final=repair
# STAGE1_STEPS: stage 1's length (default 7,000, the shipped model's); PAGES1_STEPS: pages1's first part (default 4,500).
# Every stage checkpoints each 200 steps into its run directory and `--resume`s from there, so a killed
# `npm run train` continues where it stopped when run again with the same settings (a stage's checkpoint
# written with other flags is refused, not overwritten).
steps1=${STAGE1_STEPS:-7000}
install() {  # install DIR: DIR replaces models/mempo-tiny whole, never half-written
  rm -rf models/mempo-tiny.new models/mempo-tiny.old
  cp -r "$1" models/mempo-tiny.new
  mv models/mempo-tiny models/mempo-tiny.old
  mv models/mempo-tiny.new models/mempo-tiny
  rm -rf models/mempo-tiny.old
}
repair_stage() {  # repair_stage TEACHER INIT NAME EXTRA CHAINS WORLD...: the repair of INIT, TEACHER's rounds on both models' rollouts
  local teacher=$1 init=$2 name=$3 extra=$4 chains=$5
  shift 5
  check $out/$teacher
  check $out/$init
  node training/rollout-questions.mjs 80 > $out/repair-questions.jsonl
  roll() {  # roll MODEL OFFSET QUESTIONS CONTEXT TAG WORLD...: 120 questions, greedy, mempo eval's budget
    rm -rf "$out/rollouts-$5$1"
    node dist/cli/main.js rollout --model "$out/$1" --questions "$3" --offset "$2" --limit 120 \
      -n 1 --context "$4" --max-turns 16 --max-response-tokens 4096 --temperature 0 --threads 1 --quiet "${@:6}" \
      --out "$out/rollouts-$5$1" > /dev/null
    node dist-tools/tools/world/cli.js rollout-samples --batch "$out/rollouts-$5$1/batch.jsonl" \
      --samples-out "$out/rollouts-$5$1.jsonl"
  }
  # bundles of 6-10 objectives under `memory`, where stage 2's greedy agent breaks the format; with CHAINS=1
  # also 3-hop chains under `full`, where every stage 2 with pages lost them (training/README.md, "a repair on `full` chains")
  local files=($out/rollouts-$teacher.jsonl $out/rollouts-$init.jsonl)
  roll $teacher 0 $out/repair-questions.jsonl memory "" "$@" & p1=$!
  roll $init 120 $out/repair-questions.jsonl memory "" "$@" & p2=$!
  wait $p1
  wait $p2
  if [ "$chains" = 1 ]; then
    node training/rollout-questions.mjs chains 240 > $out/chain-questions.jsonl
    roll $teacher 0 $out/chain-questions.jsonl full full- "$@" & p1=$!
    roll $init 120 $out/chain-questions.jsonl full full- "$@" & p2=$!
    wait $p1
    wait $p2
    files+=($out/rollouts-full-$teacher.jsonl $out/rollouts-full-$init.jsonl)
  fi
  cat "${files[@]}" > $out/$name-samples.jsonl.tmp
  mv $out/$name-samples.jsonl.tmp $out/$name-samples.jsonl
  fresh_dir $out/$name
  $py training/train.py --init $out/$init --steps 400 --resume --lr 1e-4 --copy-warmup 0 --skip-data \
    --mix repair --distill 5 --aux-weight 0 --anchor-probes --rollout-samples $out/$name-samples.jsonl \
    --rollout-teacher $out/$teacher --threads 1 $extra --run-dir $out/run-$name --export-dir $out/$name
  check $out/$name
}
for stage in ${STAGES:-stage1 stage2 repair${pages:+ pages1 pages2 pages-repair rl}}; do
  echo "$(date -u +%FT%TZ) train.sh: $stage" >&2
  case "$stage" in
    stage1)
      fresh_dir $out/stage1
      $py training/train.py --steps $steps1 --resume --export-dir $out/stage1
      check $out/stage1 ;;
    stage2)
      check $out/stage1
      fresh_dir $out/stage2
      $py training/train.py --init $out/stage1 --steps 1000 --resume --lr 3e-4 --copy-warmup 0 --skip-data \
        --mix probes-full --distill 5 --aux-weight 0 --run-dir $out/run-stage2 --export-dir $out/stage2
      check $out/stage2 ;;
    repair)
      repair_stage stage1 stage2 repair "" 0 "${search_only[@]}"
      [ $final != repair ] || install $out/repair ;;
    pages1)
      [ -n "$pages" ] || { echo "train.sh: pages1 needs page questions (PAGE_QUESTIONS=0 is the search-only recipe)" >&2; exit 2; }
      check $out/repair
      fresh_dir $out/pages1a
      $py training/train.py --init $out/repair --steps ${PAGES1_STEPS:-4500} --resume --lr 3e-4 --copy-warmup 0 --skip-data \
        --mix bundles-pages-url $pq --run-dir $out/run-pages1a --export-dir $out/pages1a
      check $out/pages1a
      # then the chains' `full` rounds raised (training/README.md, "A stage 1 that keeps `full`")
      fresh_dir $out/pages1
      $py training/train.py --init $out/pages1a --steps 1500 --resume --lr 1.5e-4 --copy-warmup 0 --skip-data \
        --mix bundles-pages-stream $pq --run-dir $out/run-pages1 --export-dir $out/pages1
      check $out/pages1 ;;
    pages2)
      [ -n "$pages" ] || { echo "train.sh: pages2 needs page questions (PAGE_QUESTIONS=0 is the search-only recipe)" >&2; exit 2; }
      check $out/pages1
      fresh_dir $out/pages2
      $py training/train.py --init $out/pages1 --steps 1000 --resume --lr 3e-4 --copy-warmup 0 --skip-data \
        --mix probes-full-chains --distill 5 --aux-weight 0 $pq --run-dir $out/run-pages2 --export-dir $out/pages2
      check $out/pages2 ;;
    pages-repair)
      [ -n "$pages" ] || { echo "train.sh: pages-repair needs page questions (PAGE_QUESTIONS=0 is the search-only recipe)" >&2; exit 2; }
      repair_stage pages1 pages2 pages-repair "$pq" 1 "${page_world[@]}" ;;
    rl)
      [ -n "$pages" ] || { echo "train.sh: rl needs page questions (PAGE_QUESTIONS=0 is the search-only recipe)" >&2; exit 2; }
      check $out/pages-repair
      rl_steps=${RL_STEPS:-48}
      read -r -a metrics <<< "${RL_METRICS-f1 item-f1}"
      [ ${#metrics[@]} -gt 0 ] || { echo "train.sh: RL_METRICS names no outcome metric" >&2; exit 2; }
      # The dev check in metrics.jsonl asks the old kinds only; RL must not cost the page tool either: 50 dev page
      # questions, greedy, before and after each run (a run that stopped opening pages answered none of them).
      page_check() {  # page_check MODEL NAME → $out/rl-pages-NAME.json
        node dist/cli/main.js eval --model $1 "${page_world[@]}" --split dev-pages --limit 50 --max-turns 12 \
          --threads 2 --quiet --force --json --out $out/rl-pages-$2 > $out/rl-pages-$2.json.tmp
        mv $out/rl-pages-$2.json.tmp $out/rl-pages-$2.json
      }
      page_check $out/pages-repair before
      k=0
      for metric in "${metrics[@]}"; do
        run=$out/run-rl-$metric
        resume=()  # `mempo train` continues its own checkpoints; only --steps may change on --resume
        compgen -G "$run/checkpoints/step-*/trainer.json" > /dev/null && resume=(--resume)
        node dist/cli/main.js train --model $out/pages-repair --out $run --seed ${RL_SEED:-1} --shuffle \
          --steps $rl_steps --questions-per-step 8 -n 8 --max-turns 12 --eval-every 12 --eval-questions 50 \
          --format-score ${RL_FORMAT_SCORE:-0} --budget-score ${RL_BUDGET_SCORE:-none} --format-penalty ${RL_FORMAT_PENALTY:-1} --metric $metric --threads 2 --quiet "${resume[@]}"
        page_check $run/checkpoints/step-$rl_steps after-$metric
        fresh_dir $out/rl-$metric
        node training/rl-export.mjs $run $rl_steps $out/pages-repair $out/rl-$metric $out/rl-pages-before.json $out/rl-pages-after-$metric.json
        # the runs' weights averaged, each 1/k (training/README.md "Item F1, and the two runs averaged")
        k=$((k + 1))
        if [ $k = 1 ]; then
          avg=$out/rl-$metric
        else
          rm -rf $out/rl-avg$k
          python3 training/interpolate.py $avg $out/rl-$metric "$(node -e "console.log(1 / $k)")" $out/rl-avg$k
          avg=$out/rl-avg$k
        fi
      done
      rm -rf $out/rl
      cp -r $avg $out/rl
      install $out/rl ;;
    *) echo "train.sh: unknown stage $stage (stage1, stage2, repair, pages1, pages2, pages-repair, rl)" >&2; exit 2 ;;
  esac
done
