"""Interpolate the weights of two model directories of the same architecture (WiSE-FT; a "model soup" of
two RL runs from one start): OUT/model.onnx = (1 - LAMBDA) * A + LAMBDA * B on every float initializer,
the graph and every other file (config, tokenizer) from B, and a manifest.json over them.

    python3 training/interpolate.py A B LAMBDA OUT

Refused, with OUT untouched (nothing is written but OUT.tmp, removed on failure), when OUT exists, when
LAMBDA is not in [0, 1], or when the two models' initializers differ in name, shape or dtype, or their
non-float initializers differ in value (an interpolation of two different architectures means nothing).
The sum runs in float64 and is rounded once to the initializer's dtype.
"""
import os
import shutil
import sys

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
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        for f in FILES:
            if os.path.isfile(os.path.join(b_dir, f)):
                shutil.copyfile(os.path.join(b_dir, f), os.path.join(tmp, f))
        onnx.save(b_model, os.path.join(tmp, "model.onnx"))
        write_manifest(tmp, os.path.basename(os.path.normpath(out)), writer="training/interpolate.py")
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
