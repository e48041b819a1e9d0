"""Any Hugging Face causal LM directory (no model.onnx): transformers.AutoModelForCausalLM.

UNTESTED HERE: `transformers` is not installed on the machine this was written on, so no test
runs this path; it is the plain transformers API (from_pretrained / forward with an attention
mask / save_pretrained), kept short so there is little to get wrong.
"""
import os
import shutil

import torch

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".msgpack", ".h5", ".index.json")
# where configs keep the context length (the first present wins; src/engines/local/model-dir.ts reads the same)
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")


def is_hf(model_dir: str) -> bool:
    names = os.listdir(model_dir) if os.path.isdir(model_dir) else []
    return "config.json" in names and any(n.endswith((".safetensors", ".bin")) for n in names)


class HfModel:
    kind = "transformers AutoModelForCausalLM (untested here)"

    def __init__(self, model_dir: str):
        try:
            from transformers import AutoModelForCausalLM
        except ImportError:
            raise ValueError(f"{model_dir} has Hugging Face weights but `transformers` is not importable "
                             "(pip install transformers), and no model.onnx of the embedded architecture") from None
        self.model_dir = model_dir
        self.lm = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
        self.vocab_size = int(self.lm.config.vocab_size)
        self.max_context = context_length(self.lm.config)

    @staticmethod
    def logits_at(lm, ids, mask, rows):
        logits = lm(input_ids=ids, attention_mask=mask, use_cache=False).logits
        return logits.reshape(-1, logits.shape[-1]).index_select(0, rows)

    def save(self, out_dir: str) -> None:
        """save_pretrained, plus the source's tokenizer and generation files."""
        self.lm.save_pretrained(out_dir, safe_serialization=True)
        for name in os.listdir(self.model_dir):
            src = os.path.join(self.model_dir, name)
            dst = os.path.join(out_dir, name)
            if os.path.isfile(src) and not name.endswith(WEIGHT_SUFFIXES) and not os.path.exists(dst):
                shutil.copyfile(src, dst)


def context_length(config):
    """The config's context length, or None for an architecture without one (no bound is checked)."""
    for k in CONTEXT_KEYS:
        v = getattr(config, k, None)
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return None
