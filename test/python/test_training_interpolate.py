"""training/interpolate.py: the weighted mean of two models' float initializers (the integer ones kept), the other
files from the second model, a manifest over them; what it refuses, writing nothing. Needs onnx: skipped under
Debian's torch, whose Python lacks it."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

try:
    import onnx
    from onnx import helper, numpy_helper, TensorProto
    HAVE = True
except ImportError:
    HAVE = False

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
TOOL = os.path.join(ROOT, "training", "interpolate.py")


def write_model(d, w, idx, config):
    """A model directory: y = (x @ w)[idx] as an ONNX graph with a float and an int64 initializer."""
    os.makedirs(d)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Gather", ["h", "idx"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, "g", [x], [y], [numpy_helper.from_array(np.asarray(w, np.float32), "w"),
                                                    numpy_helper.from_array(np.asarray(idx, np.int64), "idx")])
    onnx.save(helper.make_model(graph), os.path.join(d, "model.onnx"))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f)
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        f.write("{}")


@unittest.skipUnless(HAVE, "needs onnx (requirements.txt)")
class Interpolate(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="mempo-interpolate-")
        self.a = os.path.join(self.tmp, "a")
        self.b = os.path.join(self.tmp, "b")
        write_model(self.a, [[1.0, 2.0], [3.0, -4.0]], [1, 0], {"from": "a"})
        write_model(self.b, [[3.0, 0.0], [-1.0, 4.0]], [1, 0], {"from": "b"})

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def run_tool(self, *args):
        return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True, timeout=120)

    def weights(self, d):
        return {t.name: numpy_helper.to_array(t) for t in onnx.load(os.path.join(d, "model.onnx")).graph.initializer}

    def test_mean_of_the_float_initializers(self):
        out = os.path.join(self.tmp, "out")
        r = self.run_tool(self.a, self.b, "0.25", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        w = self.weights(out)
        # 0.75 * a + 0.25 * b, by hand: [[0.75 + 0.75, 1.5 + 0], [2.25 - 0.25, -3 + 1]]
        np.testing.assert_array_equal(w["w"], np.array([[1.5, 1.5], [2.0, -2.0]], np.float32))
        np.testing.assert_array_equal(w["idx"], np.array([1, 0], np.int64))
        with open(os.path.join(out, "config.json")) as f:
            self.assertEqual(json.load(f), {"from": "b", "mempo": {"interpolate": {"a": self.a, "b": self.b, "lambda": 0.25}}})
        with open(os.path.join(out, "manifest.json")) as f:
            man = json.load(f)
        self.assertEqual(sorted(man["files"]), ["config.json", "model.onnx", "tokenizer.json"])
        self.assertEqual(man["writer"], "training/interpolate.py")
        self.assertEqual(man["files"]["model.onnx"]["bytes"], os.path.getsize(os.path.join(out, "model.onnx")))
        self.assertEqual(sorted(os.listdir(self.tmp)), ["a", "b", "out"])
        # the ends are the two models
        for lam, src in (("0", self.a), ("1", self.b)):
            end = os.path.join(self.tmp, "end" + lam)
            self.assertEqual(self.run_tool(self.a, self.b, lam, end).returncode, 0)
            np.testing.assert_array_equal(self.weights(end)["w"], self.weights(src)["w"])

    def test_the_rl_records_of_averaged_runs(self):
        dirs = []
        for i, metric in enumerate(["f1", "item-f1", "em"]):
            d = os.path.join(self.tmp, "run" + str(i))
            write_model(d, [[float(i), 0.0], [0.0, 0.0]], [1, 0], {"mempo": {"num_parameters": 4, "rl": {"metric": metric}}})
            with open(os.path.join(d, "manifest.json"), "w") as f:
                json.dump({"name": "mempo-tiny", "files": {}}, f)
            dirs.append(d)
        avg2, avg3 = os.path.join(self.tmp, "avg2"), os.path.join(self.tmp, "avg3")
        self.assertEqual(self.run_tool(dirs[0], dirs[1], "0.5", avg2).returncode, 0)
        r = self.run_tool(avg2, dirs[2], str(1 / 3), avg3)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(avg3, "config.json")) as f:
            mempo = json.load(f)["mempo"]
        self.assertEqual(mempo["num_parameters"], 4)
        self.assertEqual(mempo["rl"], [{"metric": "f1"}, {"metric": "item-f1"}, {"metric": "em"}])
        self.assertEqual(mempo["rl_weights"], [0.333333, 0.333333, 0.333333])
        # (0 + 1) / 2 * 2/3 + 2 * 1/3 = 1 (float32 rounding of 1/3 aside)
        self.assertAlmostEqual(float(self.weights(avg3)["w"][0, 0]), 1.0, places=6)
        with open(os.path.join(avg3, "manifest.json")) as f:
            self.assertEqual(json.load(f)["name"], "mempo-tiny")

    def refused(self, args, message):
        r = self.run_tool(*args)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(message, r.stderr)
        self.assertEqual(sorted(os.listdir(self.tmp)), sorted(["a", "b"] + [n for n in os.listdir(self.tmp) if n == "out"]))

    def test_refusals_write_nothing(self):
        out = os.path.join(self.tmp, "out")
        self.refused([self.a, self.b, "1.5", out], "LAMBDA must be a number in [0, 1], got '1.5'")
        self.refused([self.a, self.b, "half", out], "LAMBDA must be a number in [0, 1], got 'half'")
        self.refused([self.a, os.path.join(self.tmp, "none"), "0.5", out], "none/model.onnx is missing")
        other = os.path.join(self.tmp, "c")
        write_model(other, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [1, 0], {})
        r = self.run_tool(self.a, other, "0.5", out)
        self.assertEqual(r.returncode, 2)
        self.assertIn("initializer w: float32[2, 2] in", r.stderr)
        shutil.rmtree(other)
        write_model(other, [[1.0, 2.0], [3.0, 4.0]], [0, 1], {})
        r = self.run_tool(self.a, other, "0.5", out)
        self.assertEqual(r.returncode, 2)
        self.assertIn("initializer idx (int64) differs", r.stderr)
        shutil.rmtree(other)
        # a directory named like a temporary one of an older version is the user's: left as it is
        os.makedirs(out + ".tmp")
        with open(os.path.join(out + ".tmp", "keep"), "w") as f:
            f.write("mine")
        self.assertEqual(self.run_tool(self.a, self.b, "0.5", out).returncode, 0)
        self.assertEqual(os.listdir(out + ".tmp"), ["keep"])
        shutil.rmtree(out)
        shutil.rmtree(out + ".tmp")
        os.makedirs(out)
        with open(os.path.join(out, "keep"), "w") as f:
            f.write("mine")
        self.refused([self.a, self.b, "0.5", out], "exists; choose a new directory")
        self.assertEqual(os.listdir(out), ["keep"])


if __name__ == "__main__":
    unittest.main()
