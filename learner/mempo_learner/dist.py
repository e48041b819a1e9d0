"""The learner on N processes (docs/learner.md, "Several processes"): data parallel over
torch.distributed (gloo on CPU, nccl on CUDA), behind the same HTTP protocol.

Rank 0 serves HTTP. Each operation it is asked for becomes a command: a frame (frame.py: JSON
params and raw arrays, nothing executed) put in the rendezvous TCPStore under `cmd/<seq>`, which
every other rank is waiting for; then each rank does its share and the ranks meet in collectives:

  forward     every chunk's rows dealt round the ranks (Learner._plan); the log-probs are summed
              onto rank 0 (each rank holds zeros where it computed nothing, so the sum is exact);
  backward    the whole grad goes to every rank, each back-propagates its rows; a barrier;
  optim_step  the gradients are summed (not averaged: the loss's normalisers are global, so the
              rows' contributions add up to the mini-batch's gradient, docs/algorithm.md §6) in
              one flat all-reduce, then every rank clips and steps identically;
  load        rank 0 reads and checks the checkpoint, then broadcasts weights and AdamW state;
  save        rank 0 alone (every rank holds the same weights and state).

An explicit all-reduce per optim_step, not DistributedDataParallel: the protocol's micro-batches
are separate backward calls and only optim_step says the accumulation is over, so DDP would
all-reduce on every backward (or need no_sync and knowledge of the last one) and average where
the loss wants a sum.

Failures are errors, never hangs: collectives time out (--collective-timeout), a rank that dies
or stalls fails the request in flight naming the rank and its exit status; rank 0 then exits
(status 1), and the ranks it spawned die with it (they watch it), as do ranks started by a
launcher (their store connection breaks)."""
import datetime
import json
import os
import signal
import sys
import time
import traceback
from typing import List, Optional

import numpy as np
import torch
import torch.distributed as dist

from . import frame
from .errors import LearnerError
from .learner import Learner
from .limits import RequestLimits

START_TIMEOUT_S = 600.0  # importing torch and loading the model on every rank


def log(msg: str) -> None:
    print(f"mempo_learner: {msg}", file=sys.stderr, flush=True)


def describe_exit(code: Optional[int]) -> str:
    if code is None:
        return "is still running"
    if code < 0:
        try:
            return f"exited with signal {signal.Signals(-code).name}"
        except ValueError:
            return f"exited with signal {-code}"
    return f"exited with status {code}"


class RankFailed(LearnerError):
    """A rank died or stalled: the group cannot go on; rank 0 answers this, then exits."""

    def __init__(self, message: str):
        super().__init__("rank_failed", message, 500)


class Group:
    """This process's place in the group: rank, world size, the store, the spawned ranks (rank 0
    of --nproc), the collective timeout."""

    def __init__(self, rank: int, world: int, store, timeout_s: float, device: str, procs: Optional[list] = None):
        self.rank, self.world, self.store, self.timeout_s = rank, world, store, timeout_s
        self.backend = "nccl" if device.startswith("cuda") else "gloo"
        # where collectives run: the learner's device under nccl, else the CPU
        self.device = torch.device(device if self.backend == "nccl" else "cpu")
        self.procs = procs or []  # multiprocessing processes of ranks 1..N-1, when spawned here
        self.seq = 0

    @staticmethod
    def connect(rank: int, world: int, host: str, port: int, device: str, timeout_s: float,
                procs: Optional[list] = None) -> "Group":
        """The store (rank 0 hosts it; port 0: any free one, then Group.store.port names it)."""
        store = dist.TCPStore(host, port, world, rank == 0, datetime.timedelta(seconds=START_TIMEOUT_S),
                              wait_for_workers=False)  # rank 0 must spawn them first
        return Group(rank, world, store, timeout_s, device, procs)

    def join(self) -> None:
        """Forms the process group once this rank's model is loaded. Rank 0 first waits for every
        rank's `ready`, naming a spawned rank that exits during start-up instead of waiting on."""
        self.store.set(f"ready/{self.rank}", "1")
        if self.rank == 0:
            deadline = time.monotonic() + START_TIMEOUT_S
            for r in range(1, self.world):
                while True:
                    try:
                        self.store.wait([f"ready/{r}"], datetime.timedelta(milliseconds=200))
                        break
                    except RuntimeError:
                        pass
                    p = self.procs[r - 1] if r - 1 < len(self.procs) else None
                    if p is not None and p.exitcode is not None:
                        raise RuntimeError(f"rank {r} (pid {p.pid}) {describe_exit(p.exitcode)} during start-up"
                                           f"{error_of(self.store, r)}")
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"rank {r} did not start within {START_TIMEOUT_S:g} s")
        if self.backend == "nccl":
            os.environ.setdefault("NCCL_ASYNC_ERROR_HANDLING", "1")  # torch 1.13: the timeout fails the collective
            torch.cuda.set_device(self.device)  # nccl's communicator on this rank's device
        timeout = datetime.timedelta(seconds=self.timeout_s)
        dist.init_process_group(self.backend, store=self.store, rank=self.rank, world_size=self.world, timeout=timeout)
        self.store.set_timeout(timeout)


