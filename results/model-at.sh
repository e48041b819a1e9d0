# Sourced by evals.sh and quality.sh. model_at COMMIT DIR: the models/mempo-tiny of COMMIT, from
# git, into DIR (an earlier model to evaluate without checking it out).
model_at() {
  mkdir -p "$2"
  for f in model.onnx config.json generation_config.json manifest.json tokenizer.json tokenizer_config.json; do
    git show "$1:models/mempo-tiny/$f" > "$2/$f"
  done
}
