"""TRL itself (requirements-peers.txt) on a real mempo batch: one GRPOTrainer step on the CPU, on
the tiny Qwen3 of the test zoo (zoo.py), with a `rollout_func` that returns mempo's exported
trajectories (batch.trl.json, docs/export.md) instead of generating.

The rollout_func and reward function are docs/export.md's, run as written. What is the same,
checked: TRL takes the prompt and completion ids and the env mask mempo exported
unchanged (the tensors its loss reads, row by row), and its GRPO advantages equal mempo's outcome
advantages when the reward function returns mempo's score: both normalise within the question's
group with the unbiased std; TRL's epsilon is fixed at 1e-4, so the rollout runs with `--eps 1e-4`.
The step runs: the loss is finite and the weights change.

Where they differ: TRL has one advantage per completion, so MemPO's memory advantage (per mem span,
docs/algorithm.md §5) cannot reach its loss: only the outcome part (the GRPO arm, alpha = 0) is
comparable. An excluded trajectory is a `None` reward here, which TRL drops from its group's mean
and std like mempo (checked by scoring the batch again with rows marked excluded); but a group
left with one scored member gets advantage 0 in TRL (its std is NaN) and the score itself in
mempo (a group of one: mean 0, std 1), also checked. The tokens are the embedded model's ids, which the Qwen3 vocabulary covers but does not
share: the test checks TRL's plumbing and arithmetic on mempo's data, not that the model learns.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # no __pycache__ beside peer_batch.py or bench/peer.py
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_batch  # noqa: E402

GROUP = 4  # -n in peer_batch.ROLLOUT: trajectories per question, TRL's num_generations

# mempo's group normalisation kernel on one value per row (T = 1, mask 1).
GRPO_ROWS_JS = r"""
let s = '';
process.stdin.on('data', (d) => { s += d; }).on('end', () => {
  const c = JSON.parse(s);
  const a = m.grpoOutcomeAdvantage(Float64Array.from(c.scores), c.groups, new Uint8Array(c.scores.length).fill(1), 1,
    { eps: c.eps });
  process.stdout.write(JSON.stringify(Array.from(a)));
});
"""


class TrlStepOnMempoBatch(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        peer_batch.require_peer(cls(), ["trl", "trl.trainer.grpo_trainer", "datasets", "accelerate"])
        cls.tmp = tempfile.mkdtemp(prefix="mempo-peer-trl-")
        run = peer_batch.rollout(os.path.join(cls.tmp, "run"), "--eps", "1e-4")
        with open(os.path.join(run, "batch.trl.json")) as f:
            cls.trl = json.load(f)
        with open(os.path.join(run, "batch.jsonl")) as f:
            cls.records = [json.loads(line) for line in f if line.strip()]
        cls.model_dir = os.path.join(cls.tmp, "qwen3")
        r = subprocess.run([sys.executable, os.path.join(peer_batch.ROOT, "test", "python", "zoo.py"), "qwen3",
                            cls.model_dir], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"zoo.py qwen3 failed (exit {r.returncode}):\n{r.stderr[-4000:]}")
        cls.step()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def step(cls):
        """One GRPOTrainer step; records what rollout_func returned and what TRL made of it."""
        import torch
        from datasets import Dataset
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from trl import GRPOConfig, GRPOTrainer

        # docs/export.md's rollout_func and reward function, run as written (on this run's file).
        with open(os.path.join(peer_batch.ROOT, "docs", "export.md")) as f:
            blocks = [b for b in re.findall(r"```python\n(.*?)```", f.read(), re.S) if "def rollout_func" in b]
        assert len(blocks) == 1, "docs/export.md has one rollout_func block"
        ns = {}
        code = blocks[0].replace('"runs/r1/batch.trl.json"', repr(os.path.join(cls.tmp, "run", "batch.trl.json")))
        exec(compile(code, "docs/export.md", "exec"), ns)  # noqa: S102 - the project's own docs
        ro = cls.trl["rollout"]
        row_of = {(u, s): i for i, (u, s) in enumerate(zip(ro["uid"], ro["sample"]))}
        cls.served = []  # mempo row of each completion, in TRL's order

        def rollout_func(prompts, trainer):
            out = ns["rollout_func"](prompts, trainer)
            cls.served.extend(row_of[(u, s)] for u, s in zip(out["uid"], out["sample"]))
            return out

        class Recording(GRPOTrainer):
            def _generate_and_score_completions(self, inputs):
                out = super()._generate_and_score_completions(inputs)
                cls.generated = {k: (v.detach().clone() if torch.is_tensor(v) else v) for k, v in out.items()}
                return out

        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(cls.model_dir, dtype=torch.float32)
        cls.before = {n: p.detach().clone() for n, p in model.named_parameters()}
        # One optimizer step over the whole batch (one generation batch), in micro-batches of one
        # group: the logits over Qwen3's 151,936-word vocabulary stay ~0.5 GB instead of ~2 GB.
        args = GRPOConfig(output_dir=os.path.join(cls.tmp, "out"), per_device_train_batch_size=GROUP,
                          gradient_accumulation_steps=len(ro["score"]) // GROUP, num_generations=GROUP,
                          max_steps=1, learning_rate=1e-3, beta=0.0, use_cpu=True, bf16=False, report_to="none",
                          save_strategy="no", logging_steps=1, seed=0, dataloader_num_workers=0)
        os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
        trainer = Recording(model=model, reward_funcs=ns["mempo_score"], args=args,
                            train_dataset=Dataset.from_dict({"prompt": list(ns["rows"])}),
                            processing_class=AutoTokenizer.from_pretrained(cls.model_dir), rollout_func=rollout_func)
        trainer.train()
        cls.model = trainer.model
        cls.log = [h for h in trainer.state.log_history if "loss" in h]
        cls.score_with_exclusions(trainer, ns, rollout_func)

    @classmethod
    def score_with_exclusions(cls, trainer, ns, rollout_func):
        """TRL scores the batch again (no step: with generation aligned to the optimizer step it
        runs no forward pass here) after marking rows excluded in the rollout_func's data: one row
        of the first question whose scores differ, three of the next one, leaving it a single
        scored completion. The deques are back at their first sample after the full batch."""
        ro = ns["ro"]
        questions = list(ns["rows"])
        varied = [q for q in questions if len({ro["score"][i] for i in ns["rows"][q]}) > 1]
        lone = next(q for q in questions if q != varied[0] and any(ro["score"][i] != 0 for i in ns["rows"][q]))
        lone_rows = list(ns["rows"][lone])
        keep = next(i for i in lone_rows if ro["score"][i] != 0)
        cls.excluded_rows = {list(ns["rows"][varied[0]])[0]} | {i for i in lone_rows if i != keep}
        cls.lone_row = keep
        saved = list(ro["excluded"])
        for i in cls.excluded_rows:
            ro["excluded"][i] = True
        step_served, step_generated = list(cls.served), cls.generated  # the step's record stays
        try:
            out = trainer._generate_and_score_completions([{"prompt": q} for q in questions for _ in range(GROUP)])
        finally:
            ro["excluded"][:] = saved
        cls.excluded_served = cls.served[len(step_served):]
        cls.excluded_advantages = out["advantages"].detach().clone()
        cls.served, cls.generated = step_served, step_generated

    def test_batch_is_one_the_comparison_can_fail_on(self):
        ro = self.trl["rollout"]
        self.assertEqual(len(ro["question"]), len(set(ro["question"])) * GROUP)
        self.assertFalse(any(ro["excluded"]))
        self.assertGreaterEqual(len(set(ro["score"])), 3, ro["score"])
        self.assertTrue(any(0 in m for m in ro["env_mask"]), "tool observations (env_mask 0) are in the batch")

    def test_rollout_func_served_every_row_once(self):
        self.assertEqual(sorted(self.served), list(range(len(self.trl["rollout"]["score"]))))

    def test_trl_trains_on_the_exported_ids_and_env_mask_unchanged(self):
        g, ro = self.generated, self.trl["rollout"]
        for k, row in enumerate(self.served):
            with self.subTest(row=row):
                prompt = g["prompt_ids"][k][g["prompt_mask"][k].bool()].tolist()
                self.assertEqual(prompt, ro["prompt_ids"][row])
                n = len(ro["completion_ids"][row])
                self.assertEqual(g["completion_ids"][k][:n].tolist(), ro["completion_ids"][row])
                self.assertEqual(int(g["completion_mask"][k].sum()), n)
                self.assertEqual(g["tool_mask"][k][:n].tolist(), ro["env_mask"][row])

    def test_trl_advantages_equal_mempos_outcome_advantages(self):
        import torch
        ours = []
        for row in self.served:
            rec = self.records[row]
            first = rec["responseMask"].index(1)
            ours.append(rec["outcomeAdvantage"][first])
        theirs = self.generated["advantages"]
        self.assertTrue(bool((theirs != 0).any()))
        torch.testing.assert_close(theirs, torch.tensor(ours), rtol=1e-5, atol=1e-6)
        # The memory part is not among them: mempo's final advantage differs on the mem spans.
        self.assertTrue(any(any(m != 0 for m in r["memoryAdvantage"]) for r in self.records))

    def test_excluded_rows_as_none_rewards_leave_the_groups_as_in_mempo(self):
        """mempo normalises each group over its non-excluded trajectories (docs/algorithm.md §5) and
        gives the excluded advantage 0; TRL does the same with a None reward, except for a group
        left with one scored completion: TRL 0, mempo the score / (1 + eps)."""
        import torch
        ro, served = self.trl["rollout"], self.excluded_served
        self.assertEqual(sorted(served), list(range(len(ro["score"]))))
        kept = [i for i in range(len(ro["score"])) if i not in self.excluded_rows]
        ours = peer_batch.node_json(GRPO_ROWS_JS, {"scores": [ro["score"][i] for i in kept],
                                                   "groups": [ro["uid"][i] for i in kept], "eps": 1e-4})
        mempo = {i: a for i, a in zip(kept, ours)}
        theirs = dict(zip(served, self.excluded_advantages.tolist()))
        for i in self.excluded_rows:
            self.assertEqual(theirs[i], 0.0, f"excluded row {i}")
        self.assertNotEqual(mempo[self.lone_row], 0.0)
        self.assertAlmostEqual(mempo[self.lone_row], ro["score"][self.lone_row] / (1 + 1e-4), places=6)
        self.assertEqual(theirs[self.lone_row], 0.0, "TRL: a group of one scored completion has no advantage")
        rest = [i for i in kept if i != self.lone_row]
        torch.testing.assert_close(torch.tensor([theirs[i] for i in rest]), torch.tensor([mempo[i] for i in rest]),
                                   rtol=1e-5, atol=1e-6)
        self.assertTrue(any(theirs[i] != self.generated["advantages"][self.served.index(i)] for i in rest),
                        "the exclusion changed the advantages of its group")

    def test_the_step_ran(self):
        import math
        self.assertEqual(len(self.log), 1, self.log)
        self.assertTrue(math.isfinite(self.log[0]["loss"]), self.log)
        changed = [n for n, p in self.model.named_parameters() if not bool((p.detach() == self.before[n]).all())]
        self.assertGreater(len(changed), 0)
        self.assertIn("model.embed_tokens.weight", changed)


if __name__ == "__main__":
    unittest.main()
