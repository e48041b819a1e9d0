"""The learner attacked as in issue 47: an optimiser step that overflows the weights, saves into
the directories the learner reads from, checkpoint links that lead outside, checkpoints naming
paths that cannot be read, hostile model.onnx files, requests that would take all memory, and
signals while a request runs.

    PYTHONPATH=learner python3 -m unittest discover -s test/python -p 'test_learner_hardening.py'
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np
import torch

from test_learner import ADAM, ROOT, TINY, Client, random_model_dir, samples, spawn
from test_learner_checkpoint import run_step, snapshot

from mempo_learner import frame  # noqa: E402 (test_learner put learner/ on the path)
from mempo_learner.__main__ import STOP_GRACE_S  # noqa: E402
from mempo_learner.learner import Learner, LearnerError  # noqa: E402


class StepAndSaveTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pyl-hard-")
        cls.model = random_model_dir(cls.tmp, 5)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def grad_step(self, ln, seed=1):
        ids, lens, st = samples(seed, [14, 9], [3, 2])
        fid, _, _ = ln.forward(ids, lens, st, "current", True)
        ln.backward(fid, np.full(int((lens - st).sum()), 0.25, np.float32))

    def test_a_step_that_overflows_the_weights_is_refused_and_undone(self):
        ln = Learner(self.model, seed=1)
        run_step(ln, 3)  # AdamW has state to keep, step 1
        weights = [p.detach().clone() for p in ln.params]
        state = {i: {k: v.clone() for k, v in st.items()} for i, st in ln.opt.state_dict()["state"].items()}
        self.grad_step(ln)
        with self.assertRaises(LearnerError) as cm:
            ln.optim_step(dict(ADAM, lr=1e308, max_grad_norm=0))
        e = cm.exception
        self.assertEqual((e.code, e.status), ("bad_request", 400), e.message)
        self.assertIn(f"made weight {ln.param_names[0]} non-finite", e.message)
        self.assertEqual(ln.step, 1)
        for a, b in zip(ln.params, weights):
            self.assertTrue(torch.equal(a, b))
        after = ln.opt.state_dict()["state"]
        self.assertEqual(sorted(after), sorted(state))
        for i, st in state.items():
            for k, v in st.items():
                self.assertTrue(torch.equal(after[i][k], v), (i, k))
        self.assertTrue(all(p.grad is None for p in ln.params))  # the gradients are gone with the step
        # the learner goes on: forwards are finite, a sane step and both saves work
        ids, lens, st = samples(2, [12], [4])
        self.assertTrue(np.isfinite(ln.forward(ids, lens, st)[1]).all())
        self.grad_step(ln)
        ln.optim_step(ADAM)
        self.assertEqual(ln.step, 2)
        ln.save_checkpoint(os.path.join(self.tmp, "after-refused-step"))

    def test_the_first_step_refused_leaves_no_optimizer_state(self):
        ln = Learner(self.model, seed=1)
        self.grad_step(ln)
        with self.assertRaises(LearnerError):
            ln.optim_step(dict(ADAM, lr=1e308, max_grad_norm=0))
        self.assertEqual((ln.step, len(ln.opt.state)), (0, 0))

    def test_non_finite_weights_are_never_saved(self):
        ln = Learner(self.model, seed=1)
        with torch.no_grad():
            ln.params[3].view(-1)[7] = float("nan")
        for save, name in ((ln.save_weights, "save_weights"), (ln.save_checkpoint, "save_checkpoint")):
            dest = os.path.join(self.tmp, f"nan-{name}")
            with self.assertRaises(LearnerError) as cm:
                save(dest)
            self.assertEqual((cm.exception.code, cm.exception.status), ("non_finite", 409), cm.exception.message)
            self.assertIn(f"weight {ln.param_names[3]} holds a value that is not finite", cm.exception.message)
            self.assertFalse(os.path.lexists(dest))

    def test_saves_into_the_model_or_reference_directory_are_refused(self):
        # --model is a checkpoint the learner saved (the case that was replaced, references and all)
        base = Learner(self.model, seed=1)
        run_step(base, 4)
        ck = base.save_checkpoint(os.path.join(self.tmp, "ck-as-model"))
        ln = Learner(ck, seed=1)
        link = os.path.join(self.tmp, "link-to-ck")
        os.symlink(ck, link)
        other = Learner(self.model, seed=1)
        other.load_checkpoint(ck)  # its KL reference: self.model, the directory ck names
        cases = [(ln, ck, "the learner's --model directory"),
                 (ln, os.path.join(link, ""), "the learner's --model directory"),  # same place, another spelling
                 (other, self.model, "the learner's --model directory"),
                 (other, os.path.join(self.tmp, ".", os.path.basename(self.model)), "the learner's --model directory")]
        ref = Learner(ck, seed=2)
        ref.load_checkpoint(base.save_checkpoint(os.path.join(self.tmp, "ck-2")))  # reference: self.model
        cases.append((ref, self.model, "the KL reference's directory"))
        before = snapshot(self.tmp)
        for learner, dest, role in cases:
            for save in (learner.save_weights, learner.save_checkpoint):  # the first failure ends the test
                with self.assertRaises(LearnerError, msg=f"{save.__name__} {dest}") as cm:
                    save(dest)
                self.assertEqual((cm.exception.code, cm.exception.status), ("bad_request", 400))
                self.assertIn(role, cm.exception.message)
                self.assertIn("nothing was changed", cm.exception.message)
        self.assertEqual(snapshot(self.tmp), before)


class CheckpointLinkTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pyl-hard-link-")
        self.addCleanup(shutil.rmtree, self.tmp)
        self.model = random_model_dir(self.tmp, 6)
        ln = Learner(self.model, seed=1)
        run_step(ln, 2)
        self.ck = ln.save_checkpoint(os.path.join(self.tmp, "ck"))

    def test_a_link_to_a_regular_file_outside_the_checkpoint_is_refused(self):
        outside = os.path.join(self.tmp, "elsewhere.json")
        shutil.copyfile(os.path.join(self.ck, "learner.json"), outside)
        for name in ("learner.json", "config.json"):
            with self.subTest(name=name):
                if name != "learner.json":
                    shutil.copyfile(os.path.join(self.ck, name), outside)
                p = os.path.join(self.ck, name)
                kept = p + ".kept"
                os.rename(p, kept)
                os.symlink(outside, p)
                try:
                    t = Learner(self.model, seed=1)
                    with self.assertRaises(LearnerError) as cm:
                        t.load_checkpoint(self.ck)
                    self.assertIn(f"{p} is a symbolic link to {outside}, outside the checkpoint directory", cm.exception.message)
                    self.assertEqual(t.step, 0)
                finally:
                    os.remove(p)
                    os.rename(kept, p)

    def test_a_link_inside_the_checkpoint_is_followed(self):
        p = os.path.join(self.ck, "learner.json")
        os.rename(p, os.path.join(self.ck, "learner.real.json"))
        os.symlink("learner.real.json", p)
        t = Learner(self.model, seed=1)
        t.load_checkpoint(self.ck)
        self.assertEqual(t.step, 1)


if __name__ == "__main__":
    unittest.main()


class RequestLimitTest(unittest.TestCase):
    """Item 1: what one /forward may hold, announced in /info and refused (413) before the learner
    allocates anything for it."""

    def start(self, *extra):
        p = spawn(*extra)

        def stop():
            if p.poll() is None:
                p.kill()
            p.communicate()
        self.addCleanup(stop)
        line = p.stdout.readline()
        self.assertIn('"listening"', line, p.stderr.read() if not line else "")
        c = Client(json.loads(line)["url"])
        self.addCleanup(c.close)
        return p, c

    def rss_kb(self, pid):
        with open(f"/proc/{pid}/status") as f:
            return int(next(ln for ln in f if ln.startswith("VmRSS:")).split()[1])

    def test_the_limits_are_announced_and_enforced(self):
        p, c = self.start()
        st, info = c.json("GET", "/info")
        self.assertEqual(st, 200)
        # the embedded model's context (2048) is below the default graph limit
        self.assertEqual(info["limits"], {"max_forward_tokens": 1 << 20, "max_forward_samples": 16384, "max_graph_tokens": 16384})
        before = self.rss_kb(p.pid)
        # the repro: 100,000 samples of 2 tokens with grad (a 1.2 MB frame) took 24 GB
        n = 100_000
        t = {"ids": np.ones(2 * n, np.int32), "lengths": np.full(n, 2, np.int32), "target_start": np.ones(n, np.int32)}
        t0 = time.monotonic()
        st, r = c.frame("/forward", {"policy": "current", "grad": True}, t)
        self.assertEqual((st, r["error"]["code"]), (413, "bad_request"), r)
        self.assertIn("100000 samples, over the limit of 16384 (max_forward_samples", r["error"]["message"])
        self.assertLess(time.monotonic() - t0, 10)
        self.assertLess(self.rss_kb(p.pid) - before, 200_000)  # KiB: nothing was built for it
        # within the sample and token limits, the graph a grad forward would keep: the chunk of
        # 8 × 2048 (16384 tokens, the learner's chunk) and the 5-token sample alone
        ids, lens, starts = samples(3, [2048] * 8 + [5], [1] * 9)
        t = {"ids": ids, "lengths": lens, "target_start": starts}
        st, r = c.frame("/forward", {"policy": "current", "grad": True}, t)
        self.assertEqual(st, 413, r)
        self.assertIn("pad to 16389 tokens kept until backward, over the limit of 16384 (max_graph_tokens", r["error"]["message"])
        # the same samples without grad keep no graph: answered
        st, (params, out) = c.frame("/forward", {"policy": "current", "grad": False}, t)
        self.assertEqual((st, out["logp"].size), (200, int((lens - starts).sum())))
        self.assertLess(self.rss_kb(p.pid) - before, 2_000_000)

    def test_the_limits_are_options_and_bound_the_body_before_it_is_read(self):
        p, c = self.start("--max-forward-tokens", "1000", "--max-forward-samples", "10", "--max-graph-tokens", "300")
        st, info = c.json("GET", "/info")
        self.assertEqual(info["limits"], {"max_forward_tokens": 1000, "max_forward_samples": 10, "max_graph_tokens": 300})
        ids, lens, starts = samples(4, [100] * 3, [1] * 3)
        t = {"ids": ids, "lengths": lens, "target_start": starts}
        self.assertEqual(c.frame("/forward", {"policy": "current", "grad": True}, t)[0], 200)  # 300 padded tokens
        ids, lens, starts = samples(4, [101, 100, 100], [1] * 3)
        st, r = c.frame("/forward", {"policy": "current", "grad": True}, {"ids": ids, "lengths": lens, "target_start": starts})
        self.assertEqual(st, 413)
        self.assertIn("pad to 303 tokens", r["error"]["message"])
        ids, lens, starts = samples(4, [500, 501], [1, 1])
        st, r = c.frame("/forward", {"policy": "current", "grad": False}, {"ids": ids, "lengths": lens, "target_start": starts})
        self.assertEqual(st, 413)
        self.assertIn("1001 tokens, over the limit of 1000 (max_forward_tokens", r["error"]["message"])
        # a Content-Length past what the limits allow is refused before a byte of the body is read
        cap = (1 << 20) + 4 * (1000 + 2 * 10)
        s = socket.create_connection((c.conn.host, c.conn.port))
        self.addCleanup(s.close)
        s.sendall(f"POST /forward HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-mempo-frame\r\n"
                  f"Content-Length: {cap + 1}\r\n\r\n".encode())
        head = s.recv(65536).decode("latin-1")
        self.assertTrue(head.startswith("HTTP/1.1 413"), head)
        self.assertIn(f"a body of {cap + 1} bytes is over the {cap}-byte limit", head)
        self.assertEqual(c.json("GET", "/info")[0], 200)

    def test_bad_limit_options_are_refused(self):
        for flag, v in (("--max-forward-tokens", "0"), ("--max-graph-tokens", "-3"), ("--max-forward-samples", str(2 ** 31))):
            with self.subTest(flag=flag):
                r = subprocess.run([sys.executable, "-m", "mempo_learner", "--model", TINY, flag, v], cwd=ROOT,
                                   env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "learner")),
                                   capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 2)
                self.assertIn(f"{flag} must be in [1, {2 ** 31 - 1}], received {v}", r.stderr)


class OnnxReaderTest(unittest.TestCase):
    """Item 8: model.onnx gets mempo serve's reader rules (src/engines/local/reload.ts)."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pyl-hard-onnx-")
        self.addCleanup(shutil.rmtree, self.tmp)

    def write(self, name, data):
        p = os.path.join(self.tmp, name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def refused(self, path, msg, timeout=30):
        """OnnxWeights(path) in a child process: refused with msg within timeout seconds."""
        code = ("import sys\nfrom mempo_learner.onnx_weights import OnnxWeights\n"
                "try:\n    OnnxWeights(sys.argv[1])\nexcept ValueError as e:\n    print(e)\n    sys.exit(3)\n")
        t0 = time.monotonic()
        r = subprocess.run([sys.executable, "-c", code, path], env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "learner")),
                           capture_output=True, text=True, timeout=timeout)
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        self.assertIn(msg, r.stdout)
        return time.monotonic() - t0

    def test_a_file_over_the_size_limit_is_refused_by_its_size(self):
        p = os.path.join(self.tmp, "model.onnx")
        with open(p, "wb") as f:
            f.truncate(2 ** 31)  # sparse: 2 GiB of zeros that take no disk
        self.refused(p, f"{p} has {2 ** 31} bytes, more than the {2 ** 31 - 1} an ONNX model may have", timeout=20)

    def test_field_number_zero_and_malformed_fields_are_refused(self):
        graph_tag = bytes([7 << 3 | 2])
        cases = [
            (bytes(64), "field number 0 at byte 0"),
            (graph_tag + bytes([3, 5 << 3 | 2, 1, 0]), "field number 0 at byte 4"),  # inside an initializer
            (graph_tag + bytes([2]) + bytes([0x80]), "field 7: length 2 runs past its message"),
            (bytes([1 << 3 | 0]) + bytes([0xff] * 11), "varint too long"),
            (bytes([1 << 3 | 0, 0x80]), "truncated varint"),
            (bytes([1 << 3 | 1, 1, 2]), "field 1: a fixed-size value runs past its message"),
            (bytes([1 << 3 | 3]), "unsupported wire type 3"),
            (bytes([0x80, 0x80, 0x80, 0x80, 0x10, 0]), f"field number {2 ** 29} at byte 0 is over protobuf's 2^29 - 1"),
        ]
        for data, msg in cases:
            with self.subTest(msg=msg):
                p = self.write("m.onnx", data)
                self.refused(p, f"{p}: {msg}")

    def test_a_fifo_or_device_is_refused_unopened(self):
        fifo = os.path.join(self.tmp, "fifo.onnx")
        os.mkfifo(fifo)
        self.refused(fifo, f"{fifo} is not a regular file", timeout=20)
        link = os.path.join(self.tmp, "zero.onnx")
        os.symlink("/dev/zero", link)
        self.refused(link, f"{link} is not a regular file", timeout=20)

    def test_a_checkpoint_with_a_huge_model_onnx_is_a_400_at_once(self):
        model = random_model_dir(self.tmp, 7)
        ln = Learner(model, seed=1)
        run_step(ln, 2)
        ck = ln.save_checkpoint(os.path.join(self.tmp, "ck"))
        with open(os.path.join(ck, "model.onnx"), "r+b") as f:
            f.truncate(2 ** 31)
        t0 = time.monotonic()
        with self.assertRaises(LearnerError) as cm:
            ln.load_checkpoint(ck)
        self.assertLess(time.monotonic() - t0, 10)
        self.assertEqual(cm.exception.status, 400)
        self.assertIn(f"more than the {2 ** 31 - 1} an ONNX model may have", cm.exception.message)
        self.assertEqual(ln.step, 1)


