"""The learner on Hugging Face weights (learner/mempo_learner/hf.py, docs/learner.md "Hugging Face
models"), on each architecture of the test zoo (test/python/zoo.py: Qwen3, Llama 3, Qwen2.5, tiny
random weights built by transformers, real vocabularies):

    PYTHONPATH=learner python3 -m unittest test/python/test_learner_hf.py

The references are transformers' own: its logits on each sample alone (no padding), a plain torch
loss on them with clipping and AdamW written out here, AutoModelForCausalLM.from_pretrained of the
saved directory. The model tests need torch >= 2.2 and transformers (requirements.txt) and skip
under Debian's torch 1.13; the refusals are checked before transformers is imported and run under both."""
import json
import math
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from unittest import mock

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "learner"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from mempo_learner import hf  # noqa: E402
from mempo_learner.learner import Learner, LearnerError  # noqa: E402
from test_learner import ADAM, Client  # noqa: E402
import zoo  # noqa: E402

try:
    import transformers  # noqa: F401
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
    HAVE_HF = hf._version(torch.__version__) >= hf.MIN_TORCH
except ImportError:
    HAVE_HF = False
NEEDS_HF = unittest.skipUnless(HAVE_HF, "needs torch >= 2.2 and transformers (requirements.txt)")
torch.set_num_threads(1)
TIMES = {}  # per architecture and test: seconds, printed at the end (the brief asks for them)


def samples(seed, vocab, lens, starts):
    rng = np.random.default_rng(seed)
    lens = np.array(lens, np.int32)
    return rng.integers(0, vocab, int(lens.sum())).astype(np.int32), lens, np.array(starts, np.int32)


def hf_logp(m, ids, lens, starts):
    """log_softmax of transformers' own logits (the whole forward, one sample at a time, no
    padding, no mask) at each sample's targets."""
    out, at = [], 0
    for n, s in zip(lens.tolist(), starts.tolist()):
        x = torch.from_numpy(ids[at:at + n].astype(np.int64)).unsqueeze(0)
        at += n
        lp = torch.log_softmax(m(input_ids=x).logits[0].float(), dim=-1)
        out.append(lp[torch.arange(s - 1, n - 1), x[0, s:n]])
    return torch.cat(out)


def load_hf(d):
    m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32)
    return m.eval()


def batch(seed, vocab):
    """One micro-batch of different lengths (padded in one chunk by the learner) and its grad."""
    ids, lens, st = samples(seed, vocab, [23, 6, 15, 2], [3, 1, 14, 1])
    g = np.random.default_rng(seed + 1000).standard_normal(int((lens - st).sum())).astype(np.float32)
    return ids, lens, st, g


def learner_step(ln, seed, adam=ADAM):
    ids, lens, st, g = batch(seed, ln.model.vocab_size)
    fid, _, _ = ln.forward(ids, lens, st, "current", True)
    ln.backward(fid, g)
    return ln.optim_step(adam)


def plain_grads(m, weights, seed):
    """The gradient of the plain loss sum(g * logp) on unpadded samples (hf_logp), at `weights`."""
    named = [(n, p) for n, p in m.named_parameters() if p.requires_grad]
    with torch.no_grad():
        for n, p in named:
            p.copy_(weights[n])
    m.zero_grad(set_to_none=True)
    ids, lens, st, g = batch(seed, m.config.vocab_size)
    (hf_logp(m, ids, lens, st) * torch.from_numpy(g)).sum().backward()
    return {n: p.grad.detach().clone() for n, p in named}


class AdamW:
    """torch.nn.utils.clip_grad_norm_ then AdamW (decoupled weight decay, bias corrections), written
    out in float64."""

    def __init__(self, adam):
        self.lr, self.wd, self.clip, (self.b1, self.b2), self.eps = (
            adam[k] for k in ("lr", "weight_decay", "max_grad_norm", "betas", "eps"))
        self.m, self.v, self.t = {}, {}, 0

    def step(self, weights, grads):
        """(new weights, the gradient norm before clipping)."""
        self.t += 1
        norm = math.sqrt(sum(float((g.double() ** 2).sum()) for g in grads.values()))
        c = min(1.0, self.clip / (norm + 1e-6)) if self.clip > 0 else 1.0
        out = {}
        for n, w in weights.items():
            g = grads[n].double() * c
            self.m[n] = self.b1 * self.m.get(n, 0.0) + (1 - self.b1) * g
            self.v[n] = self.b2 * self.v.get(n, 0.0) + (1 - self.b2) * g * g
            mhat, vhat = self.m[n] / (1 - self.b1 ** self.t), self.v[n] / (1 - self.b2 ** self.t)
            out[n] = w.double() * (1 - self.lr * self.wd) - self.lr * mhat / (vhat.sqrt() + self.eps)
        return out, norm


