"""A checkpoint's learner state (docs/learner.md, "Checkpoints"): learner.json (format, step, seed,
reference directory, AdamW's hyperparameters, the parameters' names in order) and
learner.safetensors (AdamW's exp_avg, exp_avg_sq and step of each parameter, torch's RNG states,
bit for bit). Nothing in either is executed: JSON and raw numbers, every field checked against the
model before the learner replaces anything. The pickle of earlier versions (learner.pt) is never
loaded."""
import math
import json
import os
from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np
import torch

from .errors import LearnerError, bad
from .manifest import LEARNER, read_regular
from .tensor_file import TensorFileError, read_tensors, write_tensors

STATE_JSON = "learner.json"
STATE_TENSORS = "learner.safetensors"
LEGACY_PICKLE = "learner.pt"
FORMAT = 2
STATE_KEYS = ("step", "exp_avg", "exp_avg_sq")  # AdamW's per-parameter state (amsgrad off)
NUMPY = {torch.float32: np.dtype(np.float32), torch.float64: np.dtype(np.float64), torch.float16: np.dtype(np.float16)}


@dataclass
class LearnerState:
    step: int
    seed: int
    reference_dir: str
    optimizer: dict  # for AdamW.load_state_dict: every tensor checked
    rng: torch.Tensor
    cuda_rng: Optional[torch.Tensor]


def save_state(out_dir: str, opt: torch.optim.Optimizer, names: Sequence[str], *, step: int, seed: int,
               reference_dir: str, cuda_device: Optional[torch.device]) -> None:
    sd = opt.state_dict()
    (group,) = sd["param_groups"]  # the learner's one group, parameters in `names` order
    tensors = {}
    for i, name in enumerate(names):
        st = sd["state"].get(i, {})
        for key in STATE_KEYS if st else ():
            tensors[f"{key}/{name}"] = st[key].detach().to("cpu").numpy()
    tensors["rng/cpu"] = torch.get_rng_state().numpy()
    if cuda_device is not None:
        tensors["rng/cuda"] = torch.cuda.get_rng_state(cuda_device).numpy()
    write_tensors(os.path.join(out_dir, STATE_TENSORS), tensors)
    meta = {"format": FORMAT, "writer": LEARNER, "step": step, "seed": seed, "reference_dir": reference_dir,
            "optimizer": {"kind": "AdamW", "lr": group["lr"], "betas": list(group["betas"]), "eps": group["eps"],
                          "weight_decay": group["weight_decay"]},
            "parameters": list(names)}
    with open(os.path.join(out_dir, STATE_JSON), "w") as f:
        json.dump(meta, f, indent=2, allow_nan=False)
        f.write("\n")


def _int(meta: dict, key: str, lo: int, hi: int, fail) -> int:
    v = meta.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise fail(f"{key} must be an integer in [{lo}, {hi}], found {v!r}")
    return v


def _float(o: dict, key: str, lo: float, hi: float, fail, lo_open=False, hi_open=False) -> float:
    v = o.get(key)
    if (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
            or v < lo or v > hi or (lo_open and v == lo) or (hi_open and v == hi)):
        raise fail(f"optimizer.{key} must be a finite number in {'(' if lo_open else '['}{lo}, "
                   f"{hi}{')' if hi_open else ']'}, found {v!r}")
    return float(v)


def _read_json(path: str) -> dict:
    try:
        meta = json.loads(read_regular(path, 16 << 20))
    except OSError as e:
        raise bad(f"load_checkpoint: {path}: {e.strerror or e}") from None
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError and a FIFO are ValueErrors too
        raise bad(f"load_checkpoint: {path}: not a JSON state file ({type(e).__name__}: {e})") from None
    if not isinstance(meta, dict):
        raise bad(f"load_checkpoint: {path}: not a JSON object")
    return meta