class ReferenceAndSignalTest(unittest.TestCase):
    """Item 2: the paths a checkpoint names are checked at load; signals stop a learner whose
    request is still running."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pyl-hard-ref-")
        self.addCleanup(shutil.rmtree, self.tmp)

    def checkpoint_naming(self, ref):
        model = os.path.join(self.tmp, "model")
        if not os.path.exists(model):
            shutil.copytree(TINY, model)
        ln = Learner(model, seed=1)
        run_step(ln, 2)
        ck = ln.save_checkpoint(os.path.join(self.tmp, f"ck-{len(os.listdir(self.tmp))}"))
        p = os.path.join(ck, "learner.json")
        with open(p) as f:
            meta = json.load(f)
        meta["reference_dir"] = ref
        with open(p, "w") as f:
            json.dump(meta, f)
        return ck

    def refused(self, ck, *msgs):
        t = Learner(os.path.join(self.tmp, "model"), seed=1)
        with self.assertRaises(LearnerError) as cm:
            t.load_checkpoint(ck)
        self.assertEqual(cm.exception.status, 400, cm.exception.message)
        for m in msgs:
            self.assertIn(m, cm.exception.message)
        self.assertEqual((t.step, t.reference_dir), (0, os.path.abspath(os.path.join(self.tmp, "model"))))

    def test_a_missing_reference_dir_is_refused_at_load(self):
        ck = self.checkpoint_naming("/nonexistent")
        self.refused(ck, "reference_dir /nonexistent (named by", "No such file or directory")

    def test_a_reference_dir_with_a_fifo_is_refused_at_load_and_nothing_waits_on_it(self):
        ref = os.path.join(self.tmp, "ref")
        shutil.copytree(TINY, ref)
        os.remove(os.path.join(ref, "config.json"))
        os.mkfifo(os.path.join(ref, "config.json"))
        ck = self.checkpoint_naming(ref)
        t0 = time.monotonic()
        self.refused(ck, f"{ref}/config.json is not a regular file")
        self.assertLess(time.monotonic() - t0, 20)

    def test_a_reference_dir_that_is_not_this_model_is_refused_at_load(self):
        other = os.path.join(self.tmp, "other")
        shutil.copytree(TINY, other)
        with open(os.path.join(other, "config.json")) as f:
            cfg = json.load(f)
        cfg["num_hidden_layers"] += 1
        with open(os.path.join(other, "config.json"), "w") as f:
            json.dump(cfg, f)
        plain = os.path.join(self.tmp, "plain")
        os.mkdir(plain)
        big = os.path.join(self.tmp, "big")
        shutil.copytree(TINY, big)
        with open(os.path.join(big, "model.onnx"), "r+b") as f:
            f.truncate(2 ** 31)
        for ref, msg in ((other, "another architecture"), (plain, "is not a mempo-tiny model directory"),
                         (os.path.join(TINY, "config.json"), "is not a directory"),
                         (big, f"model.onnx has {2 ** 31} bytes, over the {2 ** 31 - 1}-byte limit")):
            with self.subTest(ref=ref):
                self.refused(self.checkpoint_naming(ref), msg)

    def test_a_valid_reference_dir_loads_and_is_used(self):
        ref = os.path.join(self.tmp, "ref")
        shutil.copytree(TINY, ref)
        ck = self.checkpoint_naming(ref)
        t = Learner(os.path.join(self.tmp, "model"), seed=1)
        t.load_checkpoint(ck)
        self.assertEqual(t.reference_dir, ref)
        ids, lens, st = samples(1, [9], [2])
        self.assertTrue(np.isfinite(t.forward(ids, lens, st, "reference")[1]).all())

    def test_signals_stop_the_learner_while_a_request_runs(self):
        # a forward of 2^20 tokens without grad: minutes of work for one thread, on any CPU
        n = 512
        ids = np.random.default_rng(0).integers(0, 3072, n * 2048).astype(np.int32)
        body = frame.encode({"policy": "current", "grad": False},
                            {"ids": ids, "lengths": np.full(n, 2048, np.int32), "target_start": np.ones(n, np.int32)})
        for sig in (signal.SIGTERM, signal.SIGINT):
            with self.subTest(signal=sig.name):
                p = spawn("--threads", "1")
                try:
                    url = json.loads(p.stdout.readline())["url"]
                    host, port = url.rsplit("/", 1)[1].rsplit(":", 1)
                    s = socket.create_connection((host, int(port)))
                    self.addCleanup(s.close)
                    s.sendall(f"POST /forward HTTP/1.1\r\nHost: x\r\nContent-Type: {frame.CONTENT_TYPE}\r\n"
                              f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
                    time.sleep(3)  # read, decoded, and the forward under way on the main thread
                    self.assertIsNone(p.poll())
                    t0 = time.monotonic()
                    p.send_signal(sig)
                    code = p.wait(timeout=STOP_GRACE_S + 15)
                    self.assertLess(time.monotonic() - t0, STOP_GRACE_S + 10)
                    err = p.stderr.read()
                    self.assertIn(f"{sig.name}: stopping", err)
                    if sig == signal.SIGTERM:  # the forward runs on: the process is ended after the grace period
                        self.assertIn(f"SIGTERM: the request in progress did not end within {STOP_GRACE_S:g} s: exiting now", err)
                        self.assertEqual(code, 1)
                    else:  # Ctrl-C interrupts the forward itself (its request fails) and the learner exits
                        self.assertIn("interrupted (KeyboardInterrupt)", err)
                        self.assertEqual(code, 0)
                finally:
                    if p.poll() is None:
                        p.kill()
                    p.communicate()

    def test_an_idle_learner_stops_cleanly_on_sigint(self):
        p = spawn()
        try:
            self.assertIn('"listening"', p.stdout.readline())
            p.send_signal(signal.SIGINT)
            # Ctrl-C interrupts the wait for a request: a clean exit (the watcher may not log first)
            self.assertEqual(p.wait(timeout=30), 0)
            self.assertIn("stopped", p.stderr.read())
        finally:
            if p.poll() is None:
                p.kill()
            p.communicate()