def has_key(store, key: str) -> bool:
    try:
        store.wait([key], datetime.timedelta(milliseconds=1))
        return True
    except RuntimeError:
        return False


def error_of(store, r: int) -> str:
    """': <the error rank r put in the store>', or ''."""
    try:
        if has_key(store, f"error/{r}"):
            return f": {store.get(f'error/{r}').decode('utf-8', 'replace')}"
    except RuntimeError:
        pass
    return ""


class DistLearner(Learner):
    """A Learner whose operations run on every rank. On rank 0 the server calls forward, backward,
    optim_step, save_*, load_checkpoint and shutdown as on one process; the other ranks run serve_worker()."""

    def __init__(self, model_dir: str, group: Group, **kw):
        super().__init__(model_dir, **kw)
        self.g = group
        self.rank, self.world = group.rank, group.world
        self.broken: Optional[str] = None  # why the group cannot go on (rank 0 exits after answering)
        # time in collectives and bytes this rank put into them, since the previous optim_step (bench)
        self.comm_ms, self.comm_bytes = 0.0, 0
        self.last_comm_ms, self.last_comm_bytes = 0.0, 0

    # ---- rank 0 ------------------------------------------------------------------------------
    def _command(self, op: str, params: dict, tensors: Optional[dict] = None) -> None:
        if self.broken is not None:
            raise RankFailed(self.broken)
        for r, p in enumerate(self.g.procs, start=1):  # one that died while the learner was idle
            if p.exitcode is not None:
                self._fail(op, f"rank {r} (pid {p.pid}) {describe_exit(p.exitcode)}{error_of(self.g.store, r)}")
        self.g.seq += 1
        body = frame.encode(dict(params, op=op), tensors or {})
        try:
            self.g.store.set(f"cmd/{self.g.seq}", body)
            if self.g.seq > 1:
                self.g.store.delete_key(f"cmd/{self.g.seq - 1}")  # every rank has done it (its collectives)
        except RuntimeError as e:
            self._fail(op, f"the store: {e}")

    def _collective(self, op: str, fn, *tensors: torch.Tensor):
        self.comm_bytes += sum(t.numel() * t.element_size() for t in tensors)
        t0 = time.perf_counter()
        try:
            return fn()
        except RuntimeError as e:
            if self.rank != 0:
                raise
            self._fail(op, self._diagnose(op, e))
        finally:
            self.comm_ms += (time.perf_counter() - t0) * 1000

    def _diagnose(self, op: str, e: Exception) -> str:
        """Which rank failed and how: a spawned rank's exit status (waited for briefly: a collective
        can fail a moment before the peer's exit is seen), else the ranks that did not finish."""
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and self.g.procs and all(p.exitcode is None for p in self.g.procs):
            time.sleep(0.05)
        dead = [f"rank {r} (pid {p.pid}) {describe_exit(p.exitcode)}{error_of(self.g.store, r)}"
                for r, p in enumerate(self.g.procs, start=1) if p.exitcode is not None]
        if dead:
            return "; ".join(dead)
        late = []
        for r in range(1, self.world):
            try:
                at = int(self.g.store.get(f"at/{r}")) if has_key(self.g.store, f"at/{r}") else 0
            except (RuntimeError, ValueError):
                at = 0
            if at < self.g.seq:
                late.append(r)
        who = ", ".join(f"rank {r}" for r in late) or "a rank"
        first = str(e).splitlines()[0][:300] if str(e) else type(e).__name__
        if "timed out" in first.lower() or "timeout" in first.lower():
            return f"{who} did not finish {op} within the collective timeout of {self.g.timeout_s:g} s (stalled, or gone): {first}"
        return f"{who} left the group during {op} (its exit status is known only to its launcher): {first}"

    def _fail(self, op: str, why: str):
        self.broken = f"{op}: {why}; the learner's process group is broken, the learner exits"
        log(self.broken)
        for p in self.g.procs:  # a stalled rank would otherwise wait for a rank 0 that is gone
            if p.exitcode is None:
                p.kill()
        raise RankFailed(self.broken)

    def forward(self, ids, lengths, starts, policy: str = "current", grad: bool = False):
        self.check_forward(ids, lengths, starts, policy, grad)  # refused before any rank starts
        self._command("forward", {"policy": policy, "grad": grad},
                      {"ids": ids, "lengths": lengths, "target_start": starts})
        return self._forward_share(ids, lengths, starts, policy, grad)

    def backward(self, forward_id, grad) -> int:
        self.check_backward(forward_id, grad)
        self._command("backward", {}, {"grad": grad})
        return self._backward_share(grad)

    def optim_step(self, p: dict) -> float:
        q = self.check_optim(p)
        self._command("optim_step", q)
        return self.step_with(q)

    def load_checkpoint(self, src) -> str:
        out = super().load_checkpoint(src)  # checked and loaded here first: a bad one changes nothing
        names = [n for n, p in zip(self.param_names, self.params) if p in self.opt.state]
        steps = [float(self.opt.state[p]["step"]) for p in self.params if p in self.opt.state]
        self._command("sync", {"step": self.step, "seed": self.seed, "reference_dir": self.reference_dir,
                               "state": names, "steps": steps}, {"rng": torch.get_rng_state().numpy().astype(np.int32)})  # frames carry I32, F32
        self._sync_share()
        return out

    def shutdown(self) -> None:
        if self.broken is None and self.world > 1:
            try:
                self._command("shutdown", {})
            except RankFailed:
                pass
        for p in self.g.procs:
            p.join(10)
            if p.exitcode is None:
                p.kill()
                p.join()

    # ---- every rank --------------------------------------------------------------------------
    def _forward_share(self, ids, lengths, starts, policy, grad):
        fid, logp, tokens = Learner.forward(self, ids, lengths, starts, policy, grad)
        t = torch.from_numpy(logp).to(self.g.device)
        self._collective("forward", lambda: dist.reduce(t, 0, op=dist.ReduceOp.SUM), t)
        return fid, (t.cpu().numpy() if self.rank == 0 else logp), tokens

    def _backward_share(self, grad) -> int:
        tokens = Learner.backward(self, self.pending[0], grad)
        flag = torch.zeros(1, device=self.g.device)
        self._collective("backward", lambda: dist.all_reduce(flag), flag)
        return tokens

    def reduce_grads(self) -> None:
        """Sums every parameter's gradient over the ranks in one flat all-reduce; a parameter no
        rank has a gradient for stays without one (AdamW then skips it, as on one process)."""
        if self.world == 1:
            return
        dev = self.g.device
        has = torch.tensor([p.grad is not None for p in self.params], dtype=torch.float32, device=dev)
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1).to(dev, torch.float32)
                          for p in self.params])
        self._collective("optim_step", lambda: (dist.all_reduce(has), dist.all_reduce(flat)), has, flat)
        at = 0
        for p, h in zip(self.params, has.tolist()):
            n = p.numel()
            p.grad = flat[at:at + n].view_as(p).to(p.device, p.dtype) if h > 0 else None
            at += n
        self.last_comm_ms, self.last_comm_bytes = self.comm_ms, self.comm_bytes
        self.comm_ms, self.comm_bytes = 0.0, 0

    def _sync_share(self) -> None:
        """Rank 0's weights and AdamW moments to every rank (after rank 0 loaded a checkpoint)."""
        for p in self.params:
            self._bcast(p.data)
        for p in self.params:
            st = self.opt.state.get(p)
            if st:
                for k in ("exp_avg", "exp_avg_sq"):
                    self._bcast(st[k])

    def _bcast(self, t: torch.Tensor) -> None:
        c = t.detach().to(self.g.device)
        self._collective("load_checkpoint", lambda: dist.broadcast(c, 0), c)
        if self.rank != 0:
            t.copy_(c)

    def _apply_sync(self, params: dict, tensors: dict) -> None:
        self.step, self.seed = int(params["step"]), int(params["seed"])
        if params["reference_dir"] != self.reference_dir:
            self.reference_dir, self.reference = params["reference_dir"], None
        by_name = dict(zip(self.param_names, self.params))
        self.opt.state.clear()
        for name, s in zip(params["state"], params["steps"]):
            p = by_name[name]
            self.opt.state[p] = {"step": torch.tensor(float(s)), "exp_avg": torch.zeros_like(p),
                                 "exp_avg_sq": torch.zeros_like(p)}
        torch.set_rng_state(torch.from_numpy(tensors["rng"].astype(np.uint8)))
        self.opt.zero_grad(set_to_none=True)
        self.pending = None
        self._sync_share()

    def serve_worker(self) -> int:
        """Ranks 1..N-1: run rank 0's commands until it says shutdown (0) or is gone (1)."""
        st = self.g.store
        while True:
            key = f"cmd/{self.g.seq + 1}"
            try:
                st.wait([key], datetime.timedelta(seconds=1))
            except RuntimeError as e:
                if "timeout" in str(e).lower():
                    try:
                        st.add("alive", 0)  # raises once rank 0, which hosts the store, is gone
                        continue
                    except RuntimeError:
                        pass
                log(f"rank {self.rank}: rank 0 is gone ({str(e).splitlines()[0]}): exiting")
                return 1
            self.g.seq += 1
            params, tensors = frame.decode(st.get(key))
            op = params.pop("op")
            try:
                if op == "shutdown":
                    return 0
                if op == "forward":
                    self._forward_share(tensors["ids"], tensors["lengths"], tensors["target_start"],
                                        params["policy"], params["grad"])
                elif op == "backward":
                    self._backward_share(tensors["grad"])
                elif op == "optim_step":
                    self.step_with(params)
                elif op == "sync":
                    self._apply_sync(params, tensors)
                else:
                    raise RuntimeError(f"unknown command {op!r}")
            except LearnerError as e:  # raised alike on rank 0 (a gradient norm that is not finite)
                if e.code == "rank_failed":
                    raise
            st.set(f"at/{self.rank}", str(self.g.seq))


