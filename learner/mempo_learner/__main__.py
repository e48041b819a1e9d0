"""python -m mempo_learner --model DIR [--host 127.0.0.1] [--port 0] [--token T] [--seed S]
[--device auto|cpu|cuda] [--dtype auto|fp32|bf16] [--threads N] [--parent-pid PID] [--log-requests]
[--max-connections N] [--header-timeout S] [--body-timeout S] [--idle-timeout S]
[--nproc N] [--collective-timeout S] [--max-forward-tokens N] [--max-forward-samples N] [--max-graph-tokens N]

Prints {"event": "listening", "url": ...} on stdout once it serves; logs to stderr. Several
processes (dist.py): --nproc N spawns ranks 1..N-1 here, or a launcher starts every rank with
RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (and LOCAL_RANK) set; rank 0 serves."""
import argparse
import ipaddress
import json
import os
import signal
import sys

from .limits import GRAPH_TOKENS, Limits, RequestLimits

# deterministic cuBLAS needs this before CUDA starts (torch.use_deterministic_algorithms)
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def watch_parent(pid: int, log) -> None:
    """Exits the process once `pid` is gone (checked every second, on a daemon thread). When `pid`
    is the parent, being re-parented is the sign (a dead parent not yet reaped still answers kill 0)."""
    import threading
    import time

    is_parent = os.getppid() == pid

    def gone() -> bool:
        if is_parent:
            return os.getppid() != pid
        try:
            os.kill(pid, 0)
            return False
        except ProcessLookupError:
            return True
        except PermissionError:
            return False  # alive, owned by another user

    def run():
        while not gone():
            time.sleep(1.0)
        try:
            log(f"parent process {pid} is gone: exiting")
        except OSError:
            pass  # its stderr pipe died with it
        os._exit(0)

    threading.Thread(target=run, name="parent-watch", daemon=True).start()


STOP_GRACE_S = 10.0


class SignalStop:
    """SIGTERM and SIGINT stop the learner, whatever its main thread is doing. The main thread runs
    the requests and may be blocked in a system call (an open() that waits) or a long torch
    operation, where no Python signal handler can run; but the C-level handler writes the signal's
    number to the wakeup fd at once, and a thread reading it asks the server to stop, then ends the
    process if the main thread has not returned within `grace` seconds (a second signal: at once)."""

    def __init__(self, server, log, grace: float = STOP_GRACE_S):
        import socket
        import threading

        self.server, self.log, self.grace = server, log, grace
        self.done = threading.Event()
        self._r, self._w = socket.socketpair()
        self._w.setblocking(False)
        signal.set_wakeup_fd(self._w.fileno(), warn_on_full_buffer=False)
        signal.signal(signal.SIGTERM, lambda *_: None)  # the work is done on the watcher thread
        # Ctrl-C also interrupts the main thread's Python code (a long forward between two torch calls)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        threading.Thread(target=self._watch, name="signals", daemon=True).start()

    def _watch(self) -> None:
        import threading

        seen = 0
        while True:
            for b in self._r.recv(64):
                if b not in (signal.SIGTERM, signal.SIGINT):
                    continue
                name = signal.Signals(b).name
                seen += 1
                if seen > 1:
                    self._exit(f"{name} again")
                self.log(f"{name}: stopping")
                self.server.stop()
                threading.Thread(target=self._deadline, args=(name,), daemon=True).start()

    def _deadline(self, name: str) -> None:
        if not self.done.wait(self.grace):
            self._exit(f"{name}: the request in progress did not end within {self.grace:g} s")

    def _exit(self, why: str) -> None:
        try:
            self.log(f"{why}: exiting now")
        except OSError:
            pass
        os._exit(1)


