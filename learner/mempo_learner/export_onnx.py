"""Export a Hugging Face causal LM directory to the ONNX decoder mempo's embedded runtime runs.

    python3 -m mempo_learner.export_onnx HFDIR [--force]

writes HFDIR/onnx/model.onnx and HFDIR/onnx/export.json. The graph is optimum's
`text-generation-with-past` layout (src/engines/local/model-dir.ts): inputs `input_ids`,
`attention_mask`, `position_ids` (int64 [batch, seq]) and `past_key_values.{i}.key|value`
(float32 [batch, kv_heads, past, head_dim]); outputs `logits` (float32 [batch, seq, vocab]) and
`present.{i}.key|value` (the past with this pass's keys/values appended).

TorchScript exporter (dynamo=False, opset 17): it needs no onnxscript, and with constant folding
off every weight stays one initializer named after its parameter, so `export.json` can map each
safetensors tensor to the initializer that holds it (`weights`): after a training step
src/engines/local/reload.ts rewrites those initializer bytes, the graph is never re-exported.
Only architectures whose export was checked against transformers (logits within 1e-4,
test/engines/local/hf-onnx.test.ts) are accepted: qwen3, llama, qwen2.

Needs torch >= 2.1 and transformers (the tests' requirements.txt); Debian's torch 1.13 runs the
learner, not this. The output appears whole or not at all: it is written to a temporary
directory beside `onnx/` and renamed into place.
"""
import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile

from .errors import LearnerError

OPSET = 17
FORMAT = 1
ARCHITECTURES = ("qwen3", "llama", "qwen2")
ROPE_TYPES = ("default", "llama3")
# Protobuf cannot hold one message over 2 GiB: larger weights go to one external data file.
MAX_INLINE_BYTES = 1 << 30
EXTERNAL_DATA = "model.onnx.data"


def fail(message: str) -> LearnerError:
    return LearnerError("bad_request", message)


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def weight_files(model_dir: str):
    """The weights files of `model_dir` as transformers picks them: the shards that
    model.safetensors.index.json names, else model.safetensors (another *.safetensors beside them,
    a checkpoint's learner.safetensors, is not weights). A pickle checkpoint is refused, never loaded."""
    names = sorted(os.listdir(model_dir))
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if "model.safetensors.index.json" in names:
        try:
            with open(index) as f:
                wmap = json.load(f).get("weight_map")
        except (ValueError, AttributeError) as e:
            raise fail(f"{index} is not a JSON object with a weight_map: {e}") from None
        if not isinstance(wmap, dict) or not wmap:
            raise fail(f"{index}: \"weight_map\" must map tensor names to shard file names")
        for tensor, shard in wmap.items():
            if not isinstance(shard, str) or not shard.endswith(".safetensors") or "/" in shard or "\\" in shard or shard.startswith("."):
                raise fail(f"{index}: weight_map[{tensor!r}] must be a .safetensors file name inside {model_dir}, got {shard!r}")
        for tensor, shard in wmap.items():
            if not os.path.isfile(os.path.join(model_dir, shard)):
                raise fail(f"{index}: weight_map[{tensor!r}] names {shard}, which is missing")
        return sorted(set(wmap.values()))
    if "model.safetensors" in names:
        return ["model.safetensors"]
    pickles = [n for n in names if n.endswith((".bin", ".pt", ".pth", ".ckpt"))]
    if pickles:
        raise fail(f"{model_dir}: only pickle weights ({', '.join(pickles)}); mempo loads safetensors only "
                   "(a pickle can run code): convert with save_pretrained(..., safe_serialization=True)")
    raise fail(f"{model_dir}: no model.safetensors (nor model.safetensors.index.json) weights")


def read_config(model_dir: str) -> dict:
    path = os.path.join(model_dir, "config.json")
    if not os.path.isfile(path):
        raise fail(f"{path} is missing (not a Hugging Face model directory)")
    try:
        with open(path) as f:
            cfg = json.load(f)
    except ValueError as e:
        raise fail(f"{path} is not valid JSON: {e}") from None
    if not isinstance(cfg, dict):
        raise fail(f"{path} is not a JSON object")
    mt = cfg.get("model_type")
    if mt not in ARCHITECTURES:
        raise fail(f"{path}: model_type {mt!r} has no ONNX export path in mempo (supported: {', '.join(ARCHITECTURES)})")
    # The trace records one path through the model: a rope whose frequencies depend on the
    # sequence length (dynamic, longrope, ...) or sliding-window layers would be frozen at the
    # traced lengths, so only the variants checked against transformers are exported.
    for key in ("rope_parameters", "rope_scaling"):
        rope = cfg.get(key)
        if isinstance(rope, dict):
            kind = rope.get("rope_type", rope.get("type", "default"))
            if kind not in ROPE_TYPES:
                raise fail(f"{path}: {key}.rope_type {kind!r} is not exported by mempo (supported: {', '.join(ROPE_TYPES)})")
    if cfg.get("use_sliding_window") is True or "sliding_attention" in (cfg.get("layer_types") or []):
        raise fail(f"{path}: sliding-window attention (use_sliding_window / layer_types) is not exported by mempo")
    return cfg