def rank_device(device: str, local_rank: int) -> str:
    """One process per device: a CUDA rank takes device LOCAL_RANK (modulo the devices it sees)."""
    if device != "cuda":
        return device
    return f"cuda:{local_rank % torch.cuda.device_count()}"


def spawned_rank(index: int, cfg: dict) -> None:
    """torch.multiprocessing.spawn's entry for rank index + 1 of `--nproc`; rank 0 is the parent."""
    from .__main__ import watch_parent
    watch_parent(os.getppid(), log)  # dies with rank 0
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: rank 0 decides
    sys.exit(run_worker(index + 1, cfg))


def run_worker(rank: int, cfg: dict) -> int:
    """A rank other than 0: connect, load the model, join, serve rank 0's commands; an unexpected
    error is put in the store (rank 0 names it) and ends the process with status 1."""
    torch.set_num_threads(cfg["threads"])
    torch.use_deterministic_algorithms(True, warn_only=True)
    device = rank_device(cfg["device"], cfg.get("local_rank", rank))  # spawned on one host: rank = local rank
    g = None
    try:
        g = Group.connect(rank, cfg["world"], cfg["host"], cfg["port"], device, cfg["timeout"])
        ln = DistLearner(cfg["model"], g, device=device, dtype=cfg["dtype"], seed=cfg["seed"],
                         limits=RequestLimits(*cfg["limits"]))  # rank 0's: every rank checks a forward alike
        g.join()
        return ln.serve_worker()
    except Exception as e:
        log(f"rank {rank}: {traceback.format_exc()}")
        if g is not None:
            try:
                g.store.set(f"error/{rank}", f"{type(e).__name__}: {e}"[:2000])
            except RuntimeError:
                pass
        return 1
