"""Tests of the torch reference learner (learner/mempo_learner, docs/learner.md).

    PYTHONPATH=learner /usr/bin/python3 -m unittest discover -s test/python -p 'test_learner*.py'
"""
import http.client
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "learner"))

from mempo_learner import frame  # noqa: E402
from mempo_learner.learner import Learner, LearnerError  # noqa: E402
from mempo_learner.model import OnnxWrapper  # noqa: E402
from mempo_learner.onnx_weights import OnnxFormatError, OnnxWeights  # noqa: E402
from mempo_learner.tiny import TinyModel  # noqa: E402

TINY = os.path.join(ROOT, "models", "mempo-tiny")
ADAM = {"lr": 1e-3, "weight_decay": 0.1, "max_grad_norm": 0.5, "betas": [0.9, 0.999], "eps": 1e-8}
torch.set_num_threads(2)


def random_model_dir(root: str, seed: int) -> str:
    """models/mempo-tiny with random weights (the trained ones are too peaked to test padding)."""
    torch.manual_seed(seed)
    m = TinyModel(TINY)
    with torch.no_grad():
        for p in m.lm.parameters():
            p.normal_(0.0, 0.5 if p.dim() == 1 else 0.08).add_(1.0 if p.dim() == 1 else 0.0)
    out = os.path.join(root, f"random-{seed}")
    m.save(out)
    return out


def samples(seed: int, lens, starts):
    rng = np.random.default_rng(seed)
    lens = np.array(lens, np.int32)
    return rng.integers(0, 3072, int(lens.sum())).astype(np.int32), lens, np.array(starts, np.int32)


def naive_logp(lm, ids, lens, starts):
    """Per sample, batch of one, all logits through OnnxWrapper.forward (the exported graph)."""
    out, at = [], 0
    H, hd = lm.c.num_attention_heads, lm.c.head_dim
    for n, s in zip(lens.tolist(), starts.tolist()):
        x = torch.from_numpy(ids[at:at + n].astype(np.int64)).unsqueeze(0)
        at += n
        past = [torch.zeros(1, H, 0, hd)] * (2 * lm.c.num_hidden_layers)
        logits = OnnxWrapper(lm)(x, torch.ones(1, n, dtype=torch.int64), torch.arange(n).unsqueeze(0), *past)[0][0]
        lp = torch.log_softmax(logits, -1)
        out.append(lp[torch.arange(s - 1, n - 1), x[0, s:n]])
    return torch.cat(out)


