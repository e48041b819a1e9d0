"""The learner's checkpoints and saved directories (docs/learner.md, "Checkpoints" and "Saved
directories"), attacked: a pickle that would run a command, hostile state files, directories
that are not the learner's, a full disk (issue 30, items 1, 2 and 12).

    PYTHONPATH=learner /usr/bin/python3 -m unittest discover -s test/python -p 'test_learner_checkpoint.py'
"""
import errno
import hashlib
import json
import math
import os
import pickle
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch

from test_learner import ADAM, ROOT, TINY, Client, random_model_dir, samples, spawn

from mempo_learner.learner import Learner, LearnerError  # noqa: E402 (test_learner put learner/ on the path)
from mempo_learner.onnx_weights import OnnxWeights  # noqa: E402


class Evil:
    """Unpickling it runs `touch PATH` (what a hostile learner.pt does)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def evil_pickle(file: str, marker: str, as_torch: bool = True) -> None:
    if as_torch:  # a real torch checkpoint file (zip with data.pkl), as learner.pt was
        torch.save({"format": 1, "step": 7, "optimizer": Evil(marker)}, file)
    else:
        with open(file, "wb") as f:
            pickle.dump(Evil(marker), f)
    # the payload is real: unpickling it does create the file (checked, then removed). From a file
    # object with weights_only=False: torch >= 2.6 refuses the pickle by default, and torch 2.13
    # hands a path ending in .safetensors to safetensors instead of unpickling it
    with open(file, "rb") as f:
        if as_torch:
            torch.load(f, weights_only=False)
        else:
            pickle.load(f)
    assert os.path.exists(marker), "the crafted pickle does not run its payload"
    os.remove(marker)


def snapshot(path: str):
    """Everything at path, for byte-identical comparisons: type, mode, bytes or link target."""
    out = {}
    if not os.path.lexists(path):
        return None
    for base, dirs, files in os.walk(path) if os.path.isdir(path) and not os.path.islink(path) else [(None, [], [])]:
        for n in ([path] if base is None else [os.path.join(base, x) for x in dirs + files]):
            st = os.lstat(n)
            rel = os.path.relpath(n, path)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(n))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", st.st_mode)
            else:
                with open(n, "rb") as f:
                    out[rel] = ("file", st.st_mode, f.read())
    return out


def st_read(path):
    """An independent safetensors reader: (header dict, data bytearray)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack_from("<Q", raw)
    return json.loads(raw[8:8 + n]), bytearray(raw[8 + n:])


def st_write(path, header, data):
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + bytes(data))


def run_step(ln, seed):
    ids, lens, st = samples(seed, [18, 11, 23], [3, 1, 9])
    g = np.random.default_rng(seed).standard_normal(int((lens - st).sum())).astype(np.float32)
    fid, _, _ = ln.forward(ids, lens, st, "current", True)
    ln.backward(fid, g)
    return ln.optim_step(dict(ADAM, max_grad_norm=0))


class CheckpointTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="pyl-ck-")
        cls.model = random_model_dir(cls.tmp, 6)
        cls.ln = Learner(cls.model, seed=3)
        run_step(cls.ln, 10)
        cls.rng_at_save = torch.get_rng_state().clone()
        cls.ck = cls.ln.save_checkpoint(os.path.join(cls.tmp, "ck"))
        cls.target = Learner(cls.model, seed=4)  # what the hostile checkpoints are offered to
        cls.names = [n for n, _ in cls.target.model.lm.named_parameters()]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def copy(self, name):
        d = os.path.join(self.tmp, name)
        shutil.copytree(self.ck, d)
        self.addCleanup(shutil.rmtree, d, True)
        return d

    def assert_refused(self, d, *msgs):
        """load_checkpoint(d) is a 400 whose message holds msgs; the target learner is unchanged."""
        t = self.target
        before = ([p.detach().clone() for p in t.params], t.step, t.seed, torch.get_rng_state().clone(), len(t.opt.state))
        with self.assertRaises(LearnerError) as cm:
            t.load_checkpoint(d)
        self.assertEqual((cm.exception.code, cm.exception.status), ("bad_request", 400), cm.exception.message)
        for m in msgs:
            self.assertIn(m, cm.exception.message)
        self.assertEqual((t.step, t.seed, len(t.opt.state)), before[1:3] + (before[4],))
        self.assertTrue(torch.equal(torch.get_rng_state(), before[3]))
        for a, b in zip(t.params, before[0]):
            self.assertTrue(torch.equal(a, b))
        return cm.exception.message

    def test_the_state_is_json_and_safetensors_and_resumes_bit_for_bit(self):
        self.assertEqual(sorted(os.listdir(self.ck)), sorted(os.listdir(self.model) + ["learner.json", "learner.safetensors"]))
        with open(os.path.join(self.ck, "learner.json")) as f:
            meta = json.load(f)
        self.assertEqual({k: meta[k] for k in ("format", "writer", "step", "seed", "reference_dir")},
                         {"format": 2, "writer": "mempo_learner", "step": 1, "seed": 3, "reference_dir": self.model})
        self.assertEqual(meta["parameters"], self.names)
        self.assertEqual(meta["optimizer"], {"kind": "AdamW", "lr": ADAM["lr"], "betas": ADAM["betas"], "eps": ADAM["eps"],
                                             "weight_decay": ADAM["weight_decay"]})
        header, data = st_read(os.path.join(self.ck, "learner.safetensors"))
        opt = self.ln.opt.state_dict()["state"]
        for i, n in enumerate(self.names):
            for key in ("exp_avg", "exp_avg_sq"):
                e = header[f"{key}/{n}"]
                self.assertEqual((e["dtype"], e["shape"]), ("F32", list(self.ln.params[i].shape)))
                got = np.frombuffer(bytes(data[e["data_offsets"][0]:e["data_offsets"][1]]), "<f4")
                np.testing.assert_array_equal(got, opt[i][key].numpy().reshape(-1))
            self.assertEqual(header[f"step/{n}"]["shape"], list(opt[i]["step"].shape))
        e = header["rng/cpu"]
        self.assertEqual(bytes(data[e["data_offsets"][0]:e["data_offsets"][1]]), self.rng_at_save.numpy().tobytes())
        with open(os.path.join(self.ck, "manifest.json")) as f:
            man = json.load(f)
        self.assertEqual(man["writer"], "mempo_learner")
        for n, v in man["files"].items():
            with open(os.path.join(self.ck, n), "rb") as f:
                self.assertEqual(hashlib.sha256(f.read()).hexdigest(), v["sha256"])
        self.assertIn("learner.safetensors", man["files"])
        # resume: the same steps from the checkpoint give the uninterrupted run's numbers
        straight = Learner(self.model, seed=3)
        run_step(straight, 10)
        torch.set_rng_state(self.rng_at_save)
        n2 = run_step(straight, 11)
        resumed = Learner(self.model, seed=9)
        self.assertEqual(resumed.load_checkpoint(self.ck), self.ck)
        self.assertTrue(torch.equal(torch.get_rng_state(), self.rng_at_save))
        self.assertEqual((resumed.step, resumed.seed), (1, 3))
        self.assertEqual(run_step(resumed, 11), n2)
        for a, b in zip(straight.params, resumed.params):
            self.assertTrue(torch.equal(a, b))

    def test_a_pickle_learner_pt_is_never_loaded(self):
        marker = os.path.join(self.tmp, "pwned-pt")
        d = os.path.join(self.tmp, "old-format")
        shutil.copytree(self.model, d)  # the weights of a checkpoint, and the old state file
        self.addCleanup(shutil.rmtree, d, True)
        evil_pickle(os.path.join(d, "learner.pt"), marker)
        self.assert_refused(d, f"{d} holds learner.pt", "not loaded for safety")
        self.assertFalse(os.path.exists(marker))
        # beside a valid state the pickle is ignored, never opened
        d2 = self.copy("both")
        evil_pickle(os.path.join(d2, "learner.pt"), marker)
        Learner(self.model).load_checkpoint(d2)
        self.assertFalse(os.path.exists(marker))

    def test_a_pickle_in_place_of_a_state_file_is_refused_and_never_run(self):
        marker = os.path.join(self.tmp, "pwned-state")
        for name, as_torch, msg in (("learner.safetensors", True, "header length"),
                                    ("learner.safetensors", False, "header length"),
                                    ("learner.json", True, "not a JSON state file"),
                                    ("learner.json", False, "not a JSON state file")):
            with self.subTest(name=name, as_torch=as_torch):
                d = self.copy(f"evil-{name}-{as_torch}")
                evil_pickle(os.path.join(d, name), marker, as_torch)
                self.assert_refused(d, os.path.join(d, name), msg)
                self.assertFalse(os.path.exists(marker))

    def test_every_field_of_learner_json_is_checked(self):
        def mutate(f):
            return lambda m: (f(m), m)[1]
        nested = "[" * 100_000 + "]" * 100_000
        p0 = self.names[0]
        cases = [
            ("step", mutate(lambda m: m.update(step="3")), "step must be an integer"),
            ("step bool", mutate(lambda m: m.update(step=True)), "step must be an integer"),
            ("step < 0", mutate(lambda m: m.update(step=-1)), "step must be an integer"),
            ("seed", mutate(lambda m: m.update(seed=2.5)), "seed must be an integer"),
            ("format 1", mutate(lambda m: m.update(format=1)), "expected format 2"),
            ("writer", mutate(lambda m: m.pop("writer")), "expected format 2"),
            ("reference_dir", mutate(lambda m: m.update(reference_dir="models/x")), "reference_dir must be an absolute path"),
            ("reference_dir NUL", mutate(lambda m: m.update(reference_dir="/a\0b")), "reference_dir must be an absolute path"),
            ("lr NaN", mutate(lambda m: m["optimizer"].update(lr=math.nan)), "optimizer.lr must be a finite number"),
            ("eps 0", mutate(lambda m: m["optimizer"].update(eps=0)), "optimizer.eps"),
            ("betas", mutate(lambda m: m["optimizer"].update(betas=[0.9])), "optimizer.betas must be [b1, b2]"),
            ("beta 1", mutate(lambda m: m["optimizer"].update(betas=[0.9, 1.0])), "optimizer.betas must be a finite number"),
            ("kind", mutate(lambda m: m["optimizer"].update(kind="SGD")), "optimizer must be"),
            ("one parameter less", mutate(lambda m: m["parameters"].pop()), f"parameters: {len(self.names) - 1} names, the model has {len(self.names)}"),
            ("renamed", mutate(lambda m: m["parameters"].__setitem__(0, "other.weight")), f"parameters[0] is 'other.weight', the model's is '{p0}'"),
            ("array", lambda m: [m], "not a JSON object"),
            ("nested", lambda m: nested, "not a JSON state file"),
        ]
        for what, f, msg in cases:
            with self.subTest(what=what):
                d = self.copy(f"json-{what}")
                path = os.path.join(d, "learner.json")
                with open(path) as fh:
                    m = json.load(fh)
                out = f(m)
                with open(path, "w") as fh:
                    fh.write(out if isinstance(out, str) else json.dumps(out))
                self.assert_refused(d, path, msg)

    def test_every_tensor_of_learner_safetensors_is_checked(self):
        p0, p1 = self.names[0], self.names[1]

        def at(h, name):
            return h[name]["data_offsets"][0]

        def put(name, i, value, fmt="<f"):
            def f(h, data):
                struct.pack_into(fmt, data, at(h, name) + i * struct.calcsize(fmt), value)
            return f

        def header(fn):
            return lambda h, data: fn(h)

        def drop(name):  # the tensor's bytes go too; later offsets move down
            def f(h, data):
                b, e = h.pop(name)["data_offsets"]
                del data[b:e]
                for v in h.values():
                    if isinstance(v, dict) and v["data_offsets"][0] >= e:
                        v["data_offsets"] = [v["data_offsets"][0] - (e - b), v["data_offsets"][1] - (e - b)]
            return f

        def add_unknown(h, data):
            h["exp_avg/blocks.99.x"] = {"dtype": "F32", "shape": [1], "data_offsets": [len(data), len(data) + 4]}
            data.extend(b"\0\0\0\0")

        def short_rng(h, data):  # the last tensor, 8 bytes shorter: a consistent file
            e = h["rng/cpu"]
            e["shape"], e["data_offsets"][1] = [e["shape"][0] - 8], e["data_offsets"][1] - 8
            del data[-8:]

        def overlap(h, data):  # exp_avg/p1 claims the first 1024 bytes of exp_avg/p0
            b = h[f"exp_avg/{p0}"]["data_offsets"][0]
            h[f"exp_avg/{p1}"]["data_offsets"] = [b, b + 1024]

        cases = [
            ("NaN moment", put(f"exp_avg/{p0}", 5, math.nan), f"tensor exp_avg/{p0}: element 5 is nan, not finite"),
            ("inf moment", put(f"exp_avg_sq/{p1}", 2, math.inf), f"tensor exp_avg_sq/{p1}: element 2 is inf"),
            ("negative second moment", put(f"exp_avg_sq/{p1}", 0, -1.0), f"tensor exp_avg_sq/{p1}: holds a negative second moment"),
            ("fractional step", put(f"step/{p0}", 0, 0.5), f"tensor step/{p0}: 0.5 is not a step count"),
            ("shape", header(lambda h: h[f"exp_avg/{p1}"].update(shape=[16, 16])), f"tensor exp_avg/{p1}: float32 [16, 16], expected float32 [256]"),
            ("dtype", header(lambda h: h[f"exp_avg/{p1}"].update(dtype="I32")), f"tensor exp_avg/{p1}: int32 [256], expected float32 [256]"),
            ("unknown dtype", header(lambda h: h[f"exp_avg/{p1}"].update(dtype="F8")), f"tensor exp_avg/{p1}: dtype 'F8'"),
            ("shape 2^70", header(lambda h: h[f"exp_avg/{p1}"].update(shape=[2 ** 70])), f"tensor exp_avg/{p1}: 1024 bytes do not hold F32 [{2 ** 70}]"),
            ("zero beside 2^70", header(lambda h: h.__setitem__("z", {"dtype": "F32", "shape": [0, 2 ** 70], "data_offsets": [0, 0]})), f"tensor z: shape [0, {2 ** 70}] is over {2 ** 62} elements"),
            ("offsets past the end", header(lambda h: h["rng/cpu"].update(data_offsets=[0, 2 ** 40])), "tensor rng/cpu: data_offsets [0, 1099511627776] outside"),
            ("overlap", overlap, "contiguous, no overlap"),
            ("extra entry key", header(lambda h: h["rng/cpu"].update(code="os.system")), "tensor rng/cpu: the header entry is not"),
            ("missing second moment", drop(f"exp_avg_sq/{p1}"), f"tensor exp_avg_sq/{p1}: missing"),
            ("missing rng", drop("rng/cpu"), "tensor rng/cpu: missing"),
            ("short rng", short_rng, "tensor rng/cpu: uint8 [5048], expected uint8 [5056]"),
            ("bytes after", lambda h, data: data.extend(b"\0" * 8), "8 data bytes after the last tensor"),
            ("unknown tensor", add_unknown, "tensor exp_avg/blocks.99.x: is not part of a learner state"),
        ]
        for what, f, msg in cases:
            with self.subTest(what=what):
                d = self.copy(f"st-{what}")
                path = os.path.join(d, "learner.safetensors")
                h, data = st_read(path)
                f(h, data)
                st_write(path, h, data)
                self.assert_refused(d, path, msg)

    def test_cut_and_odd_files(self):
        d = self.copy("cut")
        path = os.path.join(d, "learner.safetensors")
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) - 100)
        self.assert_refused(d, path, "outside the")
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", 2 ** 63))
        self.assert_refused(d, path, f"header length {2 ** 63} runs past the 8-byte file")
        d = self.copy("fifo")  # a FIFO would block open() forever; a device never ends
        os.remove(os.path.join(d, "learner.json"))
        os.mkfifo(os.path.join(d, "learner.json"))
        self.assert_refused(d, os.path.join(d, "learner.json"), "not a regular file")
        d = self.copy("zero")
        os.remove(os.path.join(d, "learner.safetensors"))
        os.symlink("/dev/zero", os.path.join(d, "learner.safetensors"))
        self.assert_refused(d, os.path.join(d, "learner.safetensors"), "not a regular file")
        d = self.copy("no-tensors")
        os.remove(os.path.join(d, "learner.safetensors"))
        self.assert_refused(d, "has learner.json but no learner.safetensors")

    def test_weights_that_are_not_finite_are_refused(self):
        d = self.copy("nan-weights")
        onnx = OnnxWeights(os.path.join(d, "model.onnx"))
        name = onnx.matmul_weights[1]
        w = onnx.read(name).copy()
        w[3, 4] = np.nan
        onnx.write(os.path.join(d, "model.onnx"), {name: w})
        self.assert_refused(d, "holds a value that is not finite")

    def test_paths(self):
        self.assert_refused(os.path.relpath(self.ck), "is relative: give an absolute path")
        self.assert_refused(self.ck + "\0x", "holds a NUL byte")
        self.assert_refused(self.model, "is not a checkpoint directory (no learner.json)")
        self.assert_refused(os.path.join(self.tmp, "x" * 300), "File name too long")


