"""The learner's HTTP server and frame decoder against hostile input (issue 30, items 7 and 14;
docs/learner.md, "Wire protocol"). test/learner/learner-hostile.test.ts drives the same server
from Node; here: the pieces alone, and the HTTP cases a client library would not send.

    PYTHONPATH=learner /usr/bin/python3 -m unittest test/python/test_learner_server.py
"""
import json
import os
import re
import socket
import struct
import subprocess
import sys
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "learner"))

from mempo_learner import frame  # noqa: E402
from mempo_learner.learner import LearnerError  # noqa: E402
from mempo_learner.server import _parse_head, check_dir  # noqa: E402

TINY = os.path.join(ROOT, "models", "mempo-tiny")


def raw_frame(header: str, data: bytes = b"") -> bytes:
    h = header.encode()
    return struct.pack("<Q", len(h)) + h + data


class FrameTest(unittest.TestCase):
    def test_hostile_headers_are_frame_errors_naming_the_field(self):
        deep = "[" * 100000 + "]" * 100000
        cases = [
            (raw_frame('{"a": {"dtype": "F32", "shape": [1180591620717411303424], "data_offsets": [0, 0]}}'),
             "tensor a: shape [1180591620717411303424] is over 2147483647 elements"),
            # a zero entry makes the byte count 0 whatever the others are: they are bounded too
            (raw_frame('{"a": {"dtype": "F32", "shape": [0, 4294967296, 4294967296], "data_offsets": [0, 0]}}'),
             "tensor a: shape [0, 4294967296, 4294967296] is over 2147483647 elements"),
            (raw_frame('{"a": {"dtype": "F32", "shape": [%s], "data_offsets": [0, 4]}}' % ", ".join(["1"] * 33), b"\0" * 4),
             "tensor a: shape has rank 33, over 8"),
            (raw_frame('{"a": {"dtype": {"x": 1}, "shape": [1], "data_offsets": [0, 4]}}', b"\0" * 4),
             "tensor a: dtype {'x': 1}, expected I32 or F32"),
            (raw_frame('{"a": {"dtype": "F32", "shape": [true], "data_offsets": [0, 4]}}', b"\0" * 4),
             "tensor a: shape holds True, not a size"),
            (raw_frame(deep), "header is not JSON: nested too deeply"),
            (raw_frame(json.dumps({"__metadata__": {"params": deep}})), "__metadata__.params is not JSON: nested too deeply"),
            (raw_frame('{"a": 1e999999}'), "tensor a: header entry is not an object"),
        ]
        for body, msg in cases:
            with self.subTest(msg=msg):
                with self.assertRaises(frame.FrameError) as cm:
                    frame.decode(body)
                self.assertIn(msg, str(cm.exception))

    def test_an_empty_tensor_of_a_legal_shape_still_decodes(self):
        params, t = frame.decode(raw_frame('{"a": {"dtype": "I32", "shape": [0, 7], "data_offsets": [0, 0]}}'))
        self.assertEqual((params, t["a"].shape), ({}, (0, 7)))


class CheckDirTest(unittest.TestCase):
    def test_refusals_name_the_field(self):
        cases = [
            (None, "save_weights: dir must be a non-empty string, received None"),
            ("", "save_weights: dir must be a non-empty string, received ''"),
            ("/tmp/a\0b", "save_weights: dir '/tmp/a\\x00b' holds a NUL byte"),
            ("/tmp/\udcff\ud800", "save_weights: dir '/tmp/\\udcff\\ud800' cannot be a file name (surrogates not allowed)"),
            ("/tmp/" + "é" * 120, "save_weights: dir has a name of 240 bytes"),
            ("/tmp/" + "x" * 256 + "/y", "save_weights: dir has a name of 256 bytes"),
            ("/" + "d/" * 2048, "save_weights: dir is 4097 bytes long, over the 4095-byte path limit"),
        ]
        for value, msg in cases:
            with self.subTest(value=value if not isinstance(value, str) else value[:20]):
                with self.assertRaises(LearnerError) as cm:
                    check_dir(value, "save_weights")
                self.assertEqual(cm.exception.status, 400)
                self.assertIn(msg, cm.exception.message)

    def test_ordinary_paths_pass_unchanged(self):
        for p in ("/tmp/run/checkpoints/step-3", "relative/dir", "/tmp/" + "x" * 200, "/tmp/\udcff"):
            self.assertEqual(check_dir(p, "save_weights"), p)


class ParseHeadTest(unittest.TestCase):
    def test_a_request(self):
        m, target, v, h = _parse_head(b"POST /forward?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length:  12 \r\nX-A: 1\r\nx-a: 2")
        self.assertEqual((m, target, v, h), ("POST", "/forward?x=1", "HTTP/1.1", {"host": "a", "content-length": "12", "x-a": "1, 2"}))

    def test_malformed_heads_are_400_or_431(self):
        cases = [
            (b"GET /info", 400, "is not METHOD TARGET HTTP/1.x"),
            (b"GET  /info HTTP/1.1", 400, "is not METHOD TARGET HTTP/1.x"),
            (b"G(T /info HTTP/1.1", 400, "is not METHOD TARGET HTTP/1.x"),
            (b"GET /info HTTP/2.0", 400, "HTTP/1.0 or HTTP/1.1 only"),
            (b"GET /info HTTP/1.1\r\nHost: a\r\n folded", 400, "is not Name: value"),
            (b"GET /info HTTP/1.1\r\nBad Name: a", 400, "is not Name: value"),
            (b"POST /forward HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 5", 400, "the header content-length is given twice"),
            (b"POST /forward HTTP/1.1\r\nAuthorization: Bearer a\r\nauthorization: Bearer b", 400, "authorization is given twice"),
            (b"GET /info HTTP/1.1" + b"\r\nX: 1" * 101, 431, "101 headers, over the limit of 100"),
        ]
        for head, status, msg in cases:
            with self.subTest(head=head[:40]):
                with self.assertRaises(LearnerError) as cm:
                    _parse_head(head)
                self.assertEqual(cm.exception.status, status)
                self.assertIn(msg, cm.exception.message)


