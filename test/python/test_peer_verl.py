"""verl itself (requirements-peers.txt) on a real mempo batch: batch.verl.safetensors of a rollout
(peer_batch.py) goes through verl's own functions, and their numbers must equal mempo's.

Where both compute the same thing, compared here within float32 tolerance:
- the GRPO outcome advantage: verl's compute_grpo_outcome_advantage on the exported
  token_level_scores, response_mask and uid groups equals mempo's `outcome_advantages` (eps 1e-6,
  std unbiased, a group of one: mean 0, std 1, in both), and with norm_adv_by_std_in_grpo=False it
  equals mempo's grpoOutcomeAdvantage kernel with normByStd false;
- the PPO policy loss: verl's actor loss (verl.workers.utils.losses.ppo_loss: the vanilla clipped
  surrogate with dual clip, agg_loss, plus kl_loss_coef times kl_penalty aggregated the same way)
  equals mempo's ppoPolicyLoss kernel (dist/, through node) in the three loss_agg_modes mempo
  supports, for the four KL estimators: loss, d loss / d log-prob, clip fraction, ppo_kl, KL;
  also on a micro-batch with the mini-batch's global normalisers (batch_num_tokens /
  global_batch_size against globalTokens / globalSequences);
- bench/peer.py's torch transcriptions of verl (the fallback when verl is absent) equal verl;
- docs/export.md's "Keeping mempo's advantages in verl" code runs on verl as written and its
  estimator hands mempo's final advantages through unchanged.

Where they differ: MemPO's memory advantage (docs/algorithm.md §5) is not in verl. mempo's final
`advantages` are outcome + alpha * memory; verl's GRPO reproduces only the outcome part, and the
final advantages differ from it exactly on the mem-span tokens that carry a memory advantage
(checked below). verl trains on them only when they come in precomputed (docs/export.md, "Keeping
mempo's advantages in verl"). mempo leaves excluded (failed) trajectories out of the groups; verl
has no such flag, so the rows are dropped before its call, as docs/export.md says (this batch has
none: checked). verl's seq-mean-token-mean divides by (tokens + 1e-8), mempo by tokens: a 1e-8
relative difference, inside the tolerance.
"""
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # no __pycache__ beside peer_batch.py or bench/peer.py
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_batch  # noqa: E402

AGG_MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean")
KL_TYPES = ("k1", "k2", "k3", "low_var_kl")

# Calls ppoPolicyLoss once per entry of `calls` (typed arrays from JSON lists); float32 values
# are exact in JSON doubles, so both sides see the same inputs bit for bit.
PPO_JS = r"""
let s = '';
process.stdin.on('data', (d) => { s += d; }).on('end', () => {
  const out = JSON.parse(s).map((c) => {
    const inp = { ...c, logp: Float32Array.from(c.logp), oldLogp: Float32Array.from(c.oldLogp),
      advantages: Float32Array.from(c.advantages), mask: Uint8Array.from(c.mask) };
    if (c.refLogp) inp.refLogp = Float32Array.from(c.refLogp);
    const r = m.ppoPolicyLoss(inp);
    return { loss: r.loss, grad: Array.from(r.grad), clipFrac: r.clipFrac, approxKl: r.approxKl, kl: r.kl ?? null };
  });
  process.stdout.write(JSON.stringify(out));
});
"""

GRPO_JS = r"""
let s = '';
process.stdin.on('data', (d) => { s += d; }).on('end', () => {
  const c = JSON.parse(s);
  const a = m.grpoOutcomeAdvantage(Float32Array.from(c.scores), c.groups, Uint8Array.from(c.mask), c.T, c.opts);
  process.stdout.write(JSON.stringify(Array.from(a)));
});
"""