def parse(argv):
    ap = argparse.ArgumentParser(prog="python -m mempo_learner", description="mempo's torch reference learner (docs/learner.md)")
    ap.add_argument("--model", required=True, help="model directory to start from (also the KL reference)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0: any free port (the listening line names it)")
    ap.add_argument("--token", default=None, help="bearer token (default: $MEMPO_LEARNER_TOKEN); required off loopback")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    ap.add_argument("--dtype", choices=["auto", "fp32", "bf16"], default="auto",
                    help="auto: bf16 on a CUDA device that has it, else fp32; bf16 is CUDA only")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch CPU threads per process (default: the host's cores shared among --nproc)")
    ap.add_argument("--parent-pid", type=int, default=None,
                    help="exit when this process is gone (mempo passes its own pid: a killed trainer leaves no learner behind)")
    ap.add_argument("--log-requests", action="store_true", help="one stderr line per request")
    d = Limits()
    ap.add_argument("--max-connections", type=int, default=d.max_connections,
                    help="connections open at once; at the limit the one idle longest is closed for a new one")
    ap.add_argument("--header-timeout", type=float, default=d.header_timeout,
                    help="seconds for a request's line and headers (408 after)")
    ap.add_argument("--body-timeout", type=float, default=d.body_timeout,
                    help="longest pause, in seconds, inside a request's body (408 after)")
    ap.add_argument("--idle-timeout", type=float, default=d.idle_timeout,
                    help="seconds a kept-alive connection may wait without a request, or leave its answer unread")
    r = RequestLimits()
    ap.add_argument("--max-forward-tokens", type=int, default=r.max_forward_tokens,
                    help="most tokens (Σ lengths) in one /forward; more is 413")
    ap.add_argument("--max-forward-samples", type=int, default=r.max_forward_samples,
                    help="most samples in one /forward; more is 413")
    ap.add_argument("--max-graph-tokens", type=int, default=None,
                    help="most padded tokens a /forward with grad keeps until /backward; more is 413 "
                         f"(default {GRAPH_TOKENS}, or the model's context where longer)")
    ap.add_argument("--nproc", type=int, default=1,
                    help="processes (ranks) on this host: one per device; rank 0 serves, the others are spawned here")
    ap.add_argument("--collective-timeout", type=float, default=600.0,
                    help="seconds a rank waits for the others in a collective before the request fails naming the late rank")
    a = ap.parse_args(argv)
    a.token = a.token or os.environ.get("MEMPO_LEARNER_TOKEN") or None
    if not is_loopback(a.host) and a.token is None:
        ap.error(f"--host {a.host} is not a loopback address: give --token (or MEMPO_LEARNER_TOKEN)")
    a.rank, a.world = 0, a.nproc
    env_world = os.environ.get("WORLD_SIZE")
    if a.nproc < 1:
        ap.error("--nproc must be at least 1")
    if env_world is not None and env_world != "1":
        if a.nproc != 1:
            ap.error(f"--nproc {a.nproc} with WORLD_SIZE={env_world} set: a launcher started the ranks already; give one of them")
        try:
            a.world, a.rank = int(env_world), int(os.environ["RANK"])
            a.master = (os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ["MASTER_PORT"]))
            a.local_rank = int(os.environ.get("LOCAL_RANK", a.rank))
        except (KeyError, ValueError) as e:
            ap.error(f"WORLD_SIZE={env_world} needs integer RANK and MASTER_PORT (and MASTER_ADDR): {e}")
        if not (a.world >= 2 and 0 <= a.rank < a.world):
            ap.error(f"RANK={a.rank} is not in [0, WORLD_SIZE={a.world})")
    if a.threads is None:
        a.threads = max(1, (os.cpu_count() or 1) // a.nproc)
    if a.threads < 1:
        ap.error("--threads must be at least 1")
    if not (0 < a.collective_timeout < 1e6):
        ap.error(f"--collective-timeout must be a positive number of seconds, received {a.collective_timeout}")
    if a.max_connections < 1:
        ap.error("--max-connections must be at least 1")
    for k in ("header_timeout", "body_timeout", "idle_timeout"):
        v = getattr(a, k)
        if not (0 < v < 1e6):  # also NaN
            ap.error(f"--{k.replace('_', '-')} must be a positive number of seconds, received {v}")
    a.limits = Limits(a.max_connections, a.header_timeout, a.body_timeout, a.idle_timeout)
    for k in ("max_forward_tokens", "max_forward_samples", "max_graph_tokens"):
        v = getattr(a, k)
        if v is not None and not 1 <= v <= 2 ** 31 - 1:  # frames index I32 arrays
            ap.error(f"--{k.replace('_', '-')} must be in [1, {2 ** 31 - 1}], received {v}")
    a.request_limits = RequestLimits(a.max_forward_tokens, a.max_forward_samples, a.max_graph_tokens)
    return a, ap


def main(argv=None) -> int:
    a, ap = parse(sys.argv[1:] if argv is None else argv)
    import torch

    from .learner import Learner
    from .server import LearnerServer, log

    torch.set_num_threads(a.threads)
    if a.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: torch sees no CUDA device")
    device = "cuda" if a.device == "cuda" or (a.device == "auto" and torch.cuda.is_available()) else "cpu"
    if a.dtype == "bf16" and device != "cuda":
        ap.error("--dtype bf16 needs a CUDA device")
    dtype = a.dtype
    if dtype == "auto":
        dtype = "bf16" if device == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    torch.use_deterministic_algorithms(True, warn_only=True)
    if device == "cuda" and a.nproc > torch.cuda.device_count():  # nccl takes one device per rank
        ap.error(f"--nproc {a.nproc}: torch sees {torch.cuda.device_count()} CUDA devices, one process per device")
    cfg = {"model": a.model, "seed": a.seed, "device": device, "dtype": dtype, "threads": a.threads,
           "world": a.world, "timeout": a.collective_timeout,
           "limits": [a.max_forward_tokens, a.max_forward_samples, a.max_graph_tokens]}
    if a.rank != 0:  # started by a launcher: no HTTP, rank 0's commands until it is gone
        from .dist import run_worker
        return run_worker(a.rank, dict(cfg, host=a.master[0], port=a.master[1], local_rank=a.local_rank))
    if a.world > 1:
        from .dist import rank_device
        device = rank_device(device, getattr(a, "local_rank", 0))
    group = None
    try:
        if a.world > 1:
            group = start_group(a, cfg)
            from .dist import DistLearner
            learner = DistLearner(a.model, group, device=device, dtype=dtype, seed=a.seed, limits=a.request_limits)
            group.join()
        else:
            learner = Learner(a.model, device=device, dtype=dtype, seed=a.seed, limits=a.request_limits)
        server = LearnerServer((a.host, a.port), learner, a.token, log_requests=a.log_requests, limits=a.limits)
    except (OSError, ValueError, RuntimeError) as e:
        log(f"error: {e}")
        for p in group.procs if group is not None else []:
            p.kill()
        return 1
    host, port = server.server_address[:2]
    shown = f"[{host}]" if ":" in host else host
    log(f"{learner.model.kind} from {a.model}: {learner.info()['parameters']} parameters on {device} ({dtype}), "
        f"{a.threads} threads" + (f", rank 0 of {a.world} ({group.backend})" if group is not None else ""))
    for r, p in enumerate(group.procs if group is not None else [], start=1):
        log(f"rank {r}: pid {p.pid}")
    stopper = SignalStop(server, log)
    if a.parent_pid is not None:
        watch_parent(a.parent_pid, log)
    try:
        try:
            try:
                # inside the try: a Ctrl-C may arrive while the line is flushed, once the reader has it
                print(json.dumps({"event": "listening", "url": f"http://{shown}:{port}"}), flush=True)
                server.serve()
            finally:
                # serve() may return (the watcher stopped it) with the Ctrl-C still pending: it must not
                # interrupt the cleanup below and end the process by the signal instead of exit status 0
                signal.signal(signal.SIGINT, signal.SIG_IGN)
        except KeyboardInterrupt:
            pass
    finally:
        server.server_close()
        if group is not None:
            learner.shutdown()
        stopper.done.set()
    broken = getattr(learner, "broken", None)
    log("stopped" if broken is None else "stopped: a rank failed")
    return 0 if broken is None else 1


def start_group(a, cfg):
    """Rank 0's store and, with --nproc, ranks 1..N-1 spawned here (torch.multiprocessing)."""
    from .dist import Group, spawned_rank
    if a.nproc == 1:  # a launcher starts the other ranks
        return Group.connect(0, a.world, a.master[0], a.master[1], cfg["device"], a.collective_timeout)
    import torch.multiprocessing as mp
    group = Group.connect(0, a.world, "127.0.0.1", 0, cfg["device"], a.collective_timeout)
    ctx = mp.spawn(spawned_rank, args=(dict(cfg, host="127.0.0.1", port=group.store.port),),
                   nprocs=a.world - 1, join=False, daemon=True)
    group.procs, group.context = list(ctx.processes), ctx  # the context holds what the ranks read at start
    return group


if __name__ == "__main__":
    sys.exit(main())
