"""The learner's HTTP server (docs/learner.md, "Wire protocol (version 1)"): errors as JSON
`{"error": {"code", "message"}}`, never down on a bad request.

Connections live on one asyncio thread, so an open connection costs a socket, not a thread: a
thousand half-open ones cannot keep a real client out. Their number is bounded (the one that has
waited longest for a request makes room), every read has a deadline (Limits), and a request is
checked in the order route and method, token, Content-Length before a byte of its body is read.
The learner's work runs on the main thread, one job at a time: torch there is ~15 % faster here
than on another thread (glibc gives other threads their own malloc arena, and the big
activations are mapped and unmapped on every call)."""
import asyncio
import hmac
import json
import os
import queue
import re
import socket
import sys
import threading
import time
import traceback
from http import HTTPStatus
from typing import Dict, Optional, Tuple

from . import frame
from .learner import Learner, LearnerError, bad
from .limits import Limits

MAX_BODY = 1 << 30  # 1 GiB: a forward of ~250M tokens; anything larger is refused with 413
FRAME_HEAD_ROOM = 1 << 20  # a frame's length word, JSON header and parameters, beyond its arrays
MAX_HEAD = 64 << 10  # request line and headers; more is 431
MAX_HEADERS = 100
READ_CHUNK = 1 << 20
LAST_LOOK = 0.05  # seconds: one more read once a deadline has passed, for bytes that came in time
# A refusal sent before the body is read: the connection is half-closed and what the client is
# still sending is discarded for this long (and this many bytes) before closing it, so that its
# kernel does not answer our answer with a reset and lose it (Apache's "lingering close").
LINGER_S, LINGER_BYTES = 2.0, 4 << 20
ROUTES = {"/info": "GET", "/forward": "POST", "/backward": "POST", "/optim_step": "POST",
          "/save_weights": "POST", "/save_checkpoint": "POST", "/load_checkpoint": "POST",
          "/shutdown": "POST"}
NO_BODY = ("/shutdown",)  # POST routes whose body may be missing
UNIQUE = ("content-length", "transfer-encoding", "authorization", "content-type", "expect")
TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 token: header names, methods


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
    except RecursionError:
        raise bad(f"{what}: the body is not JSON: nested too deeply") from None
    if not isinstance(j, dict):
        raise bad(f"{what}: the body must be a JSON object")
    return j


def _limit(name: str, fallback: int) -> int:
    try:
        return int(os.pathconf("/", name))
    except (OSError, ValueError, AttributeError):
        return fallback


PATH_MAX = _limit("PC_PATH_MAX", 4096)
NAME_MAX = _limit("PC_NAME_MAX", 255)
# the learner writes DIR.tmp-<pid> next to DIR (learner.py): the last name needs room for that
SUFFIX_ROOM = 32


def check_dir(value, what: str) -> str:
    """A `dir` parameter the OS can take: a non-empty string, no NUL byte, encodable, at most
    PATH_MAX bytes, every name at most NAME_MAX (the last with room for a temporary suffix).
    Anything else is a 400 naming the field, not an exception from deep inside os."""
    if not isinstance(value, str) or not value:
        raise bad(f"{what}: dir must be a non-empty string, received {value!r}")
    shown = value if len(value) <= 80 else f"{value[:60]}… ({len(value)} characters)"
    try:
        raw = os.fsencode(value)
    except UnicodeEncodeError as e:
        raise bad(f"{what}: dir {shown!r} cannot be a file name ({e.reason})") from None
    if b"\0" in raw:
        raise bad(f"{what}: dir {shown!r} holds a NUL byte")
    if len(raw) >= PATH_MAX:
        raise bad(f"{what}: dir is {len(raw)} bytes long, over the {PATH_MAX - 1}-byte path limit")
    names = [n for n in raw.split(b"/") if n]
    for i, n in enumerate(names):
        room = NAME_MAX - (SUFFIX_ROOM if i == len(names) - 1 else 0)
        if len(n) > room:
            raise bad(f"{what}: dir has a name of {len(n)} bytes ({n[:40].decode(errors='replace')}…), over the {room}-byte limit"
                      + (f" ({NAME_MAX} less room for the learner's temporary suffix)" if room < NAME_MAX else ""))
    return value


