"""The learner's HTTP server (docs/learner.md, "Wire protocol (version 1)"): one request at a
time, errors as JSON `{"error": {"code", "message"}}`, never down on a bad request."""
import hmac
import json
import queue
import socket
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import frame
from .learner import Learner, LearnerError, bad

MAX_BODY = 1 << 30  # 1 GiB: a forward of ~250M tokens; anything larger is refused with 413


def log(msg: str) -> None:
    print(f"mempo_learner: {msg}", file=sys.stderr, flush=True)


def _frame_body(body: bytes, ctype: str, what: str):
    if ctype != frame.CONTENT_TYPE:
        raise bad(f"{what}: expected Content-Type {frame.CONTENT_TYPE}, received {ctype or 'none'}")
    try:
        return frame.decode(body)
    except frame.FrameError as e:
        raise bad(f"{what}: bad frame: {e}") from None


def _json_body(body: bytes, what: str, allow_empty: bool = False) -> dict:
    if not body.strip() and allow_empty:
        return {}
    try:
        j = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise bad(f"{what}: the body is not JSON: {e}") from None
    if not isinstance(j, dict):
        raise bad(f"{what}: the body must be a JSON object")
    return j


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mempo_learner"
    ROUTES = {"/info": "GET", "/forward": "POST", "/backward": "POST", "/optim_step": "POST",
              "/save_weights": "POST", "/save_checkpoint": "POST", "/load_checkpoint": "POST",
              "/shutdown": "POST"}

    def setup(self):
        super().setup()
        if self.request.family in (socket.AF_INET, socket.AF_INET6):  # headers and body are two writes:
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no Nagle + delayed-ACK stall

    def log_message(self, fmt, *args):  # one line per request on stderr, with --log-requests
        if self.server.log_requests:
            log(f"{self.address_string()} {fmt % args}")

    def log_error(self, fmt, *args):  # always (http.server routes errors through log_message)
        log(f"{self.address_string()} {fmt % args}")

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, obj: dict) -> None:
        self._send(status, json.dumps(obj).encode("utf-8"), "application/json")

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            raise LearnerError("bad_request", "chunked bodies are not accepted: send Content-Length", 411)
        try:
            n = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            n = -1
        if n < 0:
            self.close_connection = True
            raise bad(f"Content-Length {self.headers.get('Content-Length')!r} is not a size")
        if n > MAX_BODY:
            self.close_connection = True  # the body stays unread
            raise LearnerError("bad_request", f"a body of {n} bytes is over the {MAX_BODY}-byte limit", 413)
        return self.rfile.read(n) if n else b""

    def _handle(self, method: str) -> None:
        srv = self.server
        try:
            if srv.token is not None:
                got = self.headers.get("Authorization", "")
                if not hmac.compare_digest(got.encode("utf-8"), f"Bearer {srv.token}".encode("utf-8")):
                    self.close_connection = True
                    raise LearnerError("unauthorized", "a valid Authorization: Bearer <token> is required", 401)
            body = self._read_body()  # before any answer: an unread body would be the next request
            path = self.path.split("?", 1)[0]
            want = self.ROUTES.get(path)
            if want is None:
                raise LearnerError("not_found", f"{method} {path}: no such endpoint", 404)
            if want != method:
                raise LearnerError("not_found", f"{method} {path}: this endpoint takes {want}", 405)
            ctype = self.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
            status, out, out_type = srv.on_main(lambda: self._dispatch(path, body, ctype))
            self._send(status, out, out_type)
            if path == "/shutdown":
                srv.stop()
        except LearnerError as e:
            self._json(e.status, {"error": {"code": e.code, "message": e.message}})
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as e:  # a bug or an environment failure (disk full): report it, stay up
            log(traceback.format_exc())
            self._json(500, {"error": {"code": "internal", "message": f"{type(e).__name__}: {e}"}})

    def _dispatch(self, path: str, body: bytes, ctype: str):
        ln: Learner = self.server.learner
        t0 = time.perf_counter()

        def ms():
            return round((time.perf_counter() - t0) * 1000, 3)

        if path == "/info":
            return 200, json.dumps(ln.info()).encode("utf-8"), "application/json"
        if path == "/forward":
            params, t = _frame_body(body, ctype, "forward")
            fid, logp, tokens = ln.forward(t.get("ids"), t.get("lengths"), t.get("target_start"),
                                           params.get("policy", "current"), params.get("grad", False))
            return 200, frame.encode({"forward_id": fid, "tokens": tokens, "ms": ms()}, {"logp": logp}), frame.CONTENT_TYPE
        if path == "/backward":
            params, t = _frame_body(body, ctype, "backward")
            tokens = ln.backward(params.get("forward_id"), t.get("grad"))
            return 200, json.dumps({"tokens": tokens, "ms": ms()}).encode("utf-8"), "application/json"
        j = _json_body(body, path[1:], allow_empty=path == "/shutdown")
        if path == "/optim_step":
            out = {"grad_norm": ln.optim_step(j), "step": ln.step}
        elif path == "/save_weights":
            out = {"dir": ln.save_weights(j.get("dir"))}
        elif path == "/save_checkpoint":
            out = {"dir": ln.save_checkpoint(j.get("dir")), "step": ln.step}
        elif path == "/load_checkpoint":
            out = {"dir": ln.load_checkpoint(j.get("dir")), "step": ln.step}
        else:  # /shutdown
            return 200, json.dumps({"ok": True}).encode("utf-8"), "application/json"
        out["ms"] = ms()
        return 200, json.dumps(out).encode("utf-8"), "application/json"


class LearnerServer(ThreadingHTTPServer):
    """Connections are served on threads; the learner's work runs on the main thread, one job at a
    time: torch there is ~15 % faster here than on a handler thread (glibc gives other threads
    their own malloc arena, and the big activations are mapped and unmapped on every call)."""
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, learner: Learner, token=None, log_requests=False):
        if ":" in addr[0]:
            self.address_family = socket.AF_INET6
        super().__init__(addr, Handler)
        self.learner, self.token, self.log_requests = learner, token, log_requests
        self.jobs: "queue.Queue" = queue.Queue()

    def on_main(self, fn):
        """Runs fn on the main thread (serve()) and returns its result or raises its exception."""
        done, box = threading.Event(), {}

        def job():
            try:
                box["result"] = fn()
            except BaseException as e:  # handed back to the handler thread, which answers it
                box["error"] = e
            done.set()

        self.jobs.put(job)
        done.wait()
        if "error" in box:
            raise box["error"]
        return box["result"]

    def stop(self) -> None:
        """Safe from any thread and from a signal handler: never blocks the caller."""
        def run():
            self.shutdown()
            self.jobs.put(None)
        threading.Thread(target=run, daemon=True).start()

    def serve(self) -> None:
        """Accepts on a thread, runs the jobs here until stop()."""
        threading.Thread(target=self.serve_forever, daemon=True).start()
        while True:
            job = self.jobs.get()
            if job is None:
                return
            job()