def build_wrapper(lm, num_layers: int):
    import torch
    from transformers import DynamicCache

    class Decoder(torch.nn.Module):
        """input_ids, attention_mask, position_ids, past k/v per layer -> logits, present k/v per layer."""

        def __init__(self):
            super().__init__()
            self.lm = lm

        def forward(self, input_ids, attention_mask, position_ids, *past):
            cache = DynamicCache([(past[2 * i], past[2 * i + 1]) for i in range(num_layers)], config=self.lm.config)
            out = self.lm(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                          past_key_values=cache, use_cache=True, return_dict=True)
            present = []
            for i in range(num_layers):
                layer = out.past_key_values.layers[i]
                present += [layer.keys, layer.values]
            return (out.logits, *present)

    return Decoder().eval()


def export(model_dir: str, force: bool = False, external: bool = False) -> str:
    """Writes model_dir/onnx/{model.onnx,export.json}; returns the path of model.onnx. The weights
    go to onnx/model.onnx.data when they pass MAX_INLINE_BYTES, or with `external`."""
    model_dir = os.path.abspath(model_dir)
    if not os.path.isdir(model_dir):
        raise fail(f"{model_dir} is not a directory")
    cfg = read_config(model_dir)
    files = weight_files(model_dir)
    out_dir = os.path.join(model_dir, "onnx")
    target = os.path.join(out_dir, "model.onnx")
    if os.path.exists(out_dir) and not force:
        manifest = os.path.join(out_dir, "export.json")
        if not os.path.isfile(manifest):
            raise fail(f"{out_dir} exists and was not written by this exporter (no export.json); move it away first")
    try:
        import torch
        import transformers
        from transformers import AutoModelForCausalLM
        from safetensors import safe_open
    except ImportError as e:
        raise fail(f"the ONNX export needs torch, transformers and safetensors (pip install -r requirements.txt): {e}") from None
    import onnx
    from onnx import numpy_helper

    lm = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager")
    lm.eval()
    c = lm.config
    L = int(c.num_hidden_layers)
    kv = int(getattr(c, "num_key_value_heads", None) or c.num_attention_heads)
    hd = int(getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads)
    wrapper = build_wrapper(lm, L)

    # Traced at past 3, seq 2, batch 2 with a left-padded row: no dimension is 0 or 1, so none is
    # specialised away, and the padded path is the one traced.
    B, S, P = 2, 2, 3
    ids = torch.randint(0, int(c.vocab_size), (B, S))
    mask = torch.ones(B, P + S, dtype=torch.long)
    mask[1, 0] = 0
    pos = (mask.cumsum(-1) - 1).clamp(min=0)[:, P:]
    past = [torch.randn(B, kv, P, hd) for _ in range(2 * L)]
    in_names = ["input_ids", "attention_mask", "position_ids"]
    out_names = ["logits"]
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
            "position_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    for i in range(L):
        for kind in ("key", "value"):
            in_names.append(f"past_key_values.{i}.{kind}")
            out_names.append(f"present.{i}.{kind}")
            axes[in_names[-1]] = {0: "batch", 2: "past"}
            axes[out_names[-1]] = {0: "batch", 2: "total"}

    # The exporter merges initializers of equal value (every RMSNorm weight starts at ones): each
    # parameter is traced holding distinct random values, so it stays its own initializer, found
    # afterwards by those values and given back its own.
    params = {}
    for name, p in lm.named_parameters(remove_duplicate=False):
        params.setdefault(id(p), (p, []))[1].append(name)
    originals = {}
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for key, (p, _) in params.items():
            originals[key] = p.detach().clone()
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype))

    tmp = tempfile.mkdtemp(prefix=".onnx-export-", dir=model_dir)
    try:
        raw_dir = os.path.join(tmp, "raw")  # torch writes a large model's external data files beside it
        os.mkdir(raw_dir)
        raw_path = os.path.join(raw_dir, "model.onnx")
        with torch.no_grad():
            torch.onnx.export(wrapper, (ids, mask, pos, *past), raw_path, input_names=in_names,
                              output_names=out_names, dynamic_axes=axes, opset_version=OPSET,
                              do_constant_folding=False, dynamo=False)
        model = onnx.load(raw_path)
        shutil.rmtree(raw_dir)
        weights = restore_weights(model, params, originals, numpy_helper)
        check_weights(model, weights, model_dir, files, safe_open, numpy_helper)
        external = external or sum(t.ByteSize() for t in model.graph.initializer) > MAX_INLINE_BYTES
        if external:
            onnx.save_model(model, os.path.join(tmp, "model.onnx"), save_as_external_data=True,
                            all_tensors_to_one_file=True, location=EXTERNAL_DATA, size_threshold=1024)
        else:
            onnx.save_model(model, os.path.join(tmp, "model.onnx"))
        manifest = {
            "format": FORMAT,
            "writer": "mempo_learner.export_onnx",
            "model_type": cfg["model_type"],
            "opset": OPSET,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "layers": L, "kv_heads": kv, "head_dim": hd, "vocab_size": int(c.vocab_size),
            "model": "model.onnx",
            "external_data": EXTERNAL_DATA if external else None,
            # The weights the export was made from: a later change to them makes the export stale.
            "source": {n: {"bytes": os.path.getsize(os.path.join(model_dir, n)),
                           "sha256": sha256_file(os.path.join(model_dir, n))} for n in files},
            "weights": weights,
        }
        with open(os.path.join(tmp, "export.json"), "w") as f:
            json.dump(manifest, f, indent=1)
        replace_dir(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def restore_weights(model, params, originals, numpy_helper):
    """Finds each parameter's initializer by its traced random values and writes back its own
    values; returns {parameter name: initializer name} (tied parameters share one initializer)."""
    import numpy as np

    by_bytes = {}
    for init in model.graph.initializer:
        by_bytes.setdefault(numpy_helper.to_array(init).tobytes(), []).append(init)
    out = {}
    for key, (p, names) in params.items():
        found = by_bytes.get(p.detach().numpy().tobytes(), [])
        if len(found) != 1:
            raise fail(f"the ONNX export holds {len(found)} initializers for the parameter {names[0]} (expected 1): "
                       "its weights could not be rewritten after training")
        init = found[0]
        value = originals[key].numpy().astype(np.float32)
        init.CopyFrom(numpy_helper.from_array(value, init.name))
        for n in names:
            out[n] = init.name
    return out


def check_weights(model, weights, model_dir, files, safe_open, numpy_helper):
    """Every tensor of the safetensors files has an initializer with its exact values: a reload
    that writes tensor X into initializer weights[X] reproduces the checkpoint."""
    import numpy as np

    inits = {t.name: t for t in model.graph.initializer}
    bad = []
    for fname in files:
        with safe_open(os.path.join(model_dir, fname), framework="np") as f:
            for name in f.keys():
                want = f.get_tensor(name)
                init = inits.get(weights.get(name, ""))
                got = None if init is None else numpy_helper.to_array(init)
                if got is None or got.shape != want.shape or not np.array_equal(got, want.astype(np.float32)):
                    bad.append(f"{fname}:{name}")
    if bad:
        raise fail(f"the ONNX export of {model_dir} has no initializer equal to {', '.join(bad[:5])}"
                   f"{' ...' if len(bad) > 5 else ''}: its weights could not be reloaded after training")


def replace_dir(tmp: str, out_dir: str) -> None:
    """Moves tmp to out_dir; an older export there is moved aside first, removed after."""
    old = None
    if os.path.exists(out_dir):
        old = tempfile.mkdtemp(prefix=".onnx-old-", dir=os.path.dirname(out_dir))
        os.rmdir(old)
        os.replace(out_dir, old)
    os.replace(tmp, out_dir)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m mempo_learner.export_onnx",
                                description="Export a Hugging Face causal LM directory to DIR/onnx/model.onnx for mempo's embedded runtime")
    p.add_argument("model_dir", help="a Hugging Face directory: config.json, *.safetensors, tokenizer files")
    p.add_argument("--force", action="store_true", help="replace an existing DIR/onnx not written by this exporter")
    p.add_argument("--external-data", action="store_true",
                   help=f"weights in DIR/onnx/{EXTERNAL_DATA} even when the model is small (always past 1 GiB)")
    a = p.parse_args(argv)
    try:
        path = export(a.model_dir, force=a.force, external=a.external_data)
    except LearnerError as e:
        print(f"export_onnx: {e.message}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
