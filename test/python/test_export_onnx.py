"""mempo_learner.export_onnx: what it refuses (naming the file and field, writing nothing) and what
it writes (onnx/model.onnx whose initializers hold the safetensors tensors export.json maps them
to; logits equal to transformers' under onnx's reference evaluator). The numerics on mempo's own
runtime are test/engines/local/hf-onnx.test.ts. Needs transformers: skipped under Debian's torch."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

try:
    import transformers  # noqa: F401
    import onnx  # noqa: F401
    import safetensors  # noqa: F401
    HAVE = True
except ImportError:
    HAVE = False

from mempo_learner.errors import LearnerError  # noqa: E402


def listing(d):
    return sorted(os.listdir(d))


class RefusalTest(unittest.TestCase):
    """No transformers needed: every refusal comes before the model is read."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="mempo-export-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        from mempo_learner import export_onnx
        self.export = export_onnx.export

    def write(self, name, data):
        with open(os.path.join(self.dir, name), "w" if isinstance(data, str) else "wb") as f:
            f.write(data)

    def refused(self, pattern):
        before = listing(self.dir)
        with self.assertRaises(LearnerError) as cm:
            self.export(self.dir)
        self.assertRegex(cm.exception.message, pattern)
        self.assertEqual(listing(self.dir), before)  # nothing written, no temporary left

    def test_missing_config(self):
        self.write("model.safetensors", b"")
        self.refused(r"config\.json is missing")

    def test_config_not_json(self):
        self.write("config.json", "{")
        self.refused(r"config\.json is not valid JSON")

    def test_unsupported_architecture(self):
        self.write("config.json", json.dumps({"model_type": "gpt2"}))
        self.write("model.safetensors", b"")
        self.refused(r"config\.json: model_type 'gpt2' has no ONNX export path in mempo \(supported: qwen3, llama, qwen2\)")

    def test_length_dependent_rope_and_sliding_window_are_refused(self):
        self.write("model.safetensors", b"")
        self.write("config.json", json.dumps({"model_type": "llama", "rope_scaling": {"type": "dynamic", "factor": 2.0}}))
        self.refused(r"config\.json: rope_scaling\.rope_type 'dynamic' is not exported by mempo \(supported: default, llama3\)")
        self.write("config.json", json.dumps({"model_type": "qwen2", "rope_parameters": {"rope_type": "yarn"}}))
        self.refused(r"rope_parameters\.rope_type 'yarn'")
        self.write("config.json", json.dumps({"model_type": "qwen2", "use_sliding_window": True}))
        self.refused(r"config\.json: sliding-window attention")

    def test_pickle_only_weights_are_refused_unread(self):
        self.write("config.json", json.dumps({"model_type": "qwen3"}))
        self.write("pytorch_model.bin", b"\x80\x04not read")
        self.refused(r"only pickle weights \(pytorch_model\.bin\); mempo loads safetensors only")

    def test_no_weights(self):
        self.write("config.json", json.dumps({"model_type": "llama"}))
        self.refused(r"no model\.safetensors \(nor model\.safetensors\.index\.json\) weights")

    def test_weight_files_are_model_safetensors_or_the_index_shards(self):
        from mempo_learner.export_onnx import weight_files
        self.write("model.safetensors", b"")
        self.write("learner.safetensors", b"")  # a checkpoint's optimiser state, not weights
        self.assertEqual(weight_files(self.dir), ["model.safetensors"])
        self.write("model.safetensors.index.json", json.dumps({"weight_map": {"a": "s1.safetensors", "b": "../x.safetensors"}}))
        with self.assertRaisesRegex(Exception, r"weight_map\['b'\] must be a \.safetensors file name inside"):
            weight_files(self.dir)
        self.write("model.safetensors.index.json", json.dumps({"weight_map": {"a": "s1.safetensors"}}))
        with self.assertRaisesRegex(Exception, r"weight_map\['a'\] names s1\.safetensors, which is missing"):
            weight_files(self.dir)
        self.write("s1.safetensors", b"")
        self.assertEqual(weight_files(self.dir), ["s1.safetensors"])

    def test_foreign_onnx_dir_is_not_replaced(self):
        self.write("config.json", json.dumps({"model_type": "qwen2"}))
        self.write("model.safetensors", b"")
        os.mkdir(os.path.join(self.dir, "onnx"))
        self.write(os.path.join("onnx", "model.onnx"), b"someone else's")
        self.refused(r"onnx exists and was not written by this exporter")
        with open(os.path.join(self.dir, "onnx", "model.onnx"), "rb") as f:
            self.assertEqual(f.read(), b"someone else's")

    def test_cli_exit_status_and_message(self):
        self.write("config.json", json.dumps({"model_type": "gpt2"}))
        r = subprocess.run([sys.executable, "-m", "mempo_learner.export_onnx", self.dir], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "learner")})
        self.assertEqual(r.returncode, 2)
        self.assertIn("model_type 'gpt2' has no ONNX export path", r.stderr)
        self.assertEqual(r.stdout, "")


