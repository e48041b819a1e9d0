"""The torch side of `npm run bench:peer` (bench/peer.mjs): the same math as mempo's kernels, run
by verl's own functions where verl is installed (requirements-peers.txt: core_algos.py
compute_grpo_outcome_advantage, compute_policy_loss_vanilla; torch_functional.py
logprobs_from_logits_naive / _v2), else by torch transcriptions of them (checked against verl by
test/python/test_peer_verl.py), plus the fastest vectorised torch form of each that we know.
Runs as a child of peer.mjs: one JSON command per stdin line ({"case": ..., "dir": ..., "reps": n, "save": bool}), one JSON
answer per stdout line with each variant's per-call seconds; inputs are the .bin files peer.mjs
wrote into dir, outputs (save) go back there for the equality check.

Usage: python3 bench/peer.py THREADS
"""

import json
import os
import sys
import time
from collections import defaultdict

import numpy as np
import torch


def load(d, name, dtype, shape=None):
    a = np.fromfile(os.path.join(d, name + ".bin"), dtype=dtype)
    return torch.from_numpy(a if shape is None else a.reshape(shape))


# --- verl's functions: the installed package (requirements-peers.txt), else a transcription -------
# The transcriptions copy verl 0.9.1 (verl/trainer/ppo/core_algos.py, verl/utils/torch_functional.py)
# for machines without verl (Debian's torch 1.13 cannot host it); test/python/test_peer_verl.py
# checks each against the real function.

class transcribed:
    """verl's formulas copied into plain torch (used only when verl is not importable)."""

    @staticmethod
    def logprobs_naive(logits, labels):
        """verl logprobs_from_logits_naive: log_softmax, then gather."""
        logp = torch.nn.functional.log_softmax(logits, dim=-1)
        return torch.gather(logp, -1, labels.unsqueeze(-1)).squeeze(-1)

    @staticmethod
    def logprobs_v2(logits, labels):
        """verl logprobs_from_logits_v2 (its path without flash-attn, float32): logsumexp row by row."""
        logits_labels = torch.gather(logits, dim=-1, index=labels.unsqueeze(-1)).squeeze(-1)
        logsumexp_values = torch.stack([torch.logsumexp(row, dim=-1) for row in logits])
        return logits_labels - logsumexp_values

    @staticmethod
    def grpo_verl(scores, index, mask, eps=1e-6):
        """verl compute_grpo_outcome_advantage (norm_adv_by_std_in_grpo=True) from the per-trajectory
        scores (verl first sums token_level_rewards to them; both sides start from the scores here)."""
        scores = scores.clone()
        id2score = defaultdict(list)
        id2mean, id2std = {}, {}
        with torch.no_grad():
            bsz = scores.shape[0]
            idx = index.tolist()
            for i in range(bsz):
                id2score[idx[i]].append(scores[i])
            for k in id2score:
                if len(id2score[k]) == 1:
                    id2mean[k] = torch.tensor(0.0)
                    id2std[k] = torch.tensor(1.0)
                else:
                    t = torch.stack(id2score[k])
                    id2mean[k] = torch.mean(t)
                    id2std[k] = torch.std(t)
            for i in range(bsz):
                scores[i] = (scores[i] - id2mean[idx[i]]) / (id2std[idx[i]] + eps)
            return scores.unsqueeze(-1) * mask

    @staticmethod
    def masked_mean(values, mask):
        """verl torch_functional.masked_mean (axis=None)."""
        return (values * mask).sum() / (mask.sum() + 1e-8)

    @staticmethod
    def ppo_verl(log_prob, old_log_prob, advantages, response_mask, clip_low=0.2, clip_high=0.2, clip_c=3.0):
        """verl compute_policy_loss_vanilla (dual clip, loss_agg_mode token-mean), then backward."""
        masked_mean = transcribed.masked_mean
        log_prob = log_prob.detach().requires_grad_(True)
        negative_approx_kl = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
        ratio = torch.exp(negative_approx_kl)
        ppo_kl = masked_mean(-negative_approx_kl, response_mask)
        pg_losses1 = -advantages * ratio
        pg_losses2 = -advantages * torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
        clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
        pg_clipfrac = masked_mean(torch.gt(pg_losses2, pg_losses1).float(), response_mask)
        pg_losses3 = -advantages * clip_c
        clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
        pg_losses = torch.where(advantages < 0, clip_pg_losses2, clip_pg_losses1)
        pg_loss = masked_mean(pg_losses, response_mask)
        pg_loss.backward()
        return pg_loss.detach(), log_prob.grad, pg_clipfrac, ppo_kl.detach()