class _Closed(Exception):
    """The connection is over (the peer went away, a deadline passed, or it was evicted)."""


class _Conn:
    __slots__ = ("reader", "writer", "peer", "buf", "busy", "since")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, now: float):
        self.reader, self.writer = reader, writer
        peer = writer.get_extra_info("peername")
        self.peer = peer[0] if isinstance(peer, tuple) else str(peer)
        self.buf = bytearray()  # bytes read past the current request's head
        self.busy = False  # between a request's headers and its answer: never evicted
        self.since = now  # when it began waiting for a request


class LearnerServer:
    """Serves on a thread (the asyncio loop), runs the learner's jobs on the caller's thread (serve())."""

    def __init__(self, addr, learner: Learner, token=None, log_requests=False, limits: Limits = Limits()):
        family = socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
        self.socket = socket.create_server(addr, family=family, backlog=128)  # SO_REUSEADDR on POSIX
        self.server_address = self.socket.getsockname()
        self.learner, self.token, self.log_requests, self.limits = learner, token, log_requests, limits
        self.jobs: "queue.Queue" = queue.Queue()
        self.conns: Dict[_Conn, None] = {}
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self._server: Optional[asyncio.AbstractServer] = None

    # ---- threads -------------------------------------------------------------------------
    def serve(self) -> None:
        """Starts the connection thread, then runs the jobs here until stop()."""
        started = threading.Event()
        failed = []
        threading.Thread(target=self._run_loop, args=(started, failed), name="http", daemon=True).start()
        started.wait()
        if failed:
            raise failed[0]
        while True:
            job = self.jobs.get()
            if job is None:
                return
            job()

    def _run_loop(self, started: threading.Event, failed: list) -> None:
        loop = asyncio.new_event_loop()
        try:
            self._server = loop.run_until_complete(
                asyncio.start_server(self._connection, sock=self.socket, limit=READ_CHUNK))
        except BaseException as e:  # handed to serve(), which raises it on the main thread
            failed.append(e)
            started.set()
            return
        self.loop = loop
        started.set()
        loop.run_forever()

    def stop(self) -> None:
        """Safe from any thread and from a signal handler: never blocks the caller (the handler may
        interrupt the main thread inside jobs.get(), holding the queue's lock)."""
        threading.Thread(target=self.jobs.put, args=(None,), daemon=True).start()

    def server_close(self) -> None:
        if self.loop is not None and self._server is not None:
            self.loop.call_soon_threadsafe(self._server.close)
        else:
            self.socket.close()

    async def _on_main(self, fn):
        """fn's result (or exception), fn run on the main thread by serve()."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def settle(result, error):
            if not fut.done():  # cancelled when its connection went away
                fut.set_exception(error) if error is not None else fut.set_result(result)

        def job():
            try:
                result = fn()
            except Exception as e:
                loop.call_soon_threadsafe(settle, None, e)
            except BaseException as e:  # Ctrl-C: this request fails, the process goes on exiting
                loop.call_soon_threadsafe(settle, None, RuntimeError(f"interrupted ({type(e).__name__})"))
                raise
            else:
                loop.call_soon_threadsafe(settle, result, None)

        self.jobs.put(job)
        return await fut

    # ---- connections ---------------------------------------------------------------------
    def _evict(self) -> bool:
        """Closes the connection that has waited longest for a request; False when all are busy."""
        idle = [c for c in self.conns if not c.busy]
        if not idle:
            return False
        c = min(idle, key=lambda c: c.since)
        self.conns.pop(c, None)
        if self.log_requests:
            log(f"{c.peer} closed: {len(self.conns) + 1} connections open, the limit (--max-connections)")
        c.writer.transport.abort()
        return True

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = _Conn(reader, writer, asyncio.get_running_loop().time())
        if len(self.conns) >= self.limits.max_connections and not self._evict():
            err = LearnerError("busy", f"{len(self.conns)} requests in progress, the limit (--max-connections)", 503)
            await self._refuse(conn, err, linger=False)
            return
        self.conns[conn] = None
        try:
            fresh = True
            while True:
                req = await self._read_head(conn, fresh)
                if req is None:
                    break
                if not await self._request(conn, *req):
                    break
                fresh = False
        except (_Closed, ConnectionError, OSError):
            pass
        except Exception:  # a bug here: logged, this connection only
            log(traceback.format_exc())
        finally:
            self.conns.pop(conn, None)
            writer.close()  # nothing left to flush after an abort

    async def _read_head(self, conn: _Conn, fresh: bool):
        """(method, target, version, headers) of the next request; None when the peer closed or a
        kept-alive connection stayed idle. A head not complete in time is answered 408."""
        loop = asyncio.get_running_loop()
        lim = self.limits
        conn.busy, conn.since = False, loop.time()
        started = fresh or bool(conn.buf)
        deadline = conn.since + (lim.header_timeout if started else lim.idle_timeout)
        looked = False
        while True:
            end = conn.buf.find(b"\r\n\r\n")
            if (end if end >= 0 else len(conn.buf)) > MAX_HEAD:
                await self._refuse(conn, LearnerError("bad_request", f"the request's head is over {MAX_HEAD} bytes", 431))
                return None
            if end >= 0:
                break
            left = deadline - loop.time()
            if left <= 0 and not looked:  # a loop stalled past the deadline may not have read what came in time
                looked, left = True, LAST_LOOK
            elif left <= 0:
                if not conn.buf:  # nothing of a request: closed quietly
                    return None
                err = LearnerError("timeout", f"the request's headers did not arrive within {lim.header_timeout:g} s "
                                   "(--header-timeout)", 408)
                await self._refuse(conn, err, linger=False)
                return None
            try:
                chunk = await asyncio.wait_for(conn.reader.read(READ_CHUNK), left)
            except asyncio.TimeoutError:
                continue
            if not chunk:
                return None
            if not started:  # a kept-alive connection's next request began
                started, deadline, looked = True, loop.time() + lim.header_timeout, False
            conn.buf += chunk
        head = bytes(conn.buf[:end])
        del conn.buf[:end + 4]
        conn.busy = True
        try:
            return _parse_head(head)
        except LearnerError as e:
            await self._refuse(conn, e)
            return None

    async def _request(self, conn: _Conn, method: str, target: str, version: str, h: Dict[str, str]) -> bool:
        """Answers one request; whether the connection can carry another."""
        path = target.split("?", 1)[0]
        keep = version == "HTTP/1.1" and "close" not in h.get("connection", "").lower()
        try:
            n = self._admit(method, path, h)
        except LearnerError as e:
            # a body it announced stays unread: then the connection cannot carry another request
            body_follows = "transfer-encoding" in h or h.get("content-length", "0").strip("0") != ""
            if e.status == 401 or body_follows:
                await self._refuse(conn, e, method=method, target=target)
                return False
            await self._answer(conn, e.status, _error_json(e), "application/json", keep, method, target)
            return keep
        if n and h.get("expect", "").lower() == "100-continue":
            conn.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        try:
            body = await self._read_body(conn, n)
        except LearnerError as e:
            await self._refuse(conn, e, linger=False, method=method, target=target)
            return False
        ctype = h.get("content-type", "").split(";", 1)[0].strip().lower()
        try:
            status, out, out_type = await self._on_main(lambda: self._dispatch(path, body, ctype))
        except LearnerError as e:
            status, out, out_type = e.status, _error_json(e), "application/json"
        except Exception as e:  # a bug or an environment failure (disk full): report it, stay up
            log("".join(traceback.format_exception(type(e), e, e.__traceback__)))
            err = LearnerError("internal", f"{type(e).__name__}: {e}", 500)
            status, out, out_type = 500, _error_json(err), "application/json"
        # a rank failed (dist.py): the group cannot go on, so the answer is the last one
        shutdown = (path == "/shutdown" and status == 200) or getattr(self.learner, "broken", None) is not None
        await self._answer(conn, status, out, out_type, keep and not shutdown, method, target)
        if shutdown:
            conn.writer.close()
            await conn.writer.wait_closed()
            self.stop()
        return keep and not shutdown

    def _admit(self, method: str, path: str, h: Dict[str, str]) -> int:
        """The body's length once route, method, token and Content-Length allow reading it."""
        want = ROUTES.get(path)
        if want is None:
            raise LearnerError("not_found", f"{method} {path}: no such endpoint", 404)
        if want != method:
            raise LearnerError("not_found", f"{method} {path}: this endpoint takes {want}", 405)
        if self.token is not None:
            got = h.get("authorization", "")
            if not hmac.compare_digest(got.encode("utf-8"), f"Bearer {self.token}".encode("utf-8")):
                raise LearnerError("unauthorized", "a valid Authorization: Bearer <token> is required", 401)
        if "transfer-encoding" in h:
            raise LearnerError("bad_request", "chunked bodies are not accepted: send Content-Length", 411)
        v = h.get("content-length")
        if v is None:
            if method == "POST" and path not in NO_BODY:
                raise LearnerError("bad_request", f"{method} {path}: a body with Content-Length is required", 411)
            return 0
        if not re.fullmatch(r"[0-9]+", v):
            raise bad(f"Content-Length {v!r} is not a size")
        if len(v.lstrip("0")) > len(str(MAX_BODY)) or int(v) > MAX_BODY:
            raise LearnerError("bad_request", f"a body of {v} bytes is over the {MAX_BODY}-byte limit", 413)
        n = int(v)
        cap = self._frame_cap(path)
        if cap is not None and n > cap[0]:
            raise LearnerError("bad_request", f"{method} {path}: a body of {n} bytes is over the {cap[0]}-byte "
                               f"limit that {cap[1]} imply (/info limits)", 413)
        if n and method == "GET":
            raise bad(f"{method} {path} takes no body, received Content-Length {n}")
        return n

    def _frame_cap(self, path: str):
        """(most bytes, the limits it comes from) of a /forward or /backward frame: 4-byte values
        (ids, lengths, target_start; grad has at most one per token) and room for the header."""
        lim = getattr(self.learner, "limits", None)
        if lim is None:
            return None
        if path == "/forward":
            return (FRAME_HEAD_ROOM + 4 * (lim.max_forward_tokens + 2 * lim.max_forward_samples),
                    f"max_forward_tokens {lim.max_forward_tokens} and max_forward_samples {lim.max_forward_samples}")
        if path == "/backward":
            return FRAME_HEAD_ROOM + 4 * lim.max_forward_tokens, f"max_forward_tokens {lim.max_forward_tokens}"
        return None

    async def _read_body(self, conn: _Conn, n: int) -> bytes:
        parts = [bytes(conn.buf[:n])]
        del conn.buf[:n]
        got = len(parts[0])
        while got < n:
            try:
                chunk = await asyncio.wait_for(conn.reader.read(min(n - got, READ_CHUNK)), self.limits.body_timeout)
            except asyncio.TimeoutError:
                raise LearnerError("timeout", f"the body stalled: nothing for {self.limits.body_timeout:g} s after "
                                   f"{got} of {n} bytes (--body-timeout)", 408) from None
            if not chunk:
                raise _Closed()
            parts.append(chunk)
            got += len(chunk)
        return b"".join(parts)

    async def _answer(self, conn: _Conn, status: int, body: bytes, ctype: str, keep: bool,
                      method: str = "-", target: str = "-") -> None:
        head = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", "Server: mempo_learner",
                f"Content-Type: {ctype}", f"Content-Length: {len(body)}",
                f"Keep-Alive: timeout={int(self.limits.idle_timeout)}" if keep else "Connection: close"]
        if self.log_requests:
            log(f'{conn.peer} "{method} {target}" {status} {len(body)}')
        conn.writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)  # one write: no Nagle stall
        await self._drain(conn)

    async def _drain(self, conn: _Conn) -> None:
        """Waits for the answer to leave; a client that reads none of it for idle_timeout is dropped."""
        t = conn.writer.transport
        while True:
            before = t.get_write_buffer_size()
            try:
                await asyncio.wait_for(conn.writer.drain(), self.limits.idle_timeout)
                return
            except asyncio.TimeoutError:
                if t.get_write_buffer_size() >= before:
                    t.abort()
                    raise _Closed() from None

    async def _refuse(self, conn: _Conn, e: LearnerError, linger: bool = True, method: str = "-", target: str = "-") -> None:
        """Answers e and ends the connection without reading what the client may still send."""
        try:
            await self._answer(conn, e.status, _error_json(e), "application/json", False, method, target)
            if linger and conn.writer.can_write_eof():
                conn.writer.write_eof()
                loop = asyncio.get_running_loop()
                deadline, dropped = loop.time() + LINGER_S, 0
                while dropped < LINGER_BYTES and loop.time() < deadline:
                    chunk = await asyncio.wait_for(conn.reader.read(READ_CHUNK), deadline - loop.time())
                    if not chunk:
                        break
                    dropped += len(chunk)
        except (asyncio.TimeoutError, ConnectionError, OSError, _Closed):
            pass
        conn.writer.close()

    # ---- the learner's operations (main thread) ------------------------------------------
    def _dispatch(self, path: str, body: bytes, ctype: str):
        ln: Learner = self.learner
        t0 = time.perf_counter()

        def ms():
            return round((time.perf_counter() - t0) * 1000, 3)

        if path == "/info":
            out = dict(ln.info(), max_context=ln.model.max_context)
            return 200, json.dumps(out).encode("utf-8"), "application/json"
        if path == "/forward":
            params, t = _frame_body(body, ctype, "forward")
            fid, logp, tokens = ln.forward(t.get("ids"), t.get("lengths"), t.get("target_start"),
                                           params.get("policy", "current"), params.get("grad", False))
            return 200, frame.encode({"forward_id": fid, "tokens": tokens, "ms": ms()}, {"logp": logp}), frame.CONTENT_TYPE
        if path == "/backward":
            params, t = _frame_body(body, ctype, "backward")
            tokens = ln.backward(params.get("forward_id"), t.get("grad"))
            return 200, json.dumps({"tokens": tokens, "ms": ms()}).encode("utf-8"), "application/json"
        what = path[1:]
        j = _json_body(body, what, allow_empty=path == "/shutdown")
        if path == "/optim_step":
            out = {"grad_norm": ln.optim_step(j), "step": ln.step}
            if ln.world > 1:  # rank 0's time in collectives and bytes put into them since the previous step (dist.py)
                out.update(comm_ms=round(ln.last_comm_ms, 3), comm_bytes=ln.last_comm_bytes)
        elif path == "/save_weights":
            out = {"dir": ln.save_weights(check_dir(j.get("dir"), what))}
        elif path == "/save_checkpoint":
            out = {"dir": ln.save_checkpoint(check_dir(j.get("dir"), what)), "step": ln.step}
        elif path == "/load_checkpoint":
            out = {"dir": ln.load_checkpoint(check_dir(j.get("dir"), what)), "step": ln.step}
        else:  # /shutdown
            return 200, json.dumps({"ok": True}).encode("utf-8"), "application/json"
        out["ms"] = ms()
        return 200, json.dumps(out).encode("utf-8"), "application/json"


def _error_json(e: LearnerError) -> bytes:
    return json.dumps({"error": {"code": e.code, "message": e.message}}).encode("utf-8")


def _parse_head(head: bytes) -> Tuple[str, str, str, Dict[str, str]]:
    """(method, target, version, headers by lower-case name); a malformed head is a 400 (431: too many headers)."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not TOKEN.fullmatch(parts[0]) or not parts[1]:
        raise bad(f"the request line {lines[0][:100]!r} is not METHOD TARGET HTTP/1.x")
    method, target, version = parts
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise bad(f"the request line {lines[0][:100]!r}: HTTP/1.0 or HTTP/1.1 only")
    if len(lines) - 1 > MAX_HEADERS:
        raise LearnerError("bad_request", f"{len(lines) - 1} headers, over the limit of {MAX_HEADERS}", 431)
    headers: Dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not TOKEN.fullmatch(name):  # also a folded (indented) line
            raise bad(f"the header line {line[:100]!r} is not Name: value")
        name, value = name.lower(), value.strip(" \t")
        if name in headers:
            if name in UNIQUE:
                raise bad(f"the header {name} is given twice")
            value = f"{headers[name]}, {value}"
        headers[name] = value
    return method, target, version, headers
