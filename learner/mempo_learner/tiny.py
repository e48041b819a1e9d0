"""The embedded architecture (models/mempo-tiny): TinyLM loaded from, and saved into, model.onnx.

The ONNX graph (training/export.py, torch.onnx with constant folding) holds the weights as
initializers: `lm.embed.weight`, `lm.blocks.I.ln1.weight`, `lm.blocks.I.ln2.weight`,
`lm.norm.weight` by name, and the Linear weights transposed as `onnx::MatMul_*`, named by the
exporter, so they are matched in MatMul-node order: per block qkv, o, gate_up, down, then the
tied embedding transposed (the logits). Saving rewrites every initializer in place, the graph
bytes unchanged, so the rollout engines reload it as it was exported.
"""
import json
import os
import shutil
from typing import Dict, List, Tuple

import numpy as np
import torch

from .manifest import read_regular, write_manifest
from .model import Config, OnnxWrapper, TinyLM
from .onnx_weights import OnnxFormatError, OnnxWeights


MAX_CONFIG_BYTES = 16 << 20  # a config.json or manifest.json; more is not one


def read_json(path: str):
    """A JSON file that is a regular file of at most MAX_CONFIG_BYTES (a FIFO is refused unopened,
    never waited on); ValueError naming it otherwise."""
    try:
        return json.loads(read_regular(path, MAX_CONFIG_BYTES))
    except RecursionError:
        raise ValueError(f"{path}: nested too deeply") from None
    except ValueError as e:
        raise ValueError(f"{path}: {e}" if path not in str(e) else str(e)) from None


def is_tiny(model_dir: str) -> bool:
    cfg = os.path.join(model_dir, "config.json")
    if not os.path.isfile(os.path.join(model_dir, "model.onnx")) or not os.path.isfile(cfg):
        return False
    d = read_json(cfg)
    return isinstance(d, dict) and "mempo_prev_token_heads" in d


def config_of(model_dir: str) -> Config:
    d = read_json(os.path.join(model_dir, "config.json"))
    if not isinstance(d, dict):
        raise ValueError(f"{model_dir}/config.json: not a JSON object")
    keys = ["vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
            "intermediate_size", "max_position_embeddings", "rope_theta", "rms_norm_eps"]
    missing = [k for k in keys if k not in d]
    if missing:
        raise ValueError(f"{model_dir}/config.json: missing {', '.join(missing)}")
    m = d["max_position_embeddings"]
    if not isinstance(m, int) or isinstance(m, bool) or m < 2:
        raise ValueError(f"{model_dir}/config.json: max_position_embeddings {m!r} is not a context length")
    return Config(**{k: d[k] for k in keys}, prev_token_heads=int(d["mempo_prev_token_heads"]))


def _layout(lm: TinyLM) -> Tuple[List[str], List[str]]:
    """(named initializers, parameter names of the MatMul initializers in node order)."""
    named = ["embed.weight"]
    matmul = []
    for i in range(len(lm.blocks)):
        named += [f"blocks.{i}.ln1.weight", f"blocks.{i}.ln2.weight"]
        matmul += [f"blocks.{i}.{m}.weight" for m in ("qkv", "o", "gate_up", "down")]
    named.append("norm.weight")
    matmul.append("embed.weight")  # tied: logits = h @ embed.weight^T
    return named, matmul


