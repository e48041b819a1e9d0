#!/usr/bin/env bash
# The evaluation of a model trained with pages (issue 32; training/README.md "Pages"), greedy, at most
# 16 rounds, in the embedded page world (the corpus with URLs and the page tool over the embedded pages,
# 1,000-character chunks: the flags in `world` below):
# - the old question kinds: the 400 test questions of results/evals.sh (shuffle seed 1), `memory` and `full`
#   → eval/NAME-{memory,full}.json; the same 400 without the page tool → eval/NAME-nopages-memory.json;
# - the 200 test page questions (`--split test-pages`), `memory` and `full` → eval/NAME-page-questions-{memory,full}.json;
# - the memory reward on 100 dev questions (greedy `full` rollouts, as results/evals.sh) → eval/NAME-dev-probes.json;
# - part `dev`, not run unless named: the 450 dev questions of the old kinds and the 100 dev page questions, each
#   context → eval/NAME-dev-{old,page-questions}-CONTEXT.json (choices between models made on dev, never on test).
#   bash results/pages-eval.sh NAME DIR      (THREADS=2, PARTS="old pages nopages probes", CONTEXTS="memory full")
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: bash results/pages-eval.sh NAME DIR" >&2; exit 2; }
name=$1 dir=$2 threads=${THREADS:-2}
[ -f "$dir/model.onnx" ] || { echo "pages-eval: $dir has no model.onnx" >&2; exit 2; }
[ -f dist-tools/tools/world/cli.js ] || npx tsc -p tsconfig.tools.json
mkdir -p results/eval out/pages-eval
run() {  # run OUT-JSON COMMAND...: the command's stdout into OUT-JSON, whole or not at all
  local out=$1; shift
  "$@" > "$out.tmp"
  mv "$out.tmp" "$out"
}
world=(--corpus data/world/corpus-pages.jsonl --pages data/world/pages.jsonl --page-chunk-chars 1000)
eval_() { node dist/cli/main.js eval --model "$dir" --threads "$threads" --max-turns 16 --questions-per-batch 50 --quiet --resume --json "$@"; }
for part in ${PARTS:-old pages nopages probes}; do
  echo "$(date -u +%FT%TZ) $name: $part" >&2
  case "$part" in
    old)
      for ctx in ${CONTEXTS:-memory full}; do
        run "results/eval/$name-$ctx.json" eval_ "${world[@]}" --split test --shuffle --seed 1 --limit 400 --context "$ctx" \
          --out "out/pages-eval/$name-$ctx"
      done ;;
    pages)
      for ctx in ${CONTEXTS:-memory full}; do
        run "results/eval/$name-page-questions-$ctx.json" eval_ "${world[@]}" --split test-pages --limit none --context "$ctx" \
          --out "out/pages-eval/$name-pages-$ctx"
      done ;;
    nopages)
      run "results/eval/$name-nopages-memory.json" eval_ --no-pages --split test --shuffle --seed 1 --limit 400 \
        --context memory --out "out/pages-eval/$name-nopages-memory" ;;
    dev)
      for ctx in ${CONTEXTS:-memory full}; do
        run "results/eval/$name-dev-old-$ctx.json" eval_ "${world[@]}" --split dev --limit none --context "$ctx" \
          --out "out/pages-eval/$name-dev-old-$ctx"
        run "results/eval/$name-dev-page-questions-$ctx.json" eval_ "${world[@]}" --split dev-pages --limit none --context "$ctx" \
          --out "out/pages-eval/$name-dev-pages-$ctx"
      done ;;
    probes)
      node dist/cli/main.js eval --model "$dir" "${world[@]}" --split dev --shuffle --seed 0 --limit 100 --context full --memory-reward \
        --threads "$threads" --quiet --resume --out "out/pages-eval/$name-dev" > /dev/null
      run "results/eval/$name-dev-probes.json" node dist-tools/tools/world/cli.js probes \
        --batch "out/pages-eval/$name-dev/batch.jsonl" ;;
    *) echo "pages-eval: unknown part $part (old, pages, nopages, probes, dev)" >&2; exit 2 ;;
  esac
done