def verl_grpo(scores, index, mask, eps=1e-6):
    """verl's compute_grpo_outcome_advantage itself; scores as a [B, 1] token_level_rewards (it sums them)."""
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage
    adv, _ = compute_grpo_outcome_advantage(scores.view(-1, 1), mask, index.numpy(), epsilon=eps)
    return adv


def verl_ppo(log_prob, old_log_prob, advantages, response_mask, clip_low=0.2, clip_high=0.2, clip_c=3.0):
    """verl's compute_policy_loss_vanilla itself (token-mean), then backward."""
    from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla
    from verl.workers.config import ActorConfig
    cfg = ActorConfig(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1, clip_ratio=clip_low,
                      clip_ratio_low=clip_low, clip_ratio_high=clip_high, clip_ratio_c=clip_c)
    log_prob = log_prob.detach().requires_grad_(True)
    loss, metrics = compute_policy_loss_vanilla(old_log_prob, log_prob, advantages, response_mask.bool(),
                                                loss_agg_mode="token-mean", config=cfg)
    loss.backward()
    return (loss.detach(), log_prob.grad, torch.tensor(metrics["actor/pg_clipfrac"]),
            torch.tensor(metrics["actor/ppo_kl"]))


def verl_or_transcription():
    """(namespace of the verl variants, what it is): verl's own functions where importable."""
    try:
        import verl
        import verl.trainer.ppo.core_algos  # noqa: F401
        import verl.utils.torch_functional as verl_F
    except Exception as e:  # not installed, or it cannot import on this torch
        return transcribed, "torch transcriptions of verl 0.9.1 (verl not importable: %s: %s)" % (type(e).__name__, e)

    class real:
        logprobs_naive = staticmethod(verl_F.logprobs_from_logits_naive)
        logprobs_v2 = staticmethod(verl_F.logprobs_from_logits_v2)
        grpo_verl = staticmethod(verl_grpo)
        ppo_verl = staticmethod(verl_ppo)
    return real, "verl %s's own functions" % verl.__version__


VERL = transcribed  # the verl variants prepare() times; main() picks verl itself where importable


# --- gather: log_softmax(logits)[target] -------------------------------------------------------

def logprobs_vectorised(logits, labels):
    """One logsumexp over all rows (the v2 formula without its per-row loop)."""
    return torch.gather(logits, -1, labels.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)


# --- GRPO outcome advantage ----------------------------------------------------------------------

def group_norm_vectorised(values, index, groups, eps=1e-6):
    """Mean and unbiased std per group with index_add_ (singleton: mean 0, std 1), in float64."""
    v = values.double()
    count = torch.zeros(groups, dtype=torch.float64).index_add_(0, index, torch.ones_like(v))
    total = torch.zeros(groups, dtype=torch.float64).index_add_(0, index, v)
    mean = torch.where(count > 1, total / count.clamp(min=1), torch.zeros_like(total))
    centred = v - mean[index]
    sq = torch.zeros(groups, dtype=torch.float64).index_add_(0, index, centred * centred)
    std = torch.where(count > 1, torch.sqrt(sq / (count - 1).clamp(min=1)), torch.ones_like(sq))
    return centred / (std[index] + eps)


def grpo_vectorised(scores, index, mask, groups):
    adv = group_norm_vectorised(scores, index, groups).float()
    return adv.unsqueeze(-1) * mask


# --- the advantage stage: outcome + memory + final (docs/algorithm.md §5) -------------------------

