"""Shared by test_peer_verl.py and test_peer_trl.py: a real mempo batch exported for the peers,
and the rule for when a missing peer package skips and when it fails.

The batch is a rollout of the embedded model on 4 questions of the embedded dev split, 4
trajectories each, with `--metric f1 --format-score -0.5` so the outcome scores are not all 0
(the model after RL answers most of these exactly): with seed 4 they take the values 1, 0 and -0.5,
one group has all-equal scores (advantage 0), and some memory rewards are non-zero.
"""
import os
import shutil
import subprocess
import sys
import unittest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CLI = os.path.join(ROOT, "dist", "cli", "main.js")
ROLLOUT = ["--split", "dev", "--limit", "4", "-n", "4", "--max-round-tokens", "24", "--max-turns", "2",
           "--threads", "1", "--questions-per-batch", "4", "--quiet", "--export", "verl,trl",
           "--metric", "f1", "--format-score", "-0.5", "--seed", "4"]


def rollout(out_dir, *extra):
    """`mempo rollout --out out_dir` (dist/, built by `npm run build:ts`) with the flags above."""
    if not os.path.isfile(CLI):
        raise RuntimeError(f"{CLI} is missing: run `npm run build:ts` first")
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is not on PATH")
    r = subprocess.run([node, CLI, "rollout", "--out", out_dir, *ROLLOUT, *extra],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"mempo rollout failed (exit {r.returncode}):\n{r.stderr[-4000:]}")
    return out_dir


def node_json(script, payload):
    """Runs `script` (CommonJS, reads JSON on stdin, prints JSON) with dist/index.js as `m`."""
    import json
    prelude = f"const m = require({json.dumps(os.path.join(ROOT, 'dist', 'index.js'))});\n"
    r = subprocess.run([shutil.which("node") or "node", "-e", prelude + script], input=json.dumps(payload),
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"node failed (exit {r.returncode}):\n{r.stderr[-4000:]}")
    return json.loads(r.stdout)


def require_peer(case, names):
    """Imports the modules `names` (the peer) or skips `case` saying why; under CI=true a Python
    that .ci/run installs the peers into (transformers and torch >= 2 importable: requirements.txt's
    python3) fails instead. Debian's python3 (torch 1.13, no transformers), which the learner suites'
    discovery runs these files under, cannot host verl or TRL at all, so it skips even under CI;
    test/python/peers.test.ts runs them under `python3`."""
    import importlib
    missing = []
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as e:  # an ImportError, or a package that breaks while importing
            missing.append(f"{name} ({type(e).__name__}: {e})")
    if not missing:
        return
    reason = ("not importable: " + "; ".join(missing) +
              " — install with `python3 -m pip install --no-deps -r requirements-peers.txt`")
    if os.environ.get("CI") and _hosts_peers():
        raise AssertionError(f"under CI=true the peers must be installed (.ci/run): {reason}")
    print(f"{case.__class__.__name__}: skipped, {reason}", file=sys.stderr)
    raise unittest.SkipTest(reason)


def _hosts_peers():
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError:
        return False
    return int(torch.__version__.split(".")[0]) >= 2