class FrameTest(unittest.TestCase):
    def test_round_trip(self):
        ids = np.array([1, -2, 2 ** 31 - 1], np.int32)
        f = np.array([[0.5, -1.25], [3.0, 1e-30]], np.float32)
        body = frame.encode({"policy": "current", "grad": True}, {"ids": ids, "f": f, "empty": np.zeros(0, np.float32)})
        (n,) = struct.unpack_from("<Q", body)
        self.assertEqual(n % 8, 0)
        params, t = frame.decode(body)
        self.assertEqual(params, {"policy": "current", "grad": True})
        np.testing.assert_array_equal(t["ids"], ids)
        np.testing.assert_array_equal(t["f"], f)
        self.assertEqual(t["empty"].shape, (0,))

    def test_decodes_a_hand_built_frame(self):  # the layout src/io/export-safetensors.ts writes
        h = json.dumps({"__metadata__": {"params": '{"forward_id": 7}'},
                        "grad": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                        "n": {"dtype": "I32", "shape": [1], "data_offsets": [8, 12]}}).encode()
        h += b" " * (-len(h) % 8)
        body = struct.pack("<Q", len(h)) + h + struct.pack("<ffi", 1.5, -2.0, 42)
        params, t = frame.decode(body)
        self.assertEqual(params["forward_id"], 7)
        self.assertEqual(t["grad"].tolist(), [1.5, -2.0])
        self.assertEqual(t["n"].tolist(), [42])

    def test_malformed(self):
        def build(entries, data=b"", meta=None):
            hd = dict(entries)
            if meta is not None:
                hd["__metadata__"] = meta
            h = json.dumps(hd).encode()
            return struct.pack("<Q", len(h)) + h + data

        good = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
        cases = [
            (b"\x01\x02", "no header length"),
            (struct.pack("<Q", 100) + b"{}", "runs past the end"),
            (struct.pack("<Q", 3) + b"{x}", "not JSON"),
            (struct.pack("<Q", 2) + b"[]", "not a JSON object"),
            (build({"a": dict(good, dtype="F64")}, b"\0" * 8), "tensor a: dtype"),
            (build({"a": dict(good, shape=3)}, b"\0" * 8), "tensor a: shape"),
            (build({"a": dict(good, shape=[-2])}, b"\0" * 8), "tensor a: shape"),
            (build({"a": dict(good, data_offsets=[0])}, b"\0" * 8), "tensor a: data_offsets"),
            (build({"a": dict(good, data_offsets=[0, 16])}, b"\0" * 8), "tensor a: data_offsets [0, 16] outside"),
            (build({"a": dict(good, shape=[3])}, b"\0" * 8), "tensor a: 8 bytes do not hold"),
            (build({"a": good, "b": dict(good, data_offsets=[12, 20])}, b"\0" * 20), "tensor b: data_offsets start at 12"),
            (build({"a": good, "b": good}, b"\0" * 16), "start at 0, expected 8"),
            (build({"a": good}, b"\0" * 12), "4 data bytes after"),
            (build({"a": good}, b"\0" * 8, {"params": "{nope"}), "__metadata__.params is not JSON"),
            (build({"a": good}, b"\0" * 8, {"params": 3}), "__metadata__.params is not a string"),
        ]
        for body, msg in cases:
            with self.subTest(msg=msg):
                with self.assertRaises(frame.FrameError) as cm:
                    frame.decode(body)
                self.assertIn(msg, str(cm.exception))


class OnnxWeightsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pyl-onnx-")
        self.src = os.path.join(TINY, "model.onnx")
        self.w = OnnxWeights(self.src)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_reads_the_shipped_model(self):
        with open(os.path.join(TINY, "config.json")) as f:
            cfg = json.load(f)
        self.assertEqual(len(self.w.matmul_weights), 4 * cfg["num_hidden_layers"] + 1)
        tied = self.w.matmul_weights[-1]
        # the exporter's tied logits matrix is the embedding transposed: an independent check of the offsets
        np.testing.assert_array_equal(self.w.read(tied), self.w.read("lm.embed.weight").T)
        total = sum(int(np.prod(t.dims)) for n, t in self.w.tensors.items() if n != tied)
        self.assertEqual(total, cfg["mempo"]["num_parameters"])

    def test_unchanged_write_is_byte_identical(self):
        out = os.path.join(self.tmp, "same.onnx")
        self.w.write(out, {n: self.w.read(n) for n in self.w.tensors})
        with open(self.src, "rb") as a, open(out, "rb") as b:
            self.assertEqual(a.read(), b.read())

    def test_changing_one_weight_changes_only_its_region(self):
        name = self.w.matmul_weights[1]
        t = self.w.tensors[name]
        new = self.w.read(name) + np.float32(0.25)
        out = os.path.join(self.tmp, "one.onnx")
        self.w.write(out, {name: new})
        with open(self.src, "rb") as f:
            a = f.read()
        with open(out, "rb") as f:
            b = f.read()
        self.assertEqual(len(a), len(b))
        self.assertEqual(a[:t.offset], b[:t.offset])
        self.assertEqual(a[t.offset + t.length:], b[t.offset + t.length:])
        self.assertEqual(b[t.offset:t.offset + t.length], new.astype("<f4").tobytes())
        np.testing.assert_array_equal(OnnxWeights(out).read(name), new)
        self.assertEqual([n for n in os.listdir(self.tmp)], ["one.onnx"])  # no temp file left

    def test_bad_writes_and_files(self):
        with self.assertRaisesRegex(OnnxFormatError, "shape"):
            self.w.write(os.path.join(self.tmp, "x.onnx"), {"lm.norm.weight": np.zeros(3, np.float32)})
        with self.assertRaisesRegex(OnnxFormatError, "no initializer named nope"):
            self.w.write(os.path.join(self.tmp, "x.onnx"), {"nope": np.zeros(3, np.float32)})
        cut = os.path.join(self.tmp, "cut.onnx")
        with open(self.src, "rb") as f, open(cut, "wb") as g:
            g.write(f.read()[:5_000_000])
        with self.assertRaises(OnnxFormatError):
            OnnxWeights(cut)

    def test_a_config_that_does_not_match_names_the_initializer(self):
        d = os.path.join(self.tmp, "wrong")
        shutil.copytree(TINY, d)
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        cfg["intermediate_size"] = 384
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
        with self.assertRaisesRegex(OnnxFormatError, r"initializer onnx::MatMul_\d+ is dims \[256, 1024\]"):
            TinyModel(d)


class LearnerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pyl-learner-")
        cls.model = random_model_dir(cls.tmp, 5)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def grads_of(self, ln):
        return {n: p.grad.clone() for n, p in ln.model.lm.named_parameters()}

    def test_forward_matches_the_graph_and_padding_changes_nothing(self):
        ids, lens, st = samples(1, [37, 5, 20, 2, 29], [4, 1, 19, 1, 10])
        ln = Learner(self.model)
        _, lp, tokens = ln.forward(ids, lens, st)
        self.assertEqual(tokens, int(lens.sum()))
        self.assertEqual(lp.shape, (int((lens - st).sum()),))
        with torch.no_grad():
            ref = naive_logp(ln.model.lm, ids, lens, st).numpy()
        np.testing.assert_allclose(lp, ref, rtol=0, atol=2e-5)
        self.assertGreater(float(np.std(lp)), 0.5)  # random weights: log-probs far from uniform
        ln.chunk_tokens = 40  # one sample per chunk: no padding at all
        _, lp1, _ = ln.forward(ids, lens, st)
        np.testing.assert_allclose(lp, lp1, rtol=0, atol=2e-5)

    def test_backward_is_the_gradient_of_the_surrogate_and_micro_batches_add_up(self):
        ids, lens, st = samples(2, [30, 12, 25, 8], [3, 2, 20, 1])
        g = np.random.default_rng(3).standard_normal(int((lens - st).sum())).astype(np.float32)
        whole = Learner(self.model)
        fid, _, _ = whole.forward(ids, lens, st, "current", True)
        whole.backward(fid, g)
        gw = self.grads_of(whole)
        naive = Learner(self.model)
        (naive_logp(naive.model.lm, ids, lens, st) * torch.from_numpy(g)).sum().backward()
        halves = Learner(self.model)
        halves.chunk_tokens = 30
        cut_ids, cut_g = int(lens[:2].sum()), int((lens[:2] - st[:2]).sum())
        for sl, ig, gg in ((slice(0, 2), slice(0, cut_ids), slice(0, cut_g)), (slice(2, 4), slice(cut_ids, None), slice(cut_g, None))):
            fid, _, _ = halves.forward(ids[ig], lens[sl], st[sl], "current", True)
            halves.backward(fid, g[gg])
        for n, p in naive.model.lm.named_parameters():
            with self.subTest(param=n):
                scale = float(p.grad.abs().max())
                self.assertGreater(scale, 0)
                torch.testing.assert_close(gw[n], p.grad, rtol=0, atol=1e-4 * scale)
                torch.testing.assert_close(halves.model.lm.get_parameter(n).grad, gw[n], rtol=0, atol=1e-4 * scale)

    def test_stale_forward(self):
        ids, lens, st = samples(4, [6, 9], [2, 3])
        ln = Learner(self.model)
        n = int((lens - st).sum())
        first, _, _ = ln.forward(ids, lens, st, "current", True)
        second, _, _ = ln.forward(ids, lens, st, "current", True)
        ln.forward(ids, lens, st, "current", False)  # a forward without grad keeps the pending one
        with self.assertRaises(LearnerError) as cm:
            ln.backward(first, np.ones(n, np.float32))
        self.assertEqual((cm.exception.code, cm.exception.status), ("stale_forward", 409))
        with self.assertRaisesRegex(LearnerError, r"grad must be F32 \[10\]"):
            ln.backward(second, np.ones(n + 1, np.float32))
        ln.backward(second, np.ones(n, np.float32))
        with self.assertRaisesRegex(LearnerError, "none pending"):
            ln.backward(second, np.ones(n, np.float32))
        third, _, _ = ln.forward(ids, lens, st, "current", True)
        ln.optim_step(ADAM)
        with self.assertRaises(LearnerError):  # the step replaced the weights its graph holds
            ln.backward(third, np.ones(n, np.float32))

    def test_bad_requests_name_the_field(self):
        ln = Learner(self.model)
        ids, lens, st = samples(4, [6, 9], [2, 3])
        cases = [
            ((ids, lens, np.array([0, 3], np.int32)), "sample 0: target_start 0"),
            ((ids, lens, np.array([2, 9], np.int32)), "sample 1: target_start 9"),
            ((ids[:-1], lens, st), "lengths sum to 15, ids holds 14"),
            ((np.where(np.arange(15) == 4, 5000, ids).astype(np.int32), lens, st), r"ids\[4\] = 5000"),
            ((ids.astype(np.float32), lens, st), "ids must be I32"),
            ((None, lens, st), "no tensor ids"),
        ]
        for args, msg in cases:
            with self.subTest(msg=msg), self.assertRaisesRegex(LearnerError, msg):
                ln.forward(*args)
        with self.assertRaisesRegex(LearnerError, "policy must be"):
            ln.forward(ids, lens, st, "other")
        with self.assertRaisesRegex(LearnerError, "reference is frozen"):
            ln.forward(ids, lens, st, "reference", True)
        for k, v in (("lr", "x"), ("eps", 0), ("betas", [0.9]), ("max_grad_norm", -1), ("weight_decay", math.nan)):
            with self.subTest(key=k), self.assertRaisesRegex(LearnerError, k.replace("[", r"\[")):
                ln.optim_step(dict(ADAM, **{k: v}))
        with self.assertRaisesRegex(LearnerError, "lr"):
            ln.optim_step({k: v for k, v in ADAM.items() if k != "lr"})

    def test_optim_step_is_clipped_adamw(self):
        ids, lens, st = samples(6, [20, 14], [2, 5])
        g = np.random.default_rng(7).standard_normal(int((lens - st).sum())).astype(np.float32)
        ln = Learner(self.model)
        before = {n: p.detach().clone() for n, p in ln.model.lm.named_parameters()}
        fid, lp0, _ = ln.forward(ids, lens, st, "current", True)
        ln.backward(fid, g)
        raw = self.grads_of(ln)
        norm = math.sqrt(sum(float((v.double() ** 2).sum()) for v in raw.values()))
        self.assertGreater(norm, ADAM["max_grad_norm"])  # so that clipping acts
        got = ln.optim_step(ADAM)
        self.assertAlmostEqual(got, norm, delta=1e-4 * norm)
        self.assertEqual(ln.step, 1)
        lr, wd, c = ADAM["lr"], ADAM["weight_decay"], ADAM["max_grad_norm"] / (norm + 1e-6)
        for n, p in ln.model.lm.named_parameters():  # first Adam step: m̂ = g, v̂ = g²
            gc = raw[n].double() * c
            want = before[n].double() * (1 - lr * wd) - lr * gc / (gc.abs() + ADAM["eps"])
            with self.subTest(param=n):
                torch.testing.assert_close(p.detach().double(), want, rtol=0, atol=1e-6)
                self.assertIsNone(p.grad)
        _, lp1, _ = ln.forward(ids, lens, st)
        self.assertGreater(float(np.abs(lp1 - lp0).max()), 1e-3)
        _, ref, _ = ln.forward(ids, lens, st, "reference")
        np.testing.assert_array_equal(ref, lp0)  # the reference is the starting weights
        out = ln.save_weights(os.path.join(self.tmp, "after-one-step"))
        _, again, _ = Learner(out).forward(ids, lens, st)
        np.testing.assert_array_equal(again, lp1)
        self.assertFalse([n for n in os.listdir(self.tmp) if ".tmp-" in n])
        with open(os.path.join(out, "manifest.json")) as f:
            self.assertEqual(json.load(f)["files"]["model.onnx"]["bytes"], os.path.getsize(os.path.join(out, "model.onnx")))

    def run_step(self, ln, seed):
        ids, lens, st = samples(seed, [18, 11, 23], [3, 1, 9])
        g = np.random.default_rng(seed).standard_normal(int((lens - st).sum())).astype(np.float32)
        fid, _, _ = ln.forward(ids, lens, st, "current", True)
        ln.backward(fid, g)
        return ln.optim_step(dict(ADAM, max_grad_norm=0))

    def test_checkpoint_resume_is_the_uninterrupted_run(self):
        straight = Learner(self.model, seed=3)
        self.run_step(straight, 10)
        n2 = self.run_step(straight, 11)
        n3 = self.run_step(straight, 12)
        first = Learner(self.model, seed=3)
        self.run_step(first, 10)
        os.makedirs(os.path.join(self.tmp, "ck"), exist_ok=True)  # the learner does not create parents
        ck = first.save_checkpoint(os.path.join(self.tmp, "ck", "step-1"))
        self.assertTrue(os.path.isfile(os.path.join(ck, "learner.safetensors")))
        resumed = Learner(ck, seed=99)  # as `--model checkpoint --resume` would start it
        resumed.load_checkpoint(ck)
        self.assertEqual((resumed.step, resumed.seed, resumed.reference_dir), (1, 3, os.path.abspath(self.model)))
        self.assertEqual(self.run_step(resumed, 11), n2)
        self.assertEqual(self.run_step(resumed, 12), n3)
        for (n, a), b in zip(straight.model.lm.named_parameters(), resumed.model.lm.parameters()):
            with self.subTest(param=n):
                self.assertTrue(torch.equal(a, b))
        ids, lens, st = samples(1, [9], [2])
        np.testing.assert_array_equal(resumed.forward(ids, lens, st, "reference")[1],
                                      Learner(self.model).forward(ids, lens, st)[1])
        with self.assertRaisesRegex(LearnerError, "not a checkpoint directory"):
            resumed.load_checkpoint(self.model)