class TinyModel:
    """TinyLM plus the ONNX template its weights came from."""
    kind = "mempo-tiny (ONNX initializers)"

    def __init__(self, model_dir: str):
        self.model_dir = model_dir
        self.onnx = OnnxWeights(os.path.join(model_dir, "model.onnx"))
        self.lm = TinyLM(config_of(model_dir))
        self._mapping = self._match()
        self.load_from(self.onnx)
        self.vocab_size = self.lm.c.vocab_size
        # the longest sample the model was built for: RoPE would go on, but the rollout engines
        # refuse longer sequences and attention memory grows with its square
        self.max_context = self.lm.c.max_position_embeddings

    def _match(self) -> Dict[str, Tuple[str, bool]]:
        """initializer name -> (parameter name, transposed); fails naming what does not fit."""
        named, matmul = _layout(self.lm)
        params = dict(self.lm.named_parameters())
        mapping = {f"lm.{p}": (p, False) for p in named}
        mm = self.onnx.matmul_weights
        if len(mm) != len(matmul):
            raise OnnxFormatError(f"{self.onnx.path}: {len(mm)} MatMul initializers, the config implies {len(matmul)}")
        mapping.update({init: (p, True) for init, p in zip(mm, matmul)})
        for init, (p, tr) in mapping.items():
            t = self.onnx.tensors.get(init)
            if t is None:  # torch.onnx merges equal initializers (an untrained export's norms)
                raise OnnxFormatError(
                    f"{self.onnx.path}: no initializer {init}; the learner rewrites initializers in place and "
                    "needs one per weight (an export of untrained weights shares equal ones)")
            want = tuple(params[p].shape[::-1] if tr else params[p].shape)
            if t.data_type != 1 or t.dims != want:
                raise OnnxFormatError(f"{self.onnx.path}: initializer {init} is dims {list(t.dims)} "
                                      f"type {t.data_type}, {p} needs float {list(want)}")
        # other initializers (folded constants) are kept as they are; a weight must be mapped
        extra = [n for n in self.onnx.tensors if n not in mapping and n.startswith(("lm.", "onnx::MatMul"))]
        if extra:
            raise OnnxFormatError(f"{self.onnx.path}: initializer {extra[0]} matches no TinyLM parameter")
        return mapping

    @staticmethod
    def logits_at(lm, ids, mask, rows):
        return selected_logits(lm, ids, mask, rows)

    def load_from(self, onnx: OnnxWeights) -> None:
        params = dict(self.lm.named_parameters())
        with torch.no_grad():
            for init, (p, tr) in self._mapping.items():
                a = torch.from_numpy(onnx.read(init).copy())
                if p == "embed.weight" and tr:  # the tied copy must agree with the embedding
                    if not torch.equal(a.t(), params[p].detach().cpu()):
                        raise OnnxFormatError(f"{onnx.path}: {init} is not embed.weight transposed (untied)")
                    continue
                params[p].copy_(a.t() if tr else a)

    def arrays(self) -> Dict[str, np.ndarray]:
        params = dict(self.lm.named_parameters())
        out = {}
        for init, (p, tr) in self._mapping.items():
            a = params[p].detach().to("cpu", torch.float32)
            out[init] = (a.t() if tr else a).contiguous().numpy()
        return out

    def save(self, out_dir: str) -> None:
        """Writes a whole model directory into out_dir (which the caller renames into place)."""
        os.makedirs(out_dir, exist_ok=True)
        for name in sorted(os.listdir(self.model_dir)):
            src = os.path.join(self.model_dir, name)
            if name not in ("model.onnx", "manifest.json") and os.path.isfile(src):
                shutil.copyfile(src, os.path.join(out_dir, name))
        self.onnx.write(os.path.join(out_dir, "model.onnx"), self.arrays())
        write_manifest(out_dir, manifest_name(self.model_dir))


def manifest_name(source_dir: str) -> str:
    """The model's name in the source directory's manifest (else the directory's name)."""
    name = os.path.basename(os.path.normpath(source_dir))
    try:
        m = read_json(os.path.join(source_dir, "manifest.json"))
        return m.get("name", name) if isinstance(m, dict) else name
    except (OSError, ValueError):
        return name


def selected_logits(lm: TinyLM, ids: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Logits [N, V] at the flat positions `rows` (into B*T) of right-padded `ids` [B, T]: the
    ONNX graph's math (OnnxWrapper with an empty past), the final norm and lm head applied to
    those rows only."""
    c = lm.c
    B, T = ids.shape
    pos = torch.arange(T, dtype=torch.int64, device=ids.device).unsqueeze(0).expand(B, T)
    past = [torch.zeros(B, c.num_attention_heads, 0, c.head_dim, device=ids.device)] * (2 * c.num_hidden_layers)
    x, _ = OnnxWrapper(lm).hidden(ids, mask, pos, *past)
    return lm.logits(x.reshape(B * T, -1).index_select(0, rows))