class SaveDirTest(unittest.TestCase):
    """save_weights and save_checkpoint replace only a directory the learner saved, or an empty one."""

    @classmethod
    def setUpClass(cls):
        cls.ln = Learner(TINY)

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pyl-save-")
        self.addCleanup(shutil.rmtree, self.tmp)

    def assert_refused(self, dest, *msgs, code="bad_request", status=400):
        parent = os.path.dirname(dest) if os.path.isabs(dest) else os.getcwd()
        before = snapshot(parent)
        for save in (self.ln.save_weights, self.ln.save_checkpoint):
            with self.subTest(save=save.__name__), self.assertRaises(LearnerError) as cm:
                save(dest)
            self.assertEqual((cm.exception.code, cm.exception.status), (code, status), cm.exception.message)
            for m in msgs:
                self.assertIn(m, cm.exception.message)
            self.assertEqual(snapshot(parent), before)  # byte for byte; no .tmp-, no .old- beside it

    def test_an_existing_temp_name_is_refused_not_removed(self):
        dest = os.path.join(self.tmp, "w")
        tmp = f"{dest}.tmp-{os.getpid()}"
        os.mkdir(tmp)
        with open(os.path.join(tmp, "keep.txt"), "w") as f:
            f.write("not the learner's\n")
        self.assert_refused(dest, f"{tmp} exists", "removes nothing it did not create")

    def test_a_directory_of_unrelated_files_is_left_alone(self):
        d = os.path.join(self.tmp, "mine")
        os.makedirs(os.path.join(d, "sub"))
        with open(os.path.join(d, "notes.txt"), "w") as f:
            f.write("a year of work\n")
        with open(os.path.join(d, "sub", "data.bin"), "wb") as f:
            f.write(os.urandom(1000))
        self.assert_refused(d, f"{d} is a directory mempo_learner did not save (no manifest.json", "nothing was changed")

    def test_a_model_directory_it_did_not_save_is_left_alone(self):
        d = os.path.join(self.tmp, "mempo-tiny")
        shutil.copytree(TINY, d)
        self.assert_refused(d, f"{d} is a directory mempo_learner did not save", 'no "writer": "mempo_learner"')

    def test_a_file_a_link_a_relative_path_a_missing_parent(self):
        f = os.path.join(self.tmp, "plain")
        with open(f, "w") as fh:
            fh.write("keep me\n")
        self.assert_refused(f, f"{f} is a file, not a directory")
        target = os.path.join(self.tmp, "target")
        os.mkdir(target)
        with open(os.path.join(target, "x"), "w") as fh:
            fh.write("x")
        link = os.path.join(self.tmp, "link")
        os.symlink(target, link)
        self.assert_refused(link, f"{link} is a symbolic link")
        missing = os.path.join(self.tmp, "no", "such", "out")
        self.assert_refused(missing, f"the parent directory {os.path.dirname(missing)} of {missing} does not exist")
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "no")))
        cwd = os.getcwd()
        os.chdir(self.tmp)
        self.addCleanup(os.chdir, cwd)
        self.assert_refused("rel/out", "'rel/out' is relative: give an absolute path")
        self.assert_refused("out", "'out' is relative")
        self.assert_refused(os.path.join(self.tmp, "a\0b"), "holds a NUL byte")
        self.assert_refused(os.path.join(self.tmp, "n" * 300), "File name too long")
        with self.assertRaisesRegex(LearnerError, "dir / is the root directory"):
            self.ln.save_weights("/")

    def test_its_own_directory_is_replaced_whole_even_with_trainer_json_but_not_with_a_file_of_yours(self):
        d = os.path.join(self.tmp, "step-1")
        self.assertEqual(self.ln.save_checkpoint(d + "/"), d)
        with open(os.path.join(d, "trainer.json"), "w") as f:  # what mempo train adds
            f.write("{}\n")
        self.assertEqual(self.ln.save_weights(d), d)  # a weights directory in its place
        self.assertEqual(sorted(os.listdir(self.tmp)), ["step-1"])
        self.assertNotIn("learner.json", os.listdir(d))
        self.assertNotIn("trainer.json", os.listdir(d))
        with open(os.path.join(d, "notes.txt"), "w") as f:
            f.write("mine\n")
        self.assert_refused(d, "it holds notes.txt, which mempo_learner did not write")
        os.remove(os.path.join(d, "notes.txt"))
        empty = os.path.join(self.tmp, "empty")
        os.mkdir(empty)
        self.assertEqual(self.ln.save_weights(empty), empty)
        self.assertEqual(sorted(os.listdir(self.tmp)), ["empty", "step-1"])

    def test_a_learner_started_from_a_checkpoint_does_not_copy_its_state_into_a_save(self):
        ck = os.path.join(self.tmp, "ck")
        self.ln.save_checkpoint(ck)
        for n in ("trainer.json", "learner.pt"):
            with open(os.path.join(ck, n), "w") as f:
                f.write("{}\n")
        w = Learner(ck).save_weights(os.path.join(self.tmp, "w"))
        self.assertEqual(sorted(os.listdir(w)), sorted(os.listdir(TINY)))
        with open(os.path.join(w, "manifest.json")) as f:
            self.assertEqual(sorted(json.load(f)["files"]), sorted(n for n in os.listdir(TINY) if n != "manifest.json"))

    def test_a_full_disk_is_507_and_the_previous_directory_stays(self):
        d = os.path.join(self.tmp, "w")
        self.ln.save_weights(d)
        before = snapshot(self.tmp)
        real = self.ln.model.save

        def full(out):  # the model's own writer meets ENOSPC halfway
            real(out)
            with open(os.path.join(out, "model.onnx"), "r+b") as f:
                f.truncate(1000)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.path.join(out, "model.onnx"))

        self.ln.model.save = full
        self.addCleanup(delattr, self.ln.model, "save")
        for save in (self.ln.save_weights, self.ln.save_checkpoint):
            with self.assertRaises(LearnerError) as cm:
                save(d)
            self.assertEqual((cm.exception.code, cm.exception.status), ("no_space", 507))
            self.assertIn(f"{d}: No space left on device", cm.exception.message)
            self.assertEqual(snapshot(self.tmp), before)


