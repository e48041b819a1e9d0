"""Learner throughput against raw torch (issue 14's "protocol + orchestration overhead" figure).

    PYTHONPATH=learner /usr/bin/python3 -m mempo_learner.bench [--samples 16] [--tokens 500] [--threads 2] [--reps 3] [--batch FRAME]

Times, on one batch (S samples of about T tokens, every token after the first a target):
  raw     TinyLM.forward_train + cross-entropy backward, in-process, padded [S, T];
  inproc  Learner.forward(grad) + Learner.backward, in-process;
  http    the same through `python -m mempo_learner` over loopback HTTP (frames);
and the learner's optim_step and save_weights. Prints one JSON object (medians of --reps).
"""
import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

from . import frame
from .learner import Learner

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ADAM = {"lr": 1e-5, "weight_decay": 0.0, "max_grad_norm": 1.0, "betas": [0.9, 0.999], "eps": 1e-8}


def batch(S, T, seed=0):
    rng = np.random.default_rng(seed)
    lens = rng.integers(int(T * 0.9), int(T * 1.1) + 1, S).astype(np.int32)
    ids = rng.integers(0, 3072, int(lens.sum())).astype(np.int32)
    return ids, lens, np.ones(S, np.int32)


def median_s(fn, reps):
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def padded(ids, lens):
    """Packed rows → (tokens, positions, segments), right-padded; padding is its own segment."""
    S, T = len(lens), int(lens.max())
    tok = torch.zeros(S, T, dtype=torch.int64)
    seg = torch.ones(S, T, dtype=torch.int64)
    at = 0
    for r, n in enumerate(lens.tolist()):
        tok[r, :n] = torch.from_numpy(ids[at:at + n].astype(np.int64))
        seg[r, :n] = 0
        at += n
    return tok, torch.arange(T).unsqueeze(0).expand(S, T), seg


def raw_step(lm, ids, lens):
    tok, pos, seg = padded(ids, lens)
    logits = lm.forward_train(tok, pos, seg)
    tgt = tok[:, 1:].masked_fill(seg[:, 1:] != 0, -100)
    F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=-100,
                    reduction="sum").backward()
    lm.zero_grad(set_to_none=True)


def http_learner(model, threads):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "learner"))
    p = subprocess.Popen([sys.executable, "-m", "mempo_learner", "--model", model, "--threads", str(threads)],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = json.loads(p.stdout.readline())["url"]
    host, port = url.rsplit("/", 1)[1].rsplit(":", 1)
    return p, http.client.HTTPConnection(host, int(port), timeout=600)


def post(conn, path, body, ctype="application/json"):
    conn.request("POST", path, body=body, headers={"Content-Type": ctype})
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError(f"{path}: {r.status} {data[:200]!r}")
    return frame.decode(data) if r.getheader("Content-Type") == frame.CONTENT_TYPE else json.loads(data)


def http_step(conn, ids, lens, starts):
    params, t = post(conn, "/forward", frame.encode({"policy": "current", "grad": True},
                                                    {"ids": ids, "lengths": lens, "target_start": starts}),
                     frame.CONTENT_TYPE)
    g = np.full(t["logp"].size, 1.0 / t["logp"].size, np.float32)
    post(conn, "/backward", frame.encode({"forward_id": params["forward_id"]}, {"grad": g}), frame.CONTENT_TYPE)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "mempo-tiny"))
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=500)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--batch", default=None, help="a frame file (ids, lengths, target_start) to time instead of a random batch")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    ids, lens, starts = batch(a.samples, a.tokens)
    if a.batch:
        with open(a.batch, "rb") as f:
            _, t = frame.decode(f.read())
        ids, lens, starts = t["ids"], t["lengths"], t["target_start"]
        a.samples = len(lens)
    n = int(lens.sum())
    ln = Learner(a.model)
    g = np.full(int((lens - starts).sum()), 1.0 / n, np.float32)

    def inproc():
        fid, _, _ = ln.forward(ids, lens, starts, "current", True)
        ln.backward(fid, g)

    res = {"samples": a.samples, "tokens": n, "threads": a.threads, "torch": torch.__version__}
    raw_step(ln.model.lm, ids, lens)  # warm-up
    res["raw_s"] = median_s(lambda: raw_step(ln.model.lm, ids, lens), a.reps)
    inproc()
    res["inproc_s"] = median_s(inproc, a.reps)
    steps = []
    for _ in range(a.reps):  # a step after a backward (without gradients AdamW skips every parameter)
        inproc()
        steps.append(median_s(lambda: ln.optim_step(ADAM), 1))
    res["optim_step_s"] = statistics.median(steps)
    with tempfile.TemporaryDirectory() as d:
        res["save_weights_s"] = median_s(lambda: ln.save_weights(os.path.join(d, "w")), a.reps)
        res["save_checkpoint_s"] = median_s(lambda: ln.save_checkpoint(os.path.join(d, "ck")), a.reps)
    del ln
    p, conn = http_learner(a.model, a.threads)
    try:
        http_step(conn, ids, lens, starts)
        res["http_s"] = median_s(lambda: http_step(conn, ids, lens, starts), a.reps)
        post(conn, "/shutdown", b"{}", "application/json")
    finally:
        conn.close()
        p.wait(timeout=60)
    for k in ("raw", "inproc", "http"):
        res[f"{k}_tokens_per_s"] = round(n / res[f"{k}_s"])
    res["http_overhead_vs_raw"] = round(res["http_s"] / res["raw_s"] - 1, 3)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