def spawn(*extra, env=None):
    e = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "learner"), **(env or {}))
    return subprocess.Popen([sys.executable, "-m", "mempo_learner", "--model", TINY, "--port", "0", "--threads", "2", *extra],
                            cwd=ROOT, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class Client:
    def __init__(self, url, token=None):
        host, port = url.rsplit("/", 1)[1].rsplit(":", 1)
        self.conn = http.client.HTTPConnection(host, int(port), timeout=120)
        self.token = token

    def close(self):
        self.conn.close()

    def raw(self, method, path, body=None, ctype="application/json", headers=None):
        h = dict(headers or {})
        if body is not None:
            h["Content-Type"] = ctype
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        self.conn.request(method, path, body=body, headers=h)
        r = self.conn.getresponse()
        data = r.read()
        if r.getheader("Connection", "").lower() == "close":
            self.conn.close()
        return r.status, r.getheader("Content-Type"), data

    def json(self, method, path, obj=None):
        status, ctype, data = self.raw(method, path, None if obj is None else json.dumps(obj).encode())
        return status, json.loads(data)

    def frame(self, path, params, tensors):
        status, ctype, data = self.raw("POST", path, frame.encode(params, tensors), frame.CONTENT_TYPE)
        return status, (frame.decode(data) if ctype == frame.CONTENT_TYPE else json.loads(data))


class ServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pyl-server-")
        cls.proc = spawn()
        line = cls.proc.stdout.readline()
        ev = json.loads(line)
        assert ev["event"] == "listening" and ev["url"].startswith("http://127.0.0.1:"), line
        cls.url = ev["url"]

    @classmethod
    def tearDownClass(cls):
        if cls.proc.poll() is None:
            cls.proc.kill()
        cls.proc.wait()
        cls.proc.stdout.close()
        cls.proc.stderr.close()
        shutil.rmtree(cls.tmp)

    def error(self, got, status, code):
        self.assertEqual(got[0], status, got)
        self.assertEqual(got[1]["error"]["code"], code, got)
        self.assertTrue(got[1]["error"]["message"])

    def test_2_every_endpoint_then_shutdown(self):
        c = Client(self.url)
        self.addCleanup(c.close)
        st, info = c.json("GET", "/info")
        self.assertEqual((st, info["protocol"], info["parameters"], info["step"], info["device"]), (200, 1, 3410176, 0, "cpu"))
        ids, lens, starts = samples(8, [15, 40, 7], [2, 30, 6])
        want = Learner(TINY).forward(ids, lens, starts)[1]
        t = {"ids": ids, "lengths": lens, "target_start": starts}
        st, (params, out) = c.frame("/forward", {"policy": "current", "grad": True}, t)
        self.assertEqual(st, 200)
        np.testing.assert_allclose(out["logp"], want, rtol=0, atol=1e-5)
        self.assertEqual(params["tokens"], 62)
        fid = params["forward_id"]
        self.error(c.frame("/backward", {"forward_id": fid + 5}, {"grad": np.ones(24, np.float32)}), 409, "stale_forward")
        st, _, data = c.raw("POST", "/forward", b"\x05", frame.CONTENT_TYPE)
        self.error((st, json.loads(data)), 400, "bad_request")
        self.error(c.frame("/backward", {"forward_id": fid}, {"grad": np.ones(18, np.float32)}), 400, "bad_request")
        st, b = c.frame("/backward", {"forward_id": fid}, {"grad": np.full(24, 0.5, np.float32)})
        self.assertEqual((st, b.get("tokens")), (200, 62), b)
        self.error(c.frame("/backward", {"forward_id": fid}, {"grad": np.ones(24, np.float32)}), 409, "stale_forward")
        st, o = c.json("POST", "/optim_step", ADAM)
        self.assertEqual((st, o["step"]), (200, 1))
        self.assertGreater(o["grad_norm"], 0)
        st, (_, ref) = c.frame("/forward", {"policy": "reference", "grad": False}, t)
        np.testing.assert_allclose(ref["logp"], want, rtol=0, atol=1e-5)
        st, (_, cur) = c.frame("/forward", {"policy": "current", "grad": False}, t)
        self.assertGreater(float(np.abs(cur["logp"] - want).max()), 1e-4)
        wdir = os.path.join(self.tmp, "w")
        st, s = c.json("POST", "/save_weights", {"dir": wdir})
        self.assertEqual((st, s["dir"]), (200, wdir))
        np.testing.assert_allclose(Learner(wdir).forward(ids, lens, starts)[1], cur["logp"], rtol=0, atol=1e-5)
        ck = os.path.join(self.tmp, "ck")
        self.assertEqual(c.json("POST", "/save_checkpoint", {"dir": ck})[1]["step"], 1)
        c.json("POST", "/optim_step", ADAM)
        self.assertEqual(c.json("GET", "/info")[1]["step"], 2)
        self.assertEqual(c.json("POST", "/load_checkpoint", {"dir": ck})[1]["step"], 1)
        st, (_, back) = c.frame("/forward", {"policy": "current", "grad": False}, t)
        np.testing.assert_array_equal(back["logp"], cur["logp"])
        self.assertEqual(sorted(os.listdir(self.tmp)), ["ck", "w"])
        self.assertEqual(c.json("POST", "/shutdown"), (200, {"ok": True}))
        self.assertEqual(self.proc.wait(timeout=30), 0)

    def test_1_errors_keep_it_up(self):
        c = Client(self.url)
        self.addCleanup(c.close)
        bad_frames = [b"", b"\xff" * 9, frame.encode({}, {"ids": np.zeros(3, np.int32)})]
        for body in bad_frames:
            st, ctype, data = c.raw("POST", "/forward", body, frame.CONTENT_TYPE)
            self.assertEqual((st, ctype), (400, "application/json"))
            self.assertEqual(json.loads(data)["error"]["code"], "bad_request")
        self.error(c.json("POST", "/forward", {"ids": [1, 2]}), 400, "bad_request")
        self.error(c.json("POST", "/nope", {}), 404, "not_found")
        self.error(c.json("GET", "/forward"), 405, "not_found")
        st, _, data = c.raw("POST", "/optim_step", b"{not json")
        self.assertEqual((st, json.loads(data)["error"]["code"]), (400, "bad_request"))
        self.error(c.json("POST", "/optim_step", dict(ADAM, lr=None)), 400, "bad_request")
        self.error(c.json("POST", "/load_checkpoint", {"dir": os.path.join(self.tmp, "none")}), 400, "bad_request")
        self.error(c.json("POST", "/save_weights", {"dir": 3}), 400, "bad_request")
        st, _, data = c.raw("POST", "/forward", None, headers={"Content-Length": str((1 << 30) + 1)})
        self.assertEqual((st, json.loads(data)["error"]["code"]), (413, "bad_request"))
        self.assertEqual(c.json("GET", "/info")[0], 200)


class CliTest(unittest.TestCase):
    def test_token(self):
        p = spawn("--host", "127.0.0.1", env={"MEMPO_LEARNER_TOKEN": "s3cret"})
        try:
            url = json.loads(p.stdout.readline())["url"]
            clients = [Client(url), Client(url, "wrong"), Client(url, "s3cret")]
            for c in clients:
                self.addCleanup(c.close)
            st, _, data = clients[0].raw("GET", "/info")
            self.assertEqual((st, json.loads(data)["error"]["code"]), (401, "unauthorized"))
            self.assertEqual(clients[1].raw("GET", "/info")[0], 401)
            self.assertEqual(clients[2].json("GET", "/info")[0], 200)
            self.assertEqual(clients[2].json("POST", "/shutdown")[0], 200)
            self.assertEqual(p.wait(timeout=30), 0)
        finally:
            if p.poll() is None:
                p.kill()
            p.communicate()

    def test_sigterm_exits_cleanly(self):
        p = spawn()
        try:
            self.assertIn('"listening"', p.stdout.readline())
            p.send_signal(15)
            self.assertEqual(p.wait(timeout=30), 0)
        finally:
            if p.poll() is None:
                p.kill()
            p.communicate()

    def test_refuses_to_start(self):
        cases = [(["--host", "0.0.0.0"], 2, "not a loopback address: give --token"),
                 (["--model", os.path.join(ROOT, "nope")], 1, "not a directory"),
                 (["--dtype", "bf16", "--device", "cpu"], 2, "bf16 needs a CUDA device")]
        for args, code, msg in cases:
            with self.subTest(args=args):
                env = {k: v for k, v in os.environ.items() if k != "MEMPO_LEARNER_TOKEN"}
                r = subprocess.run([sys.executable, "-m", "mempo_learner", "--model", TINY, *args], cwd=ROOT, text=True,
                                   env=dict(env, PYTHONPATH=os.path.join(ROOT, "learner")), capture_output=True, timeout=60)
                self.assertEqual(r.returncode, code, r.stderr)
                self.assertIn(msg, r.stderr)
                self.assertEqual(r.stdout, "")


if __name__ == "__main__":
    unittest.main()
