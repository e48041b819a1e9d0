"""Interpolate the weights of two model directories of the same architecture (WiSE-FT; a "model soup" of
two RL runs from one start): OUT/model.onnx = (1 - LAMBDA) * A + LAMBDA * B on every float initializer,
the graph and every other file (config, tokenizer) from B, and a manifest.json over them (named as B's).
config.json's `mempo` records `interpolate: {a, b, lambda}`; where both models hold the `rl` record of
training/rl-export.mjs, `rl` becomes the list of both models' runs and `rl_weights` each run's share of
the weights (so averaging a third run in with LAMBDA = 1/3 lists three runs, each 1/3).

    python3 training/interpolate.py A B LAMBDA OUT

Refused, with OUT untouched (nothing is written but a new temporary directory beside OUT, removed on failure,
never one that was there before), when OUT exists, when
LAMBDA is not in [0, 1], or when the two models' initializers differ in name, shape or dtype, or their
non-float initializers differ in value (an interpolation of two different architectures means nothing).
The sum runs in float64 and is rounded once to the initializer's dtype.
"""
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "learner", "mempo_learner"))
from manifest import write_manifest  # noqa: E402

FILES = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"]


def fail(msg: str) -> None:
    print(f"interpolate: {msg}", file=sys.stderr)
    sys.exit(2)


def initializers(path: str):
    if not os.path.isfile(path):
        fail(f"{path} is missing")
    model = onnx.load(path)
    return model, {t.name: t for t in model.graph.initializer}


def read_json(path: str):
    if not os.path.isfile(path):
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: cannot read it ({e})")


def rl_runs(config):
    """The (record, share) pairs of a config's RL runs: one record, or a list with rl_weights."""
    mempo = (config or {}).get("mempo") or {}
    rl = mempo.get("rl")
    if rl is None:
        return None
    if isinstance(rl, list):
        return list(zip(rl, mempo.get("rl_weights") or [1 / len(rl)] * len(rl)))
    return [(rl, 1.0)]


def merged_config(a_dir: str, b_dir: str, lam: float):
    a_cfg = read_json(os.path.join(a_dir, "config.json"))
    cfg = read_json(os.path.join(b_dir, "config.json"))
    if cfg is None:
        return None
    mempo = dict(cfg.get("mempo") or {})
    a_runs, b_runs = rl_runs(a_cfg), rl_runs(cfg)
    if a_runs is not None and b_runs is not None:
        runs = [(r, (1 - lam) * w) for r, w in a_runs] + [(r, lam * w) for r, w in b_runs]
        mempo["rl"] = [r for r, _ in runs]
        mempo["rl_weights"] = [round(w, 6) for _, w in runs]
    mempo["interpolate"] = {"a": a_dir, "b": b_dir, "lambda": lam}
    return {**cfg, "mempo": mempo}


def interpolate(a_dir: str, b_dir: str, lam: float, out: str) -> int:
    _, a_init = initializers(os.path.join(a_dir, "model.onnx"))
    b_model, b_init = initializers(os.path.join(b_dir, "model.onnx"))
    if set(a_init) != set(b_init):
        only = sorted(set(a_init) ^ set(b_init))[:3]
        fail(f"{a_dir} and {b_dir} have different initializers (e.g. {', '.join(only)})")
    mixed = 0
    for t in b_model.graph.initializer:
        b = numpy_helper.to_array(t)
        a = numpy_helper.to_array(a_init[t.name])
        if a.shape != b.shape or a.dtype != b.dtype:
            fail(f"initializer {t.name}: {a.dtype}{list(a.shape)} in {a_dir}, {b.dtype}{list(b.shape)} in {b_dir}")
        if b.dtype.kind != "f":
            if not np.array_equal(a, b):
                fail(f"initializer {t.name} ({b.dtype}) differs between {a_dir} and {b_dir}")
            continue
        m = ((1 - lam) * a.astype(np.float64) + lam * b.astype(np.float64)).astype(b.dtype)
        t.CopyFrom(numpy_helper.from_array(m, t.name))
        mixed += 1
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        fail(f"{parent} is not a directory")
    tmp = tempfile.mkdtemp(prefix="." + os.path.basename(os.path.normpath(out)) + ".", dir=parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's 0700 would make OUT private
    try:
        for f in FILES:
            if f != "config.json" and os.path.isfile(os.path.join(b_dir, f)):
                shutil.copyfile(os.path.join(b_dir, f), os.path.join(tmp, f))
        cfg = merged_config(a_dir, b_dir, lam)
        if cfg is not None:
            with open(os.path.join(tmp, "config.json"), "w") as f:
                json.dump(cfg, f, indent=2)
                f.write("\n")
        onnx.save(b_model, os.path.join(tmp, "model.onnx"))
        name = (read_json(os.path.join(b_dir, "manifest.json")) or {}).get("name") or os.path.basename(os.path.normpath(out))
        write_manifest(tmp, name, writer="training/interpolate.py")
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return mixed


def main(argv) -> None:
    if len(argv) != 4:
        fail("usage: python3 training/interpolate.py A B LAMBDA OUT")
    a_dir, b_dir, lam_s, out = argv
    try:
        lam = float(lam_s)
    except ValueError:
        lam = float("nan")
    if not 0 <= lam <= 1:
        fail(f"LAMBDA must be a number in [0, 1], got {lam_s!r}")
    if os.path.lexists(out):
        fail(f"{out} exists; choose a new directory (nothing is overwritten)")
    n = interpolate(a_dir, b_dir, lam, out)
    print(f"interpolate: {out}: {n} float initializers, (1 - {lam}) * {a_dir} + {lam} * {b_dir}")


if __name__ == "__main__":
    main(sys.argv[1:])