@unittest.skipUnless(HAVE, "needs transformers, safetensors and onnx (requirements.txt); Debian's torch 1.13 has none")
class ExportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        sys.path.insert(0, HERE)
        import zoo
        cls.tmp = tempfile.mkdtemp(prefix="mempo-export-zoo-")
        cls.dir = zoo.build("qwen3", os.path.join(cls.tmp, "qwen3"))
        from mempo_learner.export_onnx import export
        cls.path = export(cls.dir)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)

    def test_layout_and_manifest(self):
        self.assertEqual(self.path, os.path.join(self.dir, "onnx", "model.onnx"))
        self.assertEqual(listing(os.path.join(self.dir, "onnx")), ["export.json", "model.onnx"])
        self.assertFalse([n for n in listing(self.dir) if n.startswith(".onnx")])  # no temporary left
        with open(os.path.join(self.dir, "onnx", "export.json")) as f:
            m = json.load(f)
        self.assertEqual((m["model_type"], m["opset"], m["layers"], m["kv_heads"], m["head_dim"], m["vocab_size"]),
                         ("qwen3", 17, 2, 2, 16, 151936))
        self.assertEqual(list(m["source"]), ["model.safetensors"])
        self.assertEqual(m["source"]["model.safetensors"]["bytes"], os.path.getsize(os.path.join(self.dir, "model.safetensors")))

    def test_each_tensor_is_its_own_initializer(self):
        import numpy as np
        import onnx
        from onnx import numpy_helper
        from safetensors.numpy import load_file

        with open(os.path.join(self.dir, "onnx", "export.json")) as f:
            weights = json.load(f)["weights"]
        inits = {t.name: numpy_helper.to_array(t) for t in onnx.load(self.path).graph.initializer}
        tensors = load_file(os.path.join(self.dir, "model.safetensors"))
        for name, value in tensors.items():
            self.assertTrue(np.array_equal(inits[weights[name]], value), name)
        # Tied embeddings (Qwen3) share one initializer; every other tensor has its own, although
        # the RMSNorm weights are all equal (ones) in the checkpoint.
        self.assertEqual(weights["lm_head.weight"], weights["model.embed_tokens.weight"])
        norms = [weights[n] for n in tensors if n.endswith("norm.weight")]
        self.assertGreater(len(norms), 4)
        self.assertEqual(len(set(norms)), len(norms))
        self.assertTrue(all(np.array_equal(tensors[n], np.ones_like(tensors[n])) for n in tensors if n.endswith("norm.weight")))

    def test_reference_evaluator_logits_equal_transformers(self):
        import numpy as np
        import onnx
        import torch
        from onnx.reference import ReferenceEvaluator
        from transformers import AutoModelForCausalLM

        lm = AutoModelForCausalLM.from_pretrained(self.dir, dtype=torch.float32).eval()
        ids = np.array([[151644, 872, 198, 9707, 1879]], dtype=np.int64)
        with torch.no_grad():
            want = lm(input_ids=torch.from_numpy(ids)).logits[0].numpy()
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "position_ids": np.arange(5, dtype=np.int64)[None]}
        for i in range(2):
            for kind in ("key", "value"):
                feeds[f"past_key_values.{i}.{kind}"] = np.zeros((1, 2, 0, 16), dtype=np.float32)
        got = ReferenceEvaluator(onnx.load(self.path)).run(["logits"], feeds)[0][0]
        self.assertLess(float(np.abs(got - want).max()), 1e-4)

    def test_reexport_replaces_its_own_export(self):
        from mempo_learner.export_onnx import export

        before = os.stat(self.path).st_ino
        export(self.dir)
        self.assertNotEqual(os.stat(self.path).st_ino, before)
        self.assertEqual(listing(os.path.join(self.dir, "onnx")), ["export.json", "model.onnx"])
        self.assertFalse([n for n in listing(self.dir) if n.startswith(".onnx")])


if __name__ == "__main__":
    unittest.main()