class ArchTests:
    """Deliverables a-e of issue 44 item 2 on one architecture (ARCH, a zoo name)."""
    ARCH = ""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix=f"pyl-hf-{cls.ARCH}-")
        t0 = time.perf_counter()
        cls.model = zoo.build(cls.ARCH, os.path.join(cls.tmp, cls.ARCH))
        TIMES[(cls.ARCH, "zoo build")] = time.perf_counter() - t0
        with open(os.path.join(cls.model, "config.json")) as f:
            cls.config = json.load(f)
        cls.vocab = cls.config["vocab_size"]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def setUp(self):
        self.t0 = time.perf_counter()

    def tearDown(self):
        TIMES[(self.ARCH, self._testMethodName)] = time.perf_counter() - self.t0

    def test_a_forward_is_log_softmax_of_transformers_logits(self):
        ids, lens, st = samples(1, self.vocab, [37, 5, 20, 2, 29], [4, 1, 19, 1, 10])
        ln = Learner(self.model)
        self.assertEqual(ln.model.kind.split()[1], {"qwen3": "Qwen3ForCausalLM", "llama3": "LlamaForCausalLM",
                                                    "qwen2.5": "Qwen2ForCausalLM"}[self.ARCH])
        with torch.no_grad():
            want = hf_logp(load_hf(self.model), ids, lens, st).numpy()
        self.assertGreater(float(np.std(want)), 0.5)  # far from uniform: a wrong row or target shows
        _, lp, tokens = ln.forward(ids, lens, st)  # one chunk: every sample right-padded to 37
        self.assertEqual((tokens, lp.shape), (int(lens.sum()), want.shape))
        np.testing.assert_allclose(lp, want, rtol=0, atol=2e-5)
        ln.chunk_tokens = 40  # other paddings: one or two samples per chunk
        np.testing.assert_allclose(ln.forward(ids, lens, st)[1], want, rtol=0, atol=2e-5)
        np.testing.assert_allclose(ln.forward(ids, lens, st, "reference")[1], want, rtol=0, atol=2e-5)
        with self.assertRaisesRegex(LearnerError, rf"ids\[3\] = {self.vocab} is not a token id"):
            ln.forward(np.where(np.arange(ids.size) == 3, self.vocab, ids).astype(np.int32), lens, st)

    def test_b_backward_is_the_plain_loss_gradient_and_optim_step_is_clipped_adamw(self):
        adam = dict(ADAM, lr=1e-3, weight_decay=0.1, max_grad_norm=1.0)
        ln = Learner(self.model)
        plain, ref = load_hf(self.model), AdamW(adam)
        start = {n: p.detach().clone() for n, p in ln.model.lm.named_parameters()}
        for seed in (11, 12):
            before = {n: p.detach().clone() for n, p in ln.model.lm.named_parameters()}
            ids, lens, st, g = batch(seed, self.vocab)
            fid, _, _ = ln.forward(ids, lens, st, "current", True)  # padded batch, attention mask
            ln.backward(fid, g)
            got = {n: p.grad.detach().clone() for n, p in ln.model.lm.named_parameters()}
            want = plain_grads(plain, before, seed)
            for n in want:
                with self.subTest(step=seed, grad=n):
                    scale = float(want[n].abs().max())
                    self.assertGreater(scale, 0)
                    torch.testing.assert_close(got[n], want[n], rtol=0, atol=2e-5 * scale)
            # the step on the learner's own gradient: clipping and AdamW, to float32 rounding
            after, norm = ref.step(before, got)
            self.assertGreater(norm, adam["max_grad_norm"])  # clipping acts
            self.assertAlmostEqual(ln.optim_step(adam), norm, delta=1e-5 * norm)
            for n, p in ln.model.lm.named_parameters():
                with self.subTest(step=seed, param=n):
                    self.assertLessEqual(float((p.detach().double() - after[n]).abs().max()), 1e-6)
                    self.assertIsNone(p.grad)
        moved = max(float((p.detach() - start[n]).abs().max()) for n, p in ln.model.lm.named_parameters())
        self.assertGreater(moved, adam["lr"])  # two steps of ~lr each: the comparisons mean something

    def test_c_save_weights_is_a_directory_transformers_loads_with_the_learners_logits(self):
        ln = Learner(self.model)
        learner_step(ln, 21)
        ids, lens, st = samples(2, self.vocab, [19, 4, 11], [2, 1, 5])
        lp = ln.forward(ids, lens, st)[1]
        out = ln.save_weights(os.path.join(self.tmp, "saved"))
        names = set(os.listdir(out))
        self.assertLessEqual({"model.safetensors", "config.json", "generation_config.json", "tokenizer.json",
                              "tokenizer_config.json", "manifest.json"}, names)
        self.assertFalse([n for n in names if n.endswith(hf.PICKLE_SUFFIXES)])
        m = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32, use_safetensors=True)
        with torch.no_grad():
            got = hf_logp(m.eval(), ids, lens, st).numpy()
        np.testing.assert_allclose(got, lp, rtol=0, atol=2e-5)
        with torch.no_grad():
            start = hf_logp(load_hf(self.model), ids, lens, st).numpy()
        self.assertGreater(float(np.abs(got - start).max()), 1e-3)  # the trained weights, not the source's
        self.assertEqual(m.config.tie_word_embeddings, self.config["tie_word_embeddings"])
        self.assertEqual(m.config.model_type, self.config["model_type"])
        gen = GenerationConfig.from_pretrained(out)
        self.assertEqual((gen.eos_token_id, gen.bos_token_id), (self.config["eos_token_id"], self.config["bos_token_id"]))
        text = "Hello, MemPO: 1 + 1 = 2"
        self.assertEqual(AutoTokenizer.from_pretrained(out)(text)["input_ids"],
                         AutoTokenizer.from_pretrained(self.model)(text)["input_ids"])
        np.testing.assert_array_equal(Learner(out).forward(ids, lens, st)[1], lp)

    def test_d_checkpoint_resume_equals_the_uninterrupted_run(self):
        straight = Learner(self.model, seed=3)
        norms = [learner_step(straight, s) for s in (31, 32, 33)]
        first = Learner(self.model, seed=3)
        for s in (31, 32):
            learner_step(first, s)
        ck = first.save_checkpoint(os.path.join(self.tmp, "ck-2"))
        self.assertLessEqual({"model.safetensors", "learner.json", "learner.safetensors"}, set(os.listdir(ck)))
        resumed = Learner(ck, seed=99)  # as `--model CHECKPOINT --resume` starts it
        resumed.load_checkpoint(ck)
        self.assertEqual((resumed.step, resumed.seed, resumed.reference_dir), (2, 3, os.path.abspath(self.model)))
        self.assertAlmostEqual(learner_step(resumed, 33), norms[2], delta=1e-6 * norms[2])
        self.assertEqual(resumed.step, 3)
        a_state, b_state = straight.opt.state_dict()["state"], resumed.opt.state_dict()["state"]
        self.assertEqual(len(a_state), len(straight.params))  # every parameter has AdamW state
        for i, ((n, a), b) in enumerate(zip(straight.model.lm.named_parameters(), resumed.model.lm.parameters())):
            with self.subTest(param=n):
                self.assertLessEqual(float((a.detach() - b.detach()).abs().max()), 1e-6)
                for k in ("exp_avg", "exp_avg_sq"):
                    self.assertLessEqual(float((a_state[i][k] - b_state[i][k]).abs().max()), 1e-6)
                self.assertEqual(float(a_state[i]["step"]), float(b_state[i]["step"]))
        ids, lens, st = samples(3, self.vocab, [9, 14], [2, 7])
        np.testing.assert_array_equal(resumed.forward(ids, lens, st, "reference")[1],
                                      Learner(self.model).forward(ids, lens, st)[1])

    def test_e_two_processes_equal_one(self):
        procs = [Proc(self.tmp, f"p{k}", self.model, *args)
                 for k, args in enumerate((["--nproc", "2", "--collective-timeout", "120"], []))]
        clients = []
        for p in procs:
            self.addCleanup(p.close)
            clients.append(Client(p.url()))
            self.addCleanup(clients[-1].close)
        c2, c1 = clients
        self.assertEqual([c.json("GET", "/info")[1]["processes"] for c in (c1, c2)], [1, 2])
        ids, lens, st = samples(8, self.vocab, [15, 40, 7, 22, 31], [2, 30, 6, 3, 9])
        t = {"ids": ids, "lengths": lens, "target_start": st}
        got = [c.frame("/forward", {"policy": "current", "grad": False}, t)[1][1]["logp"] for c in (c1, c2)]
        self.assertLessEqual(float(np.abs(got[1] - got[0]).max()), 1e-6)
        for seed in (41, 42):
            norms = []
            for c in (c1, c2):
                for k in range(2):  # two micro-batches, dealt round the ranks differently
                    ids, lens, st, g = batch(seed * 10 + k, self.vocab)
                    s, (fp, _) = c.frame("/forward", {"policy": "current", "grad": True},
                                         {"ids": ids, "lengths": lens, "target_start": st})
                    self.assertEqual(s, 200, fp)
                    self.assertEqual(c.frame("/backward", {"forward_id": fp["forward_id"]}, {"grad": g})[0], 200)
                s, o = c.json("POST", "/optim_step", ADAM)
                self.assertEqual(s, 200, o)
                norms.append(o["grad_norm"])
            self.assertGreater(norms[0], ADAM["max_grad_norm"])
            self.assertLessEqual(abs(norms[0] - norms[1]), 1e-5 * norms[0])
        dirs = [os.path.join(self.tmp, f"dist-{k}") for k in (1, 2)]
        for c, d in zip((c1, c2), dirs):
            self.assertEqual(c.json("POST", "/save_weights", {"dir": d})[0], 200)
        a, b = (dict(load_hf(d).named_parameters()) for d in dirs)
        start = dict(load_hf(self.model).named_parameters())
        # In units of Adam's step (lr): float32 sums taken in another order (the all-reduce) move
        # m/sqrt(v) of a weight whose gradient is near 0 by up to a quarter step (1-3 elements of
        # ~10 M here), and the others by ~1e-5 step on average; a lost rank, an average instead of
        # a sum or a parameter left out of the all-reduce moves most of its weights by a large part
        # of a step (and the gradient norms, compared to 1e-5 above).
        lr, total, count = ADAM["lr"], 0.0, 0
        with torch.no_grad():
            for n in a:
                d = (a[n] - b[n]).abs()
                total, count = total + float(d.double().sum()), count + d.numel()
                with self.subTest(param=n):
                    self.assertLessEqual(int((d > 1e-2 * lr).sum()), max(3, 1e-3 * d.numel()))
        self.assertLessEqual(total / count, 1e-4 * lr)
        self.assertGreater(max(float((a[n] - start[n]).abs().max()) for n in a), ADAM["lr"])