def stage_vectorised(scores, index, groups, mask, rewards, mem_index, mem_groups, spans, alpha):
    B, T = mask.shape
    outcome = grpo_vectorised(scores, index, mask, groups)
    adv_m = group_norm_vectorised(rewards, mem_index, mem_groups).float()
    rows, starts, ends = spans[:, 0].long(), spans[:, 1].long(), spans[:, 2].long()
    lengths = ends - starts
    first = torch.repeat_interleave(rows * T + starts - (torch.cumsum(lengths, 0) - lengths), lengths)
    pos = first + torch.arange(int(lengths.sum()))
    memory = torch.zeros(B * T)
    memory[pos] = torch.repeat_interleave(adv_m, lengths)
    memory = memory.view(B, T)
    final = (outcome + alpha * memory) * mask
    return outcome, memory, final


# --- the cases -----------------------------------------------------------------------------------

def prepare(case, d):
    """(variants: name -> zero-argument callable, save: outputs -> files) for one case."""
    kind, meta = case["kind"], case
    if kind == "gather":
        R, V = meta["R"], meta["V"]
        logits = load(d, "logits", np.float32, (R, V))
        targets = load(d, "targets", np.int32).long()
        variants = {
            "naive": lambda: VERL.logprobs_naive(logits, targets),
            "v2": lambda: VERL.logprobs_v2(logits, targets),
            "vectorised": lambda: logprobs_vectorised(logits, targets),
        }
        return variants, lambda out: {"out": out}
    if kind in ("grpo", "stage"):
        B, T, G = meta["B"], meta["T"], meta["groups"]
        scores = load(d, "scores", np.float64)
        index = load(d, "groups", np.int32).long()
        mask = load(d, "mask", np.uint8, (B, T)).float()
        if kind == "grpo":
            variants = {"vectorised": lambda: grpo_vectorised(scores, index, mask, G)}
            if B <= 4096:
                variants["verl"] = lambda: VERL.grpo_verl(scores.float(), index, mask)
            return variants, lambda out: {"out": out}
        rewards = load(d, "rewards", np.float64)
        mem_index = load(d, "memGroups", np.int32).long()
        spans = load(d, "spans", np.int32, (-1, 3))
        args = (scores, index, G, mask, rewards, mem_index, meta["memGroups"], spans, meta["alpha"])
        return {"vectorised": lambda: stage_vectorised(*args)}, lambda out: {"outcome": out[0], "memory": out[1], "final": out[2]}
    if kind == "ppo":
        R, C = meta["rows"], meta["cols"]
        logp = load(d, "logp", np.float32, (R, C))
        old = load(d, "oldLogp", np.float32, (R, C))
        adv = load(d, "advantages", np.float32, (R, C))
        mask = load(d, "mask", np.uint8, (R, C)).float()
        return {"verl": lambda: VERL.ppo_verl(logp, old, adv, mask)}, lambda out: {"loss": out[0].reshape(1).double(), "grad": out[1]}
    raise ValueError("unknown case kind " + kind)


def main():
    global VERL
    torch.set_num_threads(int(sys.argv[1]))
    VERL, what = verl_or_transcription()
    sys.stderr.write("bench/peer.py: the verl variants are %s\n" % what)
    torch.set_grad_enabled(True)
    cache = {}
    for line in sys.stdin:
        cmd = json.loads(line)
        key = cmd["case"]["name"]
        if key not in cache:
            cache.clear()  # one case's inputs in memory at a time
            cache[key] = prepare(cmd["case"], cmd["dir"])
        variants, save = cache[key]
        answer = {"times": {}}
        for name, fn in variants.items():
            out = fn()  # warm-up (allocator, lazy init)
            if cmd.get("save"):
                for part, t in save(out).items():
                    t.detach().contiguous().float().numpy().tofile(os.path.join(cmd["dir"], "torch-%s-%s.bin" % (name, part)))
            times = []
            for _ in range(cmd["reps"]):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            answer["times"][name] = times
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
