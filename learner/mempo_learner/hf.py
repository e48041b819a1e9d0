"""A Hugging Face causal LM directory (no model.onnx) through transformers.AutoModelForCausalLM
(docs/learner.md, "Hugging Face models"): Qwen3, Llama (3) and Qwen2 (2.5) configs, weights in
safetensors only. Everything is checked before transformers reads a weight: the config's
model_type against the allow-list, the weight files (a pickle is refused, never loaded: it can run
any code), the tokenizer's vocabulary against the config's. Tested on the zoo of test/python/zoo.py
(test/python/test_learner_hf.py)."""
import json
import os
import re
import shutil
from typing import Optional, Tuple

import torch

from .manifest import read_regular

# What transformers may find in a model directory as weights; only safetensors are loaded.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".msgpack", ".h5", ".index.json")
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt")
# model_type -> the architecture, in words: the ones tested here (test/python/zoo.py builds each)
SUPPORTED = {"qwen3": "Qwen3", "llama": "Llama 3", "qwen2": "Qwen2.5"}
# where configs keep the context length (the first present wins; src/engines/local/model-dir.ts reads the same)
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")
MIN_TORCH = (2, 2)  # what transformers 5 imports with; Debian's torch 1.13 runs the embedded model only
MIN_TRANSFORMERS = (4, 56)  # from_pretrained(dtype=...)
JSON_LIMIT = 256 << 20  # a real tokenizer.json is ~11 MB


def is_hf(model_dir: str) -> bool:
    """A config.json beside weight files of any kind (a pickle too, so that HfModel refuses it by name)."""
    names = os.listdir(model_dir) if os.path.isdir(model_dir) else []
    return "config.json" in names and any(n.endswith(WEIGHT_SUFFIXES) for n in names)


def _version(v: str) -> Tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:2])


def _read_json(path: str) -> dict:
    try:
        d = json.loads(read_regular(path, JSON_LIMIT))
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror or e}") from None
    except (ValueError, RecursionError) as e:
        raise ValueError(f"{path}: not JSON ({type(e).__name__}: {e})") from None
    if not isinstance(d, dict):
        raise ValueError(f"{path}: not a JSON object")
    return d


def check_config(model_dir: str) -> dict:
    """config.json, its model_type on the allow-list and its vocab_size a positive integer."""
    path = os.path.join(model_dir, "config.json")
    cfg = _read_json(path)
    mt = cfg.get("model_type")
    if mt not in SUPPORTED:
        names = ", ".join(f"{k} ({v})" for k, v in SUPPORTED.items())
        raise ValueError(f"{path}: model_type {mt!r} is not one the learner supports ({names}); "
                         "other architectures are not tested here and are refused")
    v = cfg.get("vocab_size")
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{path}: vocab_size must be a positive integer, found {v!r}")
    return cfg


def check_weights(model_dir: str) -> None:
    """model.safetensors or a sharded model.safetensors.index.json; a pickle alone is refused by name."""
    names = sorted(os.listdir(model_dir))
    if "model.safetensors" in names or "model.safetensors.index.json" in names:
        return
    pickles = [n for n in names if n.endswith(PICKLE_SUFFIXES)]
    if pickles:
        raise ValueError(f"{os.path.join(model_dir, pickles[0])} is a pickle, which the learner does not load "
                         "(unpickling can run any code); convert the weights to model.safetensors")
    raise ValueError(f"{model_dir}: no model.safetensors (nor model.safetensors.index.json) to load")


