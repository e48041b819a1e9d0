"""Export a TinyLM checkpoint (or a random init) to models/mempo-tiny in the layout of
optimum's `text-generation-with-past` ONNX export, plus config.json and manifest.json.

    /usr/bin/python3 training/export.py [--ckpt training/out/model.pt] [--out models/mempo-tiny]
"""
import argparse
import json
import os
import sys

import torch

# model.py lives with the learner, which trains the same architecture (learner/mempo_learner)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "learner", "mempo_learner"))
from model import Config, TinyLM, OnnxWrapper, hf_config, param_count  # noqa: E402
from manifest import write_manifest  # noqa: E402


def export(lm: TinyLM, out: str, extra_config=None):
    c = lm.c
    lm.eval()
    w = OnnxWrapper(lm).eval()
    B, T, P = 2, 3, 4
    ids = torch.randint(0, c.vocab_size, (B, T))
    am = torch.ones(B, P + T, dtype=torch.int64)
    pos = torch.arange(P, P + T).unsqueeze(0).repeat(B, 1)
    past = []
    in_names = ["input_ids", "attention_mask", "position_ids"]
    out_names = ["logits"]
    dyn = {
        "input_ids": {0: "batch_size", 1: "sequence_length"},
        "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
        "position_ids": {0: "batch_size", 1: "sequence_length"},
        "logits": {0: "batch_size", 1: "sequence_length"},
    }
    for i in range(c.num_hidden_layers):
        for kv in ("key", "value"):
            past.append(torch.randn(B, c.num_attention_heads, P, c.head_dim))
            n = f"past_key_values.{i}.{kv}"
            in_names.append(n)
            dyn[n] = {0: "batch_size", 2: "past_sequence_length"}
            o = f"present.{i}.{kv}"
            out_names.append(o)
            dyn[o] = {0: "batch_size", 2: "total_sequence_length"}
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "model.onnx")
    with torch.no_grad():
        torch.onnx.export(w, (ids, am, pos, *past), path, input_names=in_names, output_names=out_names,
                          dynamic_axes=dyn, opset_version=14, do_constant_folding=True)
    cfg = hf_config(c, extra_config)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 0, "eos_token_id": [0, 2], "pad_token_id": 0}, f, indent=2)
        f.write("\n")
    write_manifest(out, "mempo-tiny")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default=None)
    ap.add_argument("--out", default="models/mempo-tiny")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    extra = {}
    if a.ckpt:
        ck = torch.load(a.ckpt, map_location="cpu", weights_only=True)  # tensors and plain data only: a file is never code
        c = Config(**json.loads(ck["config"]))  # train.py writes config and meta as JSON strings
        lm = TinyLM(c)
        lm.load_state_dict(ck["model"])
        extra = json.loads(ck.get("meta", "{}"))
    else:
        torch.manual_seed(a.seed)
        lm = TinyLM(Config())
        extra = {"mempo_trained": False}
    extra["num_parameters"] = param_count(lm)
    export(lm, a.out, {"mempo": extra})
    print(f"exported {param_count(lm)} params -> {a.out}")


if __name__ == "__main__":
    main()