def can_mount_tmpfs() -> bool:
    if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
        return False
    d = tempfile.mkdtemp(prefix="pyl-mnt-probe-")
    try:
        return subprocess.run(["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=1m tmpfs {d}"],
                              capture_output=True, timeout=30).returncode == 0
    finally:
        os.rmdir(d)


class HttpTest(unittest.TestCase):
    """The same attacks through a real learner process over HTTP."""

    def start(self, *prefix, extra_env=None):
        if prefix:
            e = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "learner"), **(extra_env or {}))
            p = subprocess.Popen([*prefix, sys.executable, "-m", "mempo_learner", "--model", TINY, "--port", "0", "--threads", "2"],
                                 cwd=ROOT, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        else:
            p = spawn()

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

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pyl-http-ck-")
        self.addCleanup(shutil.rmtree, self.tmp)

    def test_load_checkpoint_with_a_pickle_runs_nothing_and_save_deletes_nothing(self):
        p, c = self.start()
        marker = os.path.join(self.tmp, "pwned")
        d = os.path.join(self.tmp, "ck")
        shutil.copytree(TINY, d)
        evil_pickle(os.path.join(d, "learner.pt"), marker)
        st, r = c.json("POST", "/load_checkpoint", {"dir": d})
        self.assertEqual((st, r["error"]["code"]), (400, "bad_request"), r)
        self.assertIn("not loaded for safety", r["error"]["message"])
        self.assertFalse(os.path.exists(marker))
        mine = os.path.join(self.tmp, "mine")
        os.mkdir(mine)
        with open(os.path.join(mine, "notes.txt"), "w") as f:
            f.write("keep\n")
        before = snapshot(self.tmp)
        for path in ("/save_weights", "/save_checkpoint"):
            st, r = c.json("POST", path, {"dir": mine})
            self.assertEqual((st, r["error"]["code"]), (400, "bad_request"), r)
            self.assertIn("did not save", r["error"]["message"])
        self.assertEqual(snapshot(self.tmp), before)
        self.assertEqual(c.json("GET", "/info")[0], 200)

    @unittest.skipUnless(can_mount_tmpfs(), "needs `unshare -m` and a tmpfs mount (root on Linux)")
    def test_a_full_disk_is_507_the_learner_stays_up_and_the_previous_checkpoint_is_whole(self):
        mnt = tempfile.mkdtemp(prefix="pyl-full-")
        self.addCleanup(os.rmdir, mnt)
        # a 74 MiB tmpfs in the learner's own mount namespace: after one checkpoint (model.onnx 17 MB +
        # AdamW state 27 MB) a second one's model.onnx fits and its optimiser state does not
        p, c = self.start("unshare", "-m", "sh", "-c", 'mount -t tmpfs -o size=74m tmpfs "$MNT" && exec "$@"', "sh",
                          extra_env={"MNT": mnt})
        seen = f"/proc/{p.pid}/root{mnt}"  # the tmpfs as the learner sees it
        ids, lens, starts = samples(8, [15, 40, 7], [2, 30, 6])
        st, (params, _) = c.frame("/forward", {"policy": "current", "grad": True}, {"ids": ids, "lengths": lens, "target_start": starts})
        self.assertEqual(st, 200)
        self.assertEqual(c.frame("/backward", {"forward_id": params["forward_id"]}, {"grad": np.full(24, 0.5, np.float32)})[0], 200)
        self.assertEqual(c.json("POST", "/optim_step", ADAM)[0], 200)  # so that the checkpoint holds AdamW's moments
        st, r = c.json("POST", "/save_checkpoint", {"dir": f"{mnt}/ck-1"})
        self.assertEqual(st, 200, r)
        first = snapshot(f"{seen}/ck-1")
        for dest in (f"{mnt}/ck-2", f"{mnt}/ck-1"):
            with self.subTest(dest=dest):
                st, r = c.json("POST", "/save_checkpoint", {"dir": dest})
                self.assertEqual((st, r.get("error", {}).get("code")), (507, "no_space"), r)
                self.assertIn(f"save_checkpoint {dest}: No space left on device", r["error"]["message"])
                self.assertEqual(os.listdir(seen), ["ck-1"])  # the temp directory is gone
                self.assertEqual(snapshot(f"{seen}/ck-1"), first)
        self.assertEqual(c.json("POST", "/save_weights", {"dir": f"{mnt}/w"})[0], 200)  # still at work
        st, r = c.json("POST", "/load_checkpoint", {"dir": f"{mnt}/ck-1"})
        self.assertEqual((st, r.get("step")), (200, 1), r)
        self.assertEqual(c.json("POST", "/shutdown"), (200, {"ok": True}))
        self.assertEqual(p.wait(timeout=30), 0)
        self.assertNotIn("terminate called", p.stderr.read())

if __name__ == "__main__":
    unittest.main()