def tokenizer_vocab(model_dir: str) -> Optional[Tuple[int, str]]:
    """(highest token id + 1, the file that says so) of the directory's tokenizer, or None when it
    has no tokenizer.json nor vocab.json."""
    tj = os.path.join(model_dir, "tokenizer.json")
    if os.path.isfile(tj):
        d = _read_json(tj)
        vocab = d.get("model", {}).get("vocab") if isinstance(d.get("model"), dict) else None
        if isinstance(vocab, dict):  # BPE, WordPiece: token -> id
            ids = [i for i in vocab.values() if isinstance(i, int)]
        elif isinstance(vocab, list):  # Unigram: [token, score] at its id
            ids = [len(vocab) - 1] if vocab else []
        else:
            raise ValueError(f"{tj}: model.vocab is neither an object nor a list")
        added = d.get("added_tokens") or []
        ids += [t["id"] for t in added if isinstance(t, dict) and isinstance(t.get("id"), int)]
        return (max(ids) + 1 if ids else 0), tj
    vj = os.path.join(model_dir, "vocab.json")
    if os.path.isfile(vj):
        ids = [i for i in _read_json(vj).values() if isinstance(i, int)]
        aj = os.path.join(model_dir, "added_tokens.json")
        if os.path.isfile(aj):
            ids += [i for i in _read_json(aj).values() if isinstance(i, int)]
        return (max(ids) + 1 if ids else 0), vj
    return None


def check_dir(model_dir: str) -> dict:
    """Everything about model_dir that can be refused before transformers reads it; its config."""
    cfg = check_config(model_dir)
    check_weights(model_dir)
    tok = tokenizer_vocab(model_dir)
    if tok is not None and tok[0] > cfg["vocab_size"]:
        raise ValueError(f"{tok[1]} has token ids up to {tok[0] - 1}, but {os.path.join(model_dir, 'config.json')} "
                         f"vocab_size is {cfg['vocab_size']}: the tokenizer does not belong to these weights")
    return cfg


def import_transformers(model_dir: str):
    """transformers, or ValueError saying what to install (it needs a torch newer than Debian's 1.13)."""
    if _version(torch.__version__) < MIN_TORCH:
        raise ValueError(f"{model_dir} holds Hugging Face weights, which need torch >= {'.'.join(map(str, MIN_TORCH))} "
                         f"and transformers; this Python has torch {torch.__version__} (Debian's torch runs only the "
                         "embedded model): run the learner with a Python of requirements.txt (--python / MEMPO_PYTHON)")
    try:
        import transformers
    except ImportError:
        raise ValueError(f"{model_dir} holds Hugging Face weights but `transformers` is not importable "
                         "(pip install -r requirements.txt)") from None
    if _version(transformers.__version__) < MIN_TRANSFORMERS:
        raise ValueError(f"{model_dir}: transformers {transformers.__version__} is too old, the learner needs "
                         f">= {'.'.join(map(str, MIN_TRANSFORMERS))}")
    transformers.utils.logging.disable_progress_bar()  # a bar per load in the learner's log is noise
    return transformers


class HfModel:
    kind = "transformers AutoModelForCausalLM"

    def __init__(self, model_dir: str):
        check_dir(model_dir)
        transformers = import_transformers(model_dir)
        self.model_dir = model_dir
        # no code from the directory, no pickle, float32 (bf16 is autocast by the learner)
        self.lm = transformers.AutoModelForCausalLM.from_pretrained(
            model_dir, use_safetensors=True, trust_remote_code=False, dtype=torch.float32)
        self.kind = f"transformers {type(self.lm).__name__}"
        self.vocab_size = int(self.lm.config.vocab_size)
        self.max_context = context_length(self.lm.config)

    @staticmethod
    def logits_at(lm, ids, mask, rows):
        """Logits [N, V] at the flat positions `rows` (into B*T): the lm head on those rows only, as
        the ForCausalLM forward computes them (none of the supported types scales or caps logits).
        All B*T rows would be B*T x V floats: 10 GB for a 16k-token chunk of a 152k vocabulary."""
        h = lm.model(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
        return lm.lm_head(h.reshape(-1, h.shape[-1]).index_select(0, rows))

    def save(self, out_dir: str) -> None:
        """save_pretrained (safetensors, config.json, generation_config.json), plus the source's
        other files (tokenizer, chat template) as they are; no weights of the source's."""
        self.lm.save_pretrained(out_dir)
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