class VerlOnMempoBatch(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        peer_batch.require_peer(cls(), ["verl.trainer.ppo.core_algos", "verl.workers.utils.losses"])
        import torch
        from safetensors import safe_open
        from safetensors.torch import load_file

        cls.torch = torch
        cls.tmp = tempfile.mkdtemp(prefix="mempo-peer-verl-")
        path = os.path.join(peer_batch.rollout(os.path.join(cls.tmp, "run")), "batch.verl.safetensors")
        cls.t = load_file(path)
        with safe_open(path, "pt") as f:
            cls.meta = f.metadata()
        cls.uid = json.loads(cls.meta["mempo.uid"])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def close(self, actual, expected, what, rtol=1e-5, atol=1e-6):
        self.torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}")

    # --- the batch is one the comparison can fail on ---------------------------------------------

    def test_batch_has_varied_scores_and_memory_advantages(self):
        t = self.t
        self.assertFalse(bool(t["excluded"].any()), "no excluded rows: verl would need them dropped")
        self.assertGreaterEqual(len(set(t["scores"].tolist())), 3, t["scores"].tolist())
        self.assertTrue(bool((t["outcome_advantages"] != 0).any()))
        self.assertTrue(bool((t["memory_advantages"] != 0).any()))
        # verl's estimators sum token_level_scores to the outcome score: one score per row.
        self.close(t["token_level_scores"].sum(-1), t["scores"], "token_level_scores summed")

    # --- GRPO outcome advantage ------------------------------------------------------------------

    def test_grpo_outcome_advantage_equals_verls(self):
        import numpy as np
        from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage
        t = self.t
        keep = ~t["excluded"]
        adv, ret = compute_grpo_outcome_advantage(
            token_level_rewards=t["token_level_scores"][keep], response_mask=t["response_mask"][keep].float(),
            index=np.array(self.uid, dtype=object)[keep.numpy()])
        self.close(adv, t["outcome_advantages"][keep], "verl GRPO vs mempo outcome_advantages")
        self.close(ret, t["outcome_advantages"][keep], "verl GRPO returns")

    def test_grpo_without_std_and_other_eps_equals_mempo_kernel(self):
        import numpy as np
        from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage
        t = self.t
        B, T = t["response_mask"].shape
        for norm, eps in ((False, 1e-6), (True, 1e-4)):
            with self.subTest(norm_by_std=norm, eps=eps):
                ours = peer_batch.node_json(GRPO_JS, {
                    "scores": t["scores"].tolist(), "groups": self.uid, "mask": t["response_mask"].flatten().tolist(),
                    "T": T, "opts": {"eps": eps, "normByStd": norm}})
                adv, _ = compute_grpo_outcome_advantage(
                    token_level_rewards=t["token_level_scores"], response_mask=t["response_mask"].float(),
                    index=np.array(self.uid, dtype=object), epsilon=eps, norm_adv_by_std_in_grpo=norm)
                self.close(adv, self.torch.tensor(ours).view(B, T), "verl GRPO vs grpoOutcomeAdvantage")

    def test_final_advantage_is_verls_outcome_plus_the_memory_part_verl_lacks(self):
        import numpy as np
        from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage
        t = self.t
        adv, _ = compute_grpo_outcome_advantage(
            token_level_rewards=t["token_level_scores"], response_mask=t["response_mask"].float(),
            index=np.array(self.uid, dtype=object))
        mem = t["memory_advantages"]
        self.close(t["advantages"], adv + mem, "final = verl outcome + memory (alpha 1)")
        differs = (t["advantages"] - adv).abs() > 1e-4
        self.assertTrue(bool(differs.any()))
        self.assertTrue(bool((differs == (mem.abs() > 1e-4)).all()), "the final differs from verl exactly where memory is")

    def test_docs_estimator_keeps_mempos_advantages(self):
        """docs/export.md's "Keeping mempo's advantages in verl" block, run as written: its loader
        builds a DataProto and its registered estimator, called as verl's compute_advantage calls a
        custom one (ray_trainer.py: token_level_rewards, response_mask, config, index = uid), returns
        mempo's final advantages unchanged. (compute_advantage itself lives in ray_trainer.py, whose
        imports need verl's server stack: fastapi, opentelemetry, ...; not installed here.)"""
        import re
        from verl.trainer.ppo.core_algos import get_adv_estimator_fn
        with open(os.path.join(peer_batch.ROOT, "docs", "export.md")) as f:
            blocks = [b for b in re.findall(r"```python\n(.*?)```", f.read(), re.S) if "register_adv_est" in b]
        self.assertEqual(len(blocks), 1)
        ns = {}
        exec(compile(blocks[0], "docs/export.md", "exec"), ns)  # noqa: S102 - the project's own docs
        path = os.path.join(self.tmp, "run", "batch.verl.safetensors")
        data = ns["load_mempo_batch"](path)
        keep = ~self.t["excluded"]
        self.assertEqual(len(data), int(keep.sum()))
        self.assertEqual(list(data.non_tensor_batch["uid"]), [u for u, k in zip(self.uid, keep.tolist()) if k])
        adv, ret = get_adv_estimator_fn("mempo")(token_level_rewards=data.batch["token_level_rewards"],
                                                 response_mask=data.batch["response_mask"], config=None,
                                                 index=data.non_tensor_batch["uid"])
        self.assertTrue(self.torch.equal(adv, self.t["advantages"][keep]))
        self.assertTrue(self.torch.equal(ret, self.t["advantages"][keep]))
        for k in ("response_mask", "old_log_probs", "input_ids", "attention_mask", "position_ids"):
            self.assertTrue(self.torch.equal(data.batch[k], self.t[k][keep]), k)

    # --- PPO policy loss through verl's actor loss -----------------------------------------------

    def verl_actor_loss(self, rows, logp, ref, agg, kl_type, kl_coef, batch_num_tokens=None, global_batch_size=None):
        """verl.workers.utils.losses.ppo_loss on rows of the batch, the current log-probs given
        packed as its model output (no padding, shifted: the log-prob of response token k sits at
        the position before it); returns loss, grad (B x T), metrics."""
        torch = self.torch
        from tensordict import NonTensorData, TensorDict
        from verl.workers.config import ActorConfig
        from verl.workers.utils.losses import ppo_loss
        t = {k: v[rows] for k, v in self.t.items() if v.dim() == 2}
        logp, ref = logp[rows], ref[rows]
        B, T = t["responses"].shape
        P = t["prompts"].shape[1]
        att = t["attention_mask"]
        plen, rlen = att[:, :P].sum(1), att[:, P:].sum(1)
        ends = (plen + rlen).cumsum(0)
        packed = torch.zeros(int(ends[-1]))
        for b in range(B):
            s = int(ends[b] - rlen[b] - 1)
            packed[s:s + int(rlen[b])] = logp[b, :int(rlen[b])]
        packed.requires_grad_(True)
        cfg = ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, clip_ratio=0.2,
                          clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=3.0, loss_agg_mode=agg,
                          use_kl_loss=True, kl_loss_type=kl_type, kl_loss_coef=kl_coef)
        data = TensorDict({"prompts": t["prompts"], "responses": t["responses"], "attention_mask": att,
                           "response_mask": t["response_mask"], "old_log_probs": t["old_log_probs"],
                           "advantages": t["advantages"], "ref_log_prob": ref}, batch_size=[B])
        data["dp_size"] = NonTensorData(1)
        data["batch_num_tokens"] = NonTensorData(batch_num_tokens)
        data["global_batch_size"] = NonTensorData(global_batch_size)
        loss, metrics = ppo_loss(cfg, {"log_probs": packed}, data)
        loss.backward()
        grad = torch.zeros(B, T)
        for b in range(B):
            s = int(ends[b] - rlen[b] - 1)
            grad[b, :int(rlen[b])] = packed.grad[s:s + int(rlen[b])]
        values = {k: (v.aggregate() if hasattr(v, "aggregate") else v) for k, v in metrics.items()}
        return loss.detach(), grad, {k: float(v) for k, v in values.items()}

    def inputs(self):
        """Current and reference log-probs around the sampler's: wide enough that both clip
        bounds, the dual clip (ratio > 3 on a negative advantage) and the k3 clamp all occur."""
        torch = self.torch
        g = torch.Generator().manual_seed(44)
        old, mask = self.t["old_log_probs"], self.t["response_mask"]
        logp = (old + torch.randn(old.shape, generator=g) * 0.6) * mask
        ref = (old + torch.randn(old.shape, generator=g) * 0.4) * mask
        ratio, adv = torch.exp(logp - old), self.t["advantages"]
        on = mask.bool()
        self.assertTrue(bool((on & (ratio > 1.28) & (adv > 0)).any()) and bool((on & (ratio < 0.8) & (adv < 0)).any()))
        self.assertTrue(bool((on & (ratio > 3) & (adv < 0)).any()), "the dual clip is exercised")
        return logp, ref

    def mempo_loss(self, rows, logp, ref, agg, kl_type, kl_coef, **glob):
        t = self.t
        return dict(logp=logp[rows].flatten().tolist(), oldLogp=t["old_log_probs"][rows].flatten().tolist(),
                    advantages=t["advantages"][rows].flatten().tolist(), mask=t["response_mask"][rows].flatten().tolist(),
                    rows=len(rows), cols=logp.shape[1], clipLow=0.2, clipHigh=0.28, clipC=3, aggMode=agg,
                    refLogp=ref[rows].flatten().tolist(), klType=kl_type, klCoef=kl_coef, **glob)

    def compare(self, ours, verl, what):
        loss, grad, metrics = verl
        torch = self.torch
        self.close(torch.tensor(ours["loss"], dtype=torch.float32), loss, what + " loss")
        self.close(torch.tensor(ours["grad"]).view(grad.shape), grad, what + " grad", atol=1e-7)
        # float(): a metric that is exactly 0 arrives from JSON as the int 0 (the shipped RL model's batch clips nothing)
        scalar = lambda x: torch.tensor(float(x), dtype=torch.float32)
        self.close(scalar(ours["kl"]), scalar(metrics["kl_loss"]), what + " kl")
        self.close(scalar(ours["clipFrac"]), scalar(metrics["actor/pg_clipfrac"]), what + " clipfrac")
        self.close(scalar(ours["approxKl"]), scalar(metrics["actor/ppo_kl"]), what + " ppo_kl")

    def test_policy_loss_equals_verls_actor_loss(self):
        logp, ref = self.inputs()
        rows = list(range(self.t["responses"].shape[0]))
        cases = [(agg, kl) for agg in AGG_MODES for kl in KL_TYPES]
        ours = peer_batch.node_json(PPO_JS, [self.mempo_loss(rows, logp, ref, agg, kl, 0.1) for agg, kl in cases])
        for (agg, kl), mine in zip(cases, ours):
            with self.subTest(agg=agg, kl=kl):
                verl = self.verl_actor_loss(rows, logp, ref, agg, kl, 0.1)
                self.assertGreater(verl[2]["actor/pg_clipfrac_lower"], 0)
                self.compare(mine, verl, f"{agg}/{kl}")

    def test_micro_batch_with_global_normalisers_equals_verls(self):
        logp, ref = self.inputs()
        mask = self.t["response_mask"]
        tokens = int(mask.sum())
        sequences = int((mask.sum(-1) > 0).sum())
        rows = list(range(5, 12))  # a micro-batch of the mini-batch (the whole batch)
        calls, verls = [], []
        for agg in AGG_MODES:
            glob = {"globalTokens": tokens} if agg == "token-mean" else {"globalSequences": sequences}
            calls.append(self.mempo_loss(rows, logp, ref, agg, "low_var_kl", 0.05, **glob))
            verls.append(self.verl_actor_loss(rows, logp, ref, agg, "low_var_kl", 0.05, batch_num_tokens=tokens,
                                              global_batch_size=sequences))
        for agg, mine, verl in zip(AGG_MODES, peer_batch.node_json(PPO_JS, calls), verls):
            with self.subTest(agg=agg):
                self.compare(mine, verl, f"micro-batch {agg}")

    # --- bench/peer.py's transcriptions ----------------------------------------------------------

    def test_bench_peer_transcriptions_equal_verl(self):
        """bench/peer.py times verl's functions, and its own transcription of them where verl is not
        installed: the transcription must be what verl computes."""
        torch = self.torch
        sys.path.insert(0, os.path.join(peer_batch.ROOT, "bench"))
        try:
            import peer
        finally:
            sys.path.pop(0)
        import verl.utils.torch_functional as verl_F
        from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage
        g = torch.Generator().manual_seed(3)
        logits = torch.randn(37, 501, generator=g) * 4
        labels = torch.randint(0, 501, (37,), generator=g)
        self.close(peer.transcribed.logprobs_naive(logits, labels), verl_F.logprobs_from_logits_naive(logits, labels), "naive")
        self.close(peer.transcribed.logprobs_v2(logits, labels), verl_F.logprobs_from_logits_v2(logits, labels), "v2")

        t = self.t
        index = torch.tensor([sorted(set(self.uid)).index(u) for u in self.uid])
        mask = t["response_mask"].float()
        ref_adv, _ = compute_grpo_outcome_advantage(t["token_level_scores"], mask, index.numpy())
        self.close(peer.transcribed.grpo_verl(t["scores"], index, mask), ref_adv, "grpo")
        self.close(peer.verl_grpo(t["scores"], index, mask), ref_adv, "bench's verl call")

        logp, _ = self.inputs()
        loss, grad, metrics = self.verl_actor_loss(list(range(len(self.uid))), logp, self.t["old_log_probs"],
                                                   "token-mean", "k1", 0.0)
        for name, fn in (("transcribed", peer.transcribed.ppo_verl), ("verl", peer.verl_ppo)):
            with self.subTest(bench=name):
                # bench/peer.py uses clip 0.2 both sides; the actor loss above clips high at 0.28.
                b_loss, b_grad, b_clip, b_kl = fn(logp, t["old_log_probs"], t["advantages"], mask, clip_high=0.28)
                self.close(b_loss, loss, name + " loss")
                self.close(b_grad, grad, name + " grad", atol=1e-7)
                self.close(b_kl, torch.tensor(metrics["actor/ppo_kl"]), name + " ppo_kl")


if __name__ == "__main__":
    unittest.main()