def load_state(src: str, opt: torch.optim.Optimizer, names: List[str], params: List[torch.Tensor],
               device: torch.device) -> LearnerState:
    """The state in checkpoint directory src, checked whole against the model; LearnerError 400
    naming the file and the field."""
    jpath, tpath = os.path.join(src, STATE_JSON), os.path.join(src, STATE_TENSORS)
    meta = _read_json(jpath)

    def jfail(msg):
        return bad(f"load_checkpoint: {jpath}: {msg}")

    if meta.get("writer") != LEARNER or meta.get("format") != FORMAT:
        raise jfail(f'format {meta.get("format")!r} of writer {meta.get("writer")!r}: expected format {FORMAT} of "{LEARNER}"')
    step = _int(meta, "step", 0, 2 ** 63 - 1, jfail)
    seed = _int(meta, "seed", -(2 ** 63), 2 ** 64 - 1, jfail)
    ref = meta.get("reference_dir")
    if not isinstance(ref, str) or "\0" in ref or not os.path.isabs(ref):
        raise jfail(f"reference_dir must be an absolute path, found {ref!r}")
    o = meta.get("optimizer")
    if not isinstance(o, dict) or o.get("kind") != "AdamW":
        raise jfail(f"optimizer must be {{\"kind\": \"AdamW\", ...}}, found {o!r:.200}")
    lr = _float(o, "lr", 0.0, math.inf, jfail)
    eps = _float(o, "eps", 0.0, math.inf, jfail, lo_open=True)
    wd = _float(o, "weight_decay", 0.0, math.inf, jfail)
    betas = o.get("betas")
    if not isinstance(betas, list) or len(betas) != 2:
        raise jfail(f"optimizer.betas must be [b1, b2], found {betas!r:.200}")
    b = tuple(_float({"betas": x}, "betas", 0.0, 1.0, jfail, hi_open=True) for x in betas)
    got = meta.get("parameters")
    if not isinstance(got, list) or len(got) != len(names):
        n = len(got) if isinstance(got, list) else repr(got)[:100]
        raise jfail(f"parameters: {n} names, the model has {len(names)} parameters")
    for i, (g, want) in enumerate(zip(got, names)):
        if g != want:
            raise jfail(f"parameters[{i}] is {g!r:.200}, the model's is {want!r}")

    try:
        tensors = read_tensors(tpath)
    except TensorFileError as e:
        raise bad(f"load_checkpoint: {e}") from None
    except FileNotFoundError:
        raise bad(f"load_checkpoint: {src} has {STATE_JSON} but no {STATE_TENSORS}") from None
    except (OSError, ValueError) as e:
        raise bad(f"load_checkpoint: {tpath}: {getattr(e, 'strerror', None) or e}") from None

    def tfail(name, msg):
        return bad(f"load_checkpoint: {tpath}: tensor {name}: {msg}")

    def take(name, dtype, shape):
        a = tensors.pop(name)
        if a.dtype != dtype or list(a.shape) != list(shape):
            raise tfail(name, f"{a.dtype} {list(a.shape)}, expected {dtype} {list(shape)}")
        if a.dtype.kind == "f":
            bad_at = np.flatnonzero(~np.isfinite(a))
            if bad_at.size:
                raise tfail(name, f"element {int(bad_at[0])} is {a.reshape(-1)[bad_at[0]]}, not finite")
        return a

    state = {}
    for i, (name, p) in enumerate(zip(names, params)):
        present = [k for k in STATE_KEYS if f"{k}/{name}" in tensors]
        if not present:
            continue  # a parameter that never had a gradient has no AdamW state
        if len(present) != len(STATE_KEYS):
            missing = [f"{k}/{name}" for k in STATE_KEYS if k not in present]
            raise tfail(missing[0], f"missing (the file holds {', '.join(f'{k}/{name}' for k in present)})")
        dt = NUMPY.get(p.dtype)
        if dt is None:
            raise LearnerError("internal", f"load_checkpoint: parameter {name} is {p.dtype}, "
                               "which a checkpoint does not hold", 500)
        exp_avg = take(f"exp_avg/{name}", dt, p.shape)
        exp_avg_sq = take(f"exp_avg_sq/{name}", dt, p.shape)
        if (exp_avg_sq < 0).any():
            raise tfail(f"exp_avg_sq/{name}", "holds a negative second moment")
        st = tensors.pop(f"step/{name}")
        if st.dtype != np.float32 or st.shape not in ((), (1,)):
            raise tfail(f"step/{name}", f"{st.dtype} {list(st.shape)}, expected float32 [] (AdamW's step)")
        s = float(st.reshape(-1)[0])
        if not (math.isfinite(s) and s >= 1 and s == int(s)):
            raise tfail(f"step/{name}", f"{s} is not a step count")
        state[i] = {"step": torch.from_numpy(st), "exp_avg": torch.from_numpy(exp_avg),
                    "exp_avg_sq": torch.from_numpy(exp_avg_sq)}
    if "rng/cpu" not in tensors:
        raise tfail("rng/cpu", "missing (torch's CPU generator state)")
    rng = take("rng/cpu", np.dtype(np.uint8), torch.get_rng_state().shape)
    cuda = None
    if "rng/cuda" in tensors:
        # a CPU learner does not use it: only its form is checked
        want = torch.cuda.get_rng_state(device).shape if device.type == "cuda" else (tensors["rng/cuda"].size,)
        cuda = torch.from_numpy(take("rng/cuda", np.dtype(np.uint8), want))
    if tensors:
        raise tfail(sorted(tensors)[0], "is not part of a learner state (a parameter the model does not have?)")
    group = dict(opt.state_dict()["param_groups"][0], lr=lr, betas=b, eps=eps, weight_decay=wd)
    return LearnerState(step, seed, ref, {"state": state, "param_groups": [group]}, torch.from_numpy(rng), cuda)