def spawn(*extra):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "learner"))
    env.pop("MEMPO_LEARNER_TOKEN", None)
    return subprocess.Popen([sys.executable, "-m", "mempo_learner", "--model", TINY, "--port", "0", "--threads", "1", *extra],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def read_answer(s: socket.socket) -> bytes:
    """Everything until the server closes (or 10 s pass)."""
    s.settimeout(10)
    out = b""
    while True:
        try:
            c = s.recv(1 << 16)
        except (socket.timeout, ConnectionResetError):
            return out
        if not c:
            return out
        out += c


class ServerTest(unittest.TestCase):
    """One learner with --max-connections 3, for the HTTP cases Node's client never sends."""

    @classmethod
    def setUpClass(cls):
        cls.proc = spawn("--max-connections", "3", "--body-timeout", "3", "--header-timeout", "3")
        line = cls.proc.stdout.readline()
        cls.port = int(json.loads(line)["url"].rsplit(":", 1)[1])

    @classmethod
    def tearDownClass(cls):
        cls.proc.kill()
        cls.proc.wait()
        cls.proc.stdout.close()
        cls.proc.stderr.close()

    def connect(self) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.port))
        self.addCleanup(s.close)
        return s

    def test_pipelined_requests_are_answered_in_order(self):
        s = self.connect()
        s.sendall(b"GET /info HTTP/1.1\r\n\r\nPOST /optim_step HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}"
                  b"GET /nope HTTP/1.1\r\nConnection: close\r\n\r\n")
        out = read_answer(s)
        self.assertEqual(re.findall(rb"HTTP/1\.1 (\d{3}) ", out), [b"200", b"400", b"404"])
        self.assertIn(b"optim_step: lr must be a finite number", out)

    def test_expect_100_continue_and_http_1_0(self):
        s = self.connect()
        s.sendall(b"POST /optim_step HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n")
        s.settimeout(10)
        self.assertEqual(s.recv(25), b"HTTP/1.1 100 Continue\r\n\r\n")
        s.sendall(b"{}")
        self.assertIn(b"HTTP/1.1 400 Bad Request", read_answer(s))
        s = self.connect()
        s.sendall(b"GET /info HTTP/1.0\r\n\r\n")
        out = read_answer(s)  # answered and closed: HTTP/1.0 is not kept alive
        self.assertTrue(out.startswith(b"HTTP/1.1 200 OK\r\n"), out[:100])
        self.assertIn(b"\r\nConnection: close\r\n", out)

    def test_a_head_over_64_KiB_is_431_and_a_GET_body_400(self):
        s = self.connect()
        s.sendall(b"GET /info HTTP/1.1\r\nX-Big: " + b"a" * (70 << 10) + b"\r\n\r\n")
        self.assertIn(b"HTTP/1.1 431 Request Header Fields Too Large", read_answer(s))
        s = self.connect()
        s.sendall(b"GET /info HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc")
        self.assertIn(b"GET /info takes no body, received Content-Length 3", read_answer(s))

    def test_0_at_the_limit_the_longest_idle_connection_makes_room_and_busy_ones_are_never_closed(self):
        idle = self.connect()  # first: no other test's connection is open
        time.sleep(0.2)
        busy = [self.connect() for _ in range(2)]
        for b in busy:  # in the middle of a body: busy
            b.sendall(b"POST /optim_step HTTP/1.1\r\nContent-Length: 10\r\n\r\n{")
        time.sleep(0.2)
        s = self.connect()
        s.sendall(b"GET /info HTTP/1.1\r\nConnection: close\r\n\r\n")
        self.assertIn(b"HTTP/1.1 200 OK", read_answer(s))
        idle.settimeout(5)
        self.assertEqual(idle.recv(10), b"")  # closed to make room, without an answer
        busy.append(self.connect())
        busy[-1].sendall(b"POST /optim_step HTTP/1.1\r\nContent-Length: 10\r\n\r\n{")
        time.sleep(0.2)
        s = self.connect()  # three open, all in the middle of a body: refused at once
        t0 = time.monotonic()
        out = read_answer(s)
        self.assertIn(b"HTTP/1.1 503 Service Unavailable", out)
        self.assertIn(b"(--max-connections)", out)
        self.assertLess(time.monotonic() - t0, 2)
        for b in busy:  # their bodies stalled: 408 after --body-timeout
            self.assertIn(b"HTTP/1.1 408 Request Timeout", read_answer(b))


class CliTest(unittest.TestCase):
    def test_limits_must_be_positive(self):
        for args, msg in [(["--max-connections", "0"], "--max-connections must be at least 1"),
                          (["--header-timeout", "0"], "--header-timeout must be a positive number of seconds, received 0.0"),
                          (["--idle-timeout", "nan"], "--idle-timeout must be a positive number of seconds, received nan")]:
            with self.subTest(args=args):
                r = subprocess.run([sys.executable, "-m", "mempo_learner", "--model", TINY, *args], cwd=ROOT, text=True,
                                   env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "learner")), capture_output=True, timeout=60)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(msg, r.stderr)


if __name__ == "__main__":
    unittest.main()
