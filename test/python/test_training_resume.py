"""training/train.py's checkpoint and --resume: a stage killed after a checkpoint and run again
continues to the same weights and loss curve as one uninterrupted run; a checkpoint written with
other flags, or on other samples, is refused by name; a checkpoint file that is a code-running pickle is refused without
running it (torch.load weights_only).

    PYTHONPATH=learner:training /usr/bin/python3 -m unittest discover -s test/python -p 'test_training_resume.py'
"""
import json
import os
import pickle
import random
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(ROOT, "training", "train.py")


def samples(rng, n):
    """Token-id samples of the kinds stage 1 mixes (ids below the tiny tokenizer's size)."""
    out = []
    for i in range(n):
        c = [rng.randrange(20, 1500) for _ in range(rng.randint(8, 40))]
        o = [rng.randrange(20, 1500) for _ in range(rng.randint(4, 20))]
        kind = ("memory", "stream", "score")[i % 3]
        s = {"p": kind, "h": 1, "k": 1, "r": 1, "f": 0, "c": c, "o": o}
        if kind == "stream":
            s["m"] = [rng.randint(0, 1) for _ in o]
        out.append(s)
    return out


class Resume(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="mempo-train-resume-")
        cls.data = os.path.join(cls.tmp, "samples")
        os.makedirs(cls.data)
        rng = random.Random(5)
        for name, n in (("samples-train-w1.jsonl", 300), ("samples-dev.jsonl", 30)):
            with open(os.path.join(cls.data, name), "w") as f:
                f.writelines(json.dumps(s) + "\n" for s in samples(rng, n))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def train_args(self, run_dir, *extra):
        return [sys.executable, TRAIN, "--steps", "6", "--checkpoint-every", "3", "--worlds", "1", "--per-world", "1",
                "--skip-data", "--samples-dir", self.data, "--copy-warmup", "2", "--no-export", "--dev-n", "2",
                "--threads", "1", "--run-dir", run_dir, *extra]

    def train(self, run_dir, *extra):
        return subprocess.run(self.train_args(run_dir, *extra), cwd=ROOT, capture_output=True, text=True, timeout=300)

    def metrics(self, run_dir):
        with open(os.path.join(run_dir, "metrics.json")) as f:
            return json.load(f)

    def test_a_killed_stage_resumed_from_its_checkpoint_ends_where_an_uninterrupted_one_does(self):
        whole = os.path.join(self.tmp, "whole")
        r = self.train(whole)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        # the checkpoint of step 3 (the last one before the end) is what a run killed at step 4 or 5 leaves
        resumed = os.path.join(self.tmp, "resumed")
        os.makedirs(resumed)
        shutil.copy(os.path.join(whole, "checkpoint.pt"), os.path.join(resumed, "checkpoint.pt"))
        r = self.train(resumed, "--resume")
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        with open(os.path.join(resumed, "train.log")) as f:
            self.assertIn("resumed from", f.read())
        a, b = self.metrics(whole), self.metrics(resumed)
        self.assertEqual(len(a["curve"]), 6)
        self.assertEqual(b["curve"], a["curve"])  # the same losses, bit for bit, at every step (one thread)
        self.assertEqual(b["final_loss"], a["final_loss"])
        self.assertEqual(b["train_steps"], 6)
        import torch
        wa = torch.load(os.path.join(whole, "model.pt"), weights_only=True)["model"]
        wb = torch.load(os.path.join(resumed, "model.pt"), weights_only=True)["model"]
        self.assertEqual(sorted(wa), sorted(wb))
        for k in wa:
            self.assertTrue(torch.equal(wa[k], wb[k]), k)
        # --resume without a checkpoint starts from scratch
        fresh = os.path.join(self.tmp, "fresh")
        r = self.train(fresh, "--resume")
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertEqual(self.metrics(fresh)["curve"], a["curve"])

    def test_a_checkpoint_of_other_flags_is_refused_by_name_and_left_as_it_was(self):
        run = os.path.join(self.tmp, "other")
        r = self.train(run)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        ck = os.path.join(run, "checkpoint.pt")
        with open(ck, "rb") as f:
            before = f.read()
        r = self.train(run, "--resume", "--lr", "1e-3")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("was written by another run", r.stderr)
        self.assertIn("'lr': (0.0015, 0.001)", r.stderr)
        with open(ck, "rb") as f:
            self.assertEqual(f.read(), before)
        # the same flags on other samples (a world regenerated differently): refused too
        other = os.path.join(self.tmp, "other-samples")
        shutil.copytree(self.data, other)
        with open(os.path.join(other, "samples-train-w1.jsonl"), "a") as f:
            f.write(json.dumps(samples(random.Random(9), 1)[0]) + "\n")
        args = [a if a != self.data else other for a in self.train_args(run, "--resume")]
        r = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("was trained on other samples", r.stderr)
        with open(ck, "rb") as f:
            self.assertEqual(f.read(), before)

    def test_a_checkpoint_that_runs_code_is_refused_and_the_code_never_runs(self):
        run = os.path.join(self.tmp, "hostile")
        os.makedirs(run)
        marker = os.path.join(self.tmp, "pwned")

        class Payload:
            def __reduce__(self):
                return (os.system, (f"touch {marker}",))

        import torch
        torch.save({"model": Payload()}, os.path.join(run, "checkpoint.pt"))
        with open(os.path.join(run, "raw.pt"), "wb") as f:  # a plain pickle, not a torch zip
            pickle.dump(Payload(), f)
        r = self.train(run, "--resume")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("Weights only load failed", r.stderr)
        shutil.copy(os.path.join(run, "raw.pt"), os.path.join(run, "checkpoint.pt"))
        r = self.train(run, "--resume")
        self.assertNotEqual(r.returncode, 0)
        self.assertFalse(os.path.exists(marker))

    def test_a_run_without_resume_never_overwrites_a_checkpoint(self):
        run = os.path.join(self.tmp, "kept")
        os.makedirs(run)
        ck = os.path.join(run, "checkpoint.pt")
        with open(ck, "wb") as f:
            f.write(b"an earlier run's checkpoint")
        r = self.train(run)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--resume continues that run", r.stderr)
        with open(ck, "rb") as f:
            self.assertEqual(f.read(), b"an earlier run's checkpoint")

    def test_resume_needs_a_step_count(self):
        r = subprocess.run([sys.executable, TRAIN, "--resume", "--samples-dir", self.data, "--skip-data"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--resume needs --steps N", r.stderr)


if __name__ == "__main__":
    unittest.main()
