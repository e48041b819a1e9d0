"""The learner on 1 and N processes, and DDP against the explicit all-reduce (dist.py).

    PYTHONPATH=learner /usr/bin/python3 -m mempo_learner.bench_dist [--procs 1,2] [--samples 16] [--tokens 500]
        [--threads 2] [--reps 3] [--micro 2]

Prints one JSON object:
  procs  per process count N: a training step over loopback HTTP (--micro forward(grad) +
         backward pairs, then optim_step) on `python -m mempo_learner --nproc N --threads
         threads/N`, the learners timed in turn, rep by rep; its tokens/s, and from optim_step's
         answer rank 0's time in collectives (comm_ms: waiting for the other rank included) and the
         bytes it put into them (comm_bytes);
  ddp    on 2 ranks of threads/2 threads, per backward of one micro-batch (half the batch each):
         no communication, DistributedDataParallel (an all-reduce in every backward), and the
         backward followed by the learner's one flat all-reduce.
"""
import argparse
import datetime
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

from . import frame
from .bench import ADAM, ROOT, batch, padded, post

ADAM_STEP = dict(ADAM, max_grad_norm=1.0)


def start(model, procs, threads):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "learner"))
    p = subprocess.Popen([sys.executable, "-m", "mempo_learner", "--model", model, "--nproc", str(procs), "--threads", str(threads)],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    host, port = json.loads(p.stdout.readline())["url"].rsplit("/", 1)[1].rsplit(":", 1)
    return p, http.client.HTTPConnection(host, int(port), timeout=600)


def step(conn, parts):
    """One training step: a forward(grad) + backward per micro-batch, then optim_step; its answer."""
    for ids, lens, starts in parts:
        params, t = post(conn, "/forward", frame.encode({"policy": "current", "grad": True},
                                                        {"ids": ids, "lengths": lens, "target_start": starts}), frame.CONTENT_TYPE)
        g = np.full(t["logp"].size, 1e-3, np.float32)
        post(conn, "/backward", frame.encode({"forward_id": params["forward_id"]}, {"grad": g}), frame.CONTENT_TYPE)
    return post(conn, "/optim_step", json.dumps(ADAM_STEP).encode())


def split(ids, lens, starts, k):
    at = np.concatenate([[0], np.cumsum(lens)])
    out = []
    for rows in np.array_split(np.arange(len(lens)), k):
        out.append((ids[at[rows[0]]:at[rows[-1] + 1]], lens[rows], starts[rows]))
    return out


def bench_procs(a, parts, tokens):
    learners = {n: start(a.model, n, max(1, a.threads // n)) for n in a.procs}
    times = {n: [] for n in a.procs}
    comm = {n: [] for n in a.procs}
    try:
        for n, (_, c) in learners.items():
            step(c, parts)  # warm-up
        for _ in range(a.reps):
            for n, (_, c) in learners.items():
                t = time.perf_counter()
                o = step(c, parts)
                times[n].append(time.perf_counter() - t)
                comm[n].append((o.get("comm_ms", 0.0), o.get("comm_bytes", 0)))
    finally:
        for p, c in learners.values():
            try:
                post(c, "/shutdown", b"{}")
            except (OSError, RuntimeError):
                p.kill()
            c.close()
            p.wait(timeout=60)
    out = {}
    for n in a.procs:
        s = statistics.median(times[n])
        out[str(n)] = {"threads_per_process": max(1, a.threads // n), "step_s": round(s, 3),
                       "tokens_per_s": round(tokens / s), "comm_ms": round(statistics.median(c for c, _ in comm[n]), 1),
                       "comm_bytes": comm[n][-1][1]}
    return out


def _ddp_rank(rank, world, port, a, parts, out_path):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    from .tiny import TinyModel
    torch.set_num_threads(max(1, a.threads // world))
    store = dist.TCPStore("127.0.0.1", port, world, rank == 0, datetime.timedelta(seconds=300))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    lm = TinyModel(a.model).lm

    class Train(torch.nn.Module):
        def __init__(self, lm):
            super().__init__()
            self.lm = lm

        def forward(self, tok, pos, seg):
            return self.lm.forward_train(tok, pos, seg)

    ids, lens, _ = parts[rank % len(parts)]
    tok, pos, seg = padded(ids, lens)
    plain, ddp = Train(lm), DDP(Train(lm))
    params = list(lm.parameters())

    def backward(m):
        m(tok, pos, seg).float().logsumexp(-1).sum().backward()

    def explicit():
        backward(plain)
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        dist.all_reduce(flat)

    variants = (("none", lambda: backward(plain)), ("ddp", lambda: backward(ddp)), ("explicit", explicit))
    ts = {name: [] for name, _ in variants}
    for rep in range(a.reps + 1):  # the variants in turn, rep by rep (the first a warm-up)
        for name, fn in variants:
            dist.barrier()
            t = time.perf_counter()
            fn()
            if rep:
                ts[name].append(time.perf_counter() - t)
            lm.zero_grad(set_to_none=True)
    res = {f"{name}_backward_ms": round(statistics.median(v) * 1000, 1) for name, v in ts.items()}
    res["allreduce_bytes"] = sum(p.numel() * 4 for p in params)
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(res, f)
    dist.destroy_process_group()


def bench_ddp(a, parts):
    import socket
    import torch.multiprocessing as mp
    with socket.socket() as s:  # a free port for the ranks' store
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "ddp.json")
        mp.spawn(_ddp_rank, args=(2, port, a, parts, out), nprocs=2)
        with open(out) as f:
            return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "mempo-tiny"))
    ap.add_argument("--procs", default="1,2")
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=500)
    ap.add_argument("--threads", type=int, default=2, help="cores in all, shared among a learner's processes")
    ap.add_argument("--micro", type=int, default=2, help="micro-batches per step")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    a.procs = [int(x) for x in a.procs.split(",")]
    ids, lens, starts = batch(a.samples, a.tokens)
    parts = split(ids, lens, starts, a.micro)
    res = {"samples": a.samples, "tokens": int(lens.sum()), "micro_batches": a.micro, "threads": a.threads,
           "reps": a.reps, "torch": torch.__version__, "cpus": os.cpu_count()}
    res["procs"] = bench_procs(a, parts, res["tokens"])
    res["ddp"] = bench_ddp(a, parts)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
