"""The learner attacked as in issue 47: an optimiser step that overflows the weights, saves into
the directories the learner reads from, checkpoint links that lead outside, checkpoints naming
paths that cannot be read, hostile model.onnx files, requests that would take all memory, and
signals while a request runs.

    PYTHONPATH=learner python3 -m unittest discover -s test/python -p 'test_learner_hardening.py'
"""
import json
import os
import shutil
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

from mempo_learner.learner import Learner, LearnerError  # noqa: E402 (test_learner put learner/ on the path)


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