class Proc:
    """A learner process on model_dir: the URL from its first stdout line, stderr in a file."""

    def __init__(self, tmp, name, model_dir, *args):
        self.err_path = os.path.join(tmp, f"{name}.err")
        self.err = open(self.err_path, "w")
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "learner"))
        self.p = subprocess.Popen([sys.executable, "-m", "mempo_learner", "--model", model_dir, "--port", "0",
                                   "--threads", "1", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                  stderr=self.err, text=True)

    def url(self):
        line = self.p.stdout.readline()
        assert '"listening"' in line, (line, open(self.err_path).read())
        return json.loads(line)["url"]

    def close(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        self.p.stdout.close()
        self.err.close()


@NEEDS_HF
class Qwen3Test(ArchTests, unittest.TestCase):
    ARCH = "qwen3"


@NEEDS_HF
class Llama3Test(ArchTests, unittest.TestCase):
    ARCH = "llama3"


@NEEDS_HF
class Qwen25Test(ArchTests, unittest.TestCase):
    ARCH = "qwen2.5"


class Marker:
    """Unpickling this creates a file: proof that a refused pickle was never loaded."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


class RefusalTest(unittest.TestCase):
    """Refused before transformers reads anything (so under torch 1.13 too), naming file and field;
    nothing in the directory is changed or executed."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pyl-hf-refuse-")
        self.addCleanup(shutil.rmtree, self.tmp)

    def model_dir(self, config, files):
        d = tempfile.mkdtemp(dir=self.tmp)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(config, f)
        for name, data in files.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)
        return d

    def refused(self, d, pattern):
        before = {n: os.path.getsize(os.path.join(d, n)) for n in os.listdir(d)}
        with self.assertRaisesRegex(ValueError, pattern):
            Learner(d)
        self.assertEqual({n: os.path.getsize(os.path.join(d, n)) for n in os.listdir(d)}, before)

    def test_a_pickle_is_refused_and_not_executed(self):
        marker = os.path.join(self.tmp, "unpickled")
        d = self.model_dir({"model_type": "qwen3", "vocab_size": 151936}, {"pytorch_model.bin": pickle.dumps(Marker(marker))})
        self.refused(d, rf"{d}/pytorch_model.bin is a pickle, which the learner does not load")
        self.assertFalse(os.path.exists(marker))
        # the same through the CLI: exit status 1, the reason on stderr
        r = subprocess.run([sys.executable, "-m", "mempo_learner", "--model", d, "--port", "0"], cwd=ROOT, text=True,
                           env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "learner")), capture_output=True, timeout=120)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("pytorch_model.bin is a pickle", r.stderr)
        self.assertFalse(os.path.exists(marker))

    def test_an_unsupported_or_missing_model_type_is_named(self):
        for mt in ("gpt2", None):
            cfg = {"vocab_size": 100} if mt is None else {"model_type": mt, "vocab_size": 100}
            d = self.model_dir(cfg, {"model.safetensors": b""})
            with self.subTest(model_type=mt):
                self.refused(d, rf"{d}/config.json: model_type {mt!r} is not one the learner supports "
                                r"\(qwen3 \(Qwen3\), llama \(Llama 3\), qwen2 \(Qwen2.5\)\)")

    def test_a_tokenizer_larger_than_the_config_vocabulary_is_named(self):
        with open(os.path.join(zoo.TOKENIZERS["qwen3"], "tokenizer.json"), "rb") as f:
            tok = f.read()
        d = self.model_dir({"model_type": "qwen2", "vocab_size": 128256}, {"model.safetensors": b"", "tokenizer.json": tok})
        self.refused(d, rf"{d}/tokenizer.json has token ids up to 15\d{{4}}, but {d}/config.json vocab_size is 128256")

    def test_bad_config_fields(self):
        cases = [({"model_type": "llama", "vocab_size": "many"}, "vocab_size must be a positive integer, found 'many'"),
                 ({"model_type": "llama"}, "vocab_size must be a positive integer, found None")]
        for cfg, msg in cases:
            d = self.model_dir(cfg, {"model.safetensors": b""})
            with self.subTest(msg=msg):
                self.refused(d, rf"{d}/config.json: {msg}")
        d = self.model_dir({}, {"model.safetensors": b""})
        with open(os.path.join(d, "config.json"), "w") as f:
            f.write("{not json")
        self.refused(d, rf"{d}/config.json: not JSON")
        d = self.model_dir({"model_type": "qwen3", "vocab_size": 10}, {"tf_model.h5": b""})
        self.refused(d, rf"{d}: no model.safetensors")

    def test_an_old_torch_is_named_before_transformers_is_imported(self):
        d = self.model_dir({"model_type": "qwen3", "vocab_size": 10}, {"model.safetensors": b""})
        with mock.patch.object(hf.torch, "__version__", "1.13.1"):
            self.refused(d, r"need torch >= 2.2 and transformers; this Python has torch 1.13.1")


def tearDownModule():
    if TIMES:
        print("\nper-architecture times (s):", file=sys.stderr)
        for (arch, what), s in sorted(TIMES.items()):
            print(f"  {arch:8s} {what:80s} {s:6.1f}", file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
