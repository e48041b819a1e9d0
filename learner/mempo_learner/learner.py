"""The learner's state (docs/learner.md): the trained policy, the frozen reference policy, AdamW,
the pending forward that `backward` differentiates, and checkpoints."""
import contextlib
import math
import os
import stat
from typing import List, Optional, Tuple

import numpy as np
import torch

from .checkpoint import LEGACY_PICKLE, STATE_JSON, STATE_TENSORS, load_state, save_state
from .errors import LearnerError, bad
from .hf import HfModel, is_hf
from .limits import RequestLimits
from .manifest import ADDED_BY_MEMPO, LEARNER, write_manifest
from .save_dir import check_path, write_dir
from .tiny import TinyModel, is_tiny, manifest_name

PROTOCOL = 1


def too_large(message: str) -> LearnerError:
    return LearnerError("bad_request", message, 413)


def load_model(model_dir: str):
    if not os.path.isdir(model_dir):
        raise ValueError(f"--model {model_dir}: not a directory")
    if is_tiny(model_dir):
        return TinyModel(model_dir)
    if is_hf(model_dir):
        return HfModel(model_dir)
    raise ValueError(f"--model {model_dir}: neither model.onnx with a mempo-tiny config.json "
                     "(mempo_prev_token_heads) nor Hugging Face weights")


def _number(p: dict, key: str, lo: float, hi: float = math.inf, lo_open: bool = False) -> float:
    v = p.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise bad(f"optim_step: {key} must be a finite number, received {v!r}")
    if v < lo or (lo_open and v == lo) or v > hi:
        raise bad(f"optim_step: {key} = {v} is out of range")
    return float(v)


class Learner:
    def __init__(self, model_dir: str, device: str = "cpu", dtype: str = "fp32", seed: int = 0,
                 chunk_tokens: int = 16384, limits: RequestLimits = RequestLimits()):
        self.device = torch.device(device)
        self.dtype = dtype
        self.seed = seed
        self.chunk_tokens = chunk_tokens
        torch.manual_seed(seed)
        self.model = load_model(model_dir)
        self.limits = limits.resolved(self.model.max_context)
        self.model.lm.to(self.device).train(False)  # no dropout in these models; eval semantics
        named = [(n, p) for n, p in self.model.lm.named_parameters() if p.requires_grad]
        self.param_names = [n for n, _ in named]
        self.params = [p for _, p in named]
        self.opt = torch.optim.AdamW(self.params, lr=0.0)
        self.reference_dir = os.path.abspath(model_dir)
        self.reference = None
        # data parallel (dist.py): this process computes its share of every chunk's rows
        self.rank, self.world = 0, 1
        self.step = 0
        self.next_id = 1
        # (forward_id, logp size, tokens, [(chunk logp with its graph, where it goes in logp)])
        self.pending: Optional[Tuple[int, int, int, List[Tuple[torch.Tensor, np.ndarray]]]] = None

    def info(self) -> dict:
        return {"protocol": PROTOCOL, "learner": f"mempo_learner (torch, {self.model.kind})",
                "model": self.model.model_dir, "parameters": sum(p.numel() for p in self.params),
                "device": str(self.device), "dtype": self.dtype, "step": self.step, "torch": torch.__version__,
                "processes": self.world, "limits": {
                    "max_forward_tokens": self.limits.max_forward_tokens,
                    "max_forward_samples": self.limits.max_forward_samples,
                    "max_graph_tokens": self.limits.max_graph_tokens}}

    def _policy(self, name: str):
        if name == "current":
            return self.model.lm
        if name != "reference":
            raise bad(f"forward: policy must be \"current\" or \"reference\", received {name!r}")
        if self.reference is None:  # the starting weights, loaded again from their directory
            ref = type(self.model)(self.reference_dir).lm.to(self.device).train(False)
            self.reference = ref.requires_grad_(False)
        return self.reference

    def _autocast(self):
        if self.dtype == "bf16":
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _chunks(self, lengths: np.ndarray) -> List[List[int]]:
        """Samples longest first, grouped while (count x longest) stays within chunk_tokens."""
        order = sorted(range(len(lengths)), key=lambda i: (-int(lengths[i]), i))
        chunks: List[List[int]] = []
        for i in order:
            if chunks and (len(chunks[-1]) + 1) * int(lengths[chunks[-1][0]]) <= self.chunk_tokens:
                chunks[-1].append(i)
            else:
                chunks.append([i])
        return chunks

    def _plan(self, lengths: np.ndarray) -> List[Tuple[List[int], int]]:
        """This rank's (samples, padded length) per chunk of the whole request: the rows of every
        chunk dealt round the ranks, the turn carried from chunk to chunk so that one-sample chunks
        spread too. A row keeps its chunk's padded length, so each log-prob is computed on the same
        shapes as by one process (trimming the padding moves them by ~3e-6)."""
        plan, turn = [], 0
        for chunk in self._chunks(lengths):
            mine = [i for j, i in enumerate(chunk) if (turn + j) % self.world == self.rank]
            turn += len(chunk)
            if mine:
                plan.append((mine, int(lengths[chunk[0]])))
        return plan

    def _check_samples(self, ids, lengths, starts) -> None:
        for name, a in (("ids", ids), ("lengths", lengths), ("target_start", starts)):
            if a is None:
                raise bad(f"forward: the frame has no tensor {name}")
            if a.dtype != np.int32 or a.ndim != 1:
                raise bad(f"forward: {name} must be I32 of rank 1, received {a.dtype} {list(a.shape)}")
        lim = self.limits
        if lengths.size > lim.max_forward_samples:
            raise too_large(f"forward: {lengths.size} samples, over the limit of {lim.max_forward_samples} "
                            "(max_forward_samples in /info, --max-forward-samples)")
        if ids.size > lim.max_forward_tokens:
            raise too_large(f"forward: {ids.size} tokens, over the limit of {lim.max_forward_tokens} "
                            "(max_forward_tokens in /info, --max-forward-tokens)")
        if lengths.shape != starts.shape:
            raise bad(f"forward: lengths [{lengths.size}] and target_start [{starts.size}] differ in size")
        if int(lengths.astype(np.int64).sum()) != ids.size:
            raise bad(f"forward: lengths sum to {int(lengths.astype(np.int64).sum())}, ids holds {ids.size}")
        wrong = np.nonzero((starts < 1) | (starts >= lengths))[0]
        if wrong.size:
            i = int(wrong[0])
            raise bad(f"forward: sample {i}: target_start {int(starts[i])} is not in [1, {int(lengths[i])})")
        limit = self.model.max_context  # None: a model without one
        over = np.nonzero(lengths > limit)[0] if limit is not None else []
        if len(over):  # before any allocation: attention memory grows with the square of the length
            i = int(over[0])
            raise bad(f"forward: sample {i}: {int(lengths[i])} tokens, over the model's context of {limit}")
        out = np.nonzero((ids < 0) | (ids >= self.model.vocab_size))[0]
        if out.size:
            raise bad(f"forward: ids[{int(out[0])}] = {int(ids[out[0]])} is not a token id (vocabulary {self.model.vocab_size})")

    def check_forward(self, ids, lengths, starts, policy, grad) -> None:
        if not isinstance(grad, bool):
            raise bad(f"forward: grad must be true or false, received {grad!r}")
        self._check_samples(ids, lengths, starts)
        if policy not in ("current", "reference"):
            raise bad(f"forward: policy must be \"current\" or \"reference\", received {policy!r}")
        if grad and policy != "current":
            raise bad("forward: grad is only for the current policy (the reference is frozen)")
        if grad:  # what the graph kept until /backward costs, known from the lengths alone
            kept = self.graph_tokens(lengths)
            if kept > self.limits.max_graph_tokens:
                raise too_large(f"forward: with grad, {lengths.size} samples of up to {int(lengths.max())} tokens "
                                f"pad to {kept} tokens kept until backward, over the limit of "
                                f"{self.limits.max_graph_tokens} (max_graph_tokens in /info, --max-graph-tokens); "
                                "split the micro-batch")

    def graph_tokens(self, lengths: np.ndarray) -> int:
        """Padded tokens (rows × longest) summed over the chunks a forward runs in."""
        return sum(len(c) * int(lengths[c[0]]) for c in self._chunks(lengths))

    def forward(self, ids, lengths, starts, policy: str = "current", grad: bool = False):
        """(forward_id, logp F32 [sum(lengths - starts)], tokens); with grad the graph is kept.
        With several ranks, logp holds this rank's samples and zeros elsewhere."""
        self.check_forward(ids, lengths, starts, policy, grad)
        if grad:  # replaced by this one: its graph is freed before this one's is built
            self.pending = None
        lm = self._policy(policy)
        begin = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
        out_at = np.concatenate([[0], np.cumsum(lengths - starts, dtype=np.int64)])
        logp = np.zeros(int(out_at[-1]), dtype=np.float32)
        pieces = []
        for chunk, T in self._plan(lengths):
            tok = np.zeros((len(chunk), T), dtype=np.int64)
            mask = np.zeros((len(chunk), T), dtype=np.int64)
            rows, dest, tgt = [], [], []
            for r, i in enumerate(chunk):
                n, s = int(lengths[i]), int(starts[i])
                tok[r, :n] = ids[begin[i]:begin[i] + n]
                mask[r, :n] = 1
                rows.append(r * T + np.arange(s - 1, n - 1))  # position p predicts token p + 1
                tgt.append(tok[r, s:n])
                dest.append(np.arange(out_at[i], out_at[i + 1]))
            rows_t = torch.from_numpy(np.concatenate(rows)).to(self.device)
            tgt_t = torch.from_numpy(np.concatenate(tgt)).to(self.device)
            with torch.set_grad_enabled(grad), self._autocast():
                logits = self.model.logits_at(lm, torch.from_numpy(tok).to(self.device),
                                              torch.from_numpy(mask).to(self.device), rows_t)
                lp = torch.log_softmax(logits.float(), dim=-1).gather(1, tgt_t.unsqueeze(1)).squeeze(1)
            d = np.concatenate(dest)
            logp[d] = lp.detach().to("cpu", torch.float32).numpy()
            if grad:
                pieces.append((lp, d))
        fid = self.next_id
        self.next_id += 1
        if grad:
            self.pending = (fid, logp.size, int(ids.size), pieces)
        return fid, logp, int(ids.size)

    def check_backward(self, forward_id, grad) -> None:
        if isinstance(forward_id, bool) or not isinstance(forward_id, int):
            raise bad(f"backward: forward_id must be an integer, received {forward_id!r}")
        if self.pending is None or self.pending[0] != forward_id:
            last = "none pending" if self.pending is None else f"the pending one is {self.pending[0]}"
            raise LearnerError("stale_forward", f"backward: forward_id {forward_id} is not the last forward "
                               f"with grad that has not been back-propagated ({last})", 409)
        fid, n = self.pending[:2]
        if grad is None or grad.dtype != np.float32 or grad.ndim != 1 or grad.size != n:
            what = "none" if grad is None else f"{grad.dtype} {list(grad.shape)}"
            raise bad(f"backward: grad must be F32 [{n}] (forward {fid}'s logp), received {what}")
        bad_at = np.nonzero(~np.isfinite(grad))[0]
        if bad_at.size:
            raise bad(f"backward: grad[{int(bad_at[0])}] = {grad[bad_at[0]]} is not finite")

    def backward(self, forward_id, grad) -> int:
        """Accumulates d(sum grad * logp)/d(params) for the pending forward, then releases it;
        returns that forward's token count."""
        self.check_backward(forward_id, grad)
        _, _, tokens, pieces = self.pending
        self.pending = None
        if pieces:
            gs = [torch.from_numpy(grad[d]).to(self.device) for _, d in pieces]
            torch.autograd.backward([lp for lp, _ in pieces], gs)
        return tokens

    def optim_step(self, p: dict) -> float:
        """Clips (max_grad_norm 0: none), one AdamW step, zeroes the gradients; the norm before clipping."""
        return self.step_with(self.check_optim(p))

    @staticmethod
    def check_optim(p: dict) -> dict:
        """optim_step's parameters, checked: {lr, weight_decay, max_grad_norm, betas, eps}."""
        if not isinstance(p, dict):
            raise bad("optim_step: the body must be a JSON object")
        lr = _number(p, "lr", 0.0)
        wd = _number(p, "weight_decay", 0.0)
        clip = _number(p, "max_grad_norm", 0.0)
        eps = _number(p, "eps", 0.0, lo_open=True)
        betas = p.get("betas")
        if not isinstance(betas, list) or len(betas) != 2:
            raise bad(f"optim_step: betas must be [b1, b2], received {betas!r}")
        b1 = _number({"betas[0]": betas[0]}, "betas[0]", 0.0, 1.0)
        b2 = _number({"betas[1]": betas[1]}, "betas[1]", 0.0, 1.0)
        if b1 >= 1.0 or b2 >= 1.0:
            raise bad(f"optim_step: betas {betas} must be below 1")
        return {"lr": lr, "weight_decay": wd, "max_grad_norm": clip, "betas": [b1, b2], "eps": eps}

    def reduce_grads(self) -> None:
        """Sums the ranks' gradients (dist.py); one process has nothing to add."""

    def step_with(self, p: dict) -> float:
        lr, wd, clip, (b1, b2), eps = (p[k] for k in ("lr", "weight_decay", "max_grad_norm", "betas", "eps"))
        self.pending = None  # its graph holds the weights this step replaces
        self.reduce_grads()
        norm = float(torch.nn.utils.clip_grad_norm_(self.params, clip if clip > 0 else math.inf))
        if not math.isfinite(norm):
            self.opt.zero_grad(set_to_none=True)
            raise bad(f"optim_step: the accumulated gradient norm is {norm}; no step taken, gradients zeroed")
        # a finite step can still overflow the weights (lr 1e308): the old weights and AdamW state are
        # kept aside until the new ones are checked (twice the parameters' memory, for the step only)
        kept = self._keep()
        for g in self.opt.param_groups:
            g.update(lr=lr, weight_decay=wd, betas=(b1, b2), eps=eps)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        first = self.non_finite()
        if first is not None:
            self._restore(kept)
            raise bad(f"optim_step: the step made weight {first} non-finite (lr {lr:g}); no step taken, the "
                      "weights and optimizer state are as before, gradients zeroed")
        self.step += 1
        return norm

    def _keep(self):
        with torch.no_grad():
            params = [p.detach().clone() for p in self.params]
            state = {p: {k: (v.clone() if torch.is_tensor(v) else v) for k, v in st.items()}
                     for p, st in self.opt.state.items()}
        groups = [{k: v for k, v in g.items() if k != "params"} for g in self.opt.param_groups]
        return params, state, groups

    def _restore(self, kept) -> None:
        params, state, groups = kept
        with torch.no_grad():
            for p, old in zip(self.params, params):
                p.copy_(old)
        self.opt.state.clear()  # a parameter's first step created state it did not have
        self.opt.state.update(state)
        for g, old in zip(self.opt.param_groups, groups):
            g.update(old)

    def non_finite(self) -> Optional[str]:
        """The name of the first parameter holding a NaN or an infinity, else None."""
        flags = torch.stack([torch.isfinite(p).all() for p in self.params]).cpu()
        bad_at = torch.nonzero(~flags)
        return self.param_names[int(bad_at[0])] if bad_at.numel() else None

    def _check_dest(self, dest, what: str) -> None:
        """Refuses, before anything is touched, the directories the learner reads from: its --model
        directory (the tokenizer and graph it copies into every save) and the KL reference's."""
        if not isinstance(dest, str) or not os.path.isabs(dest) or "\0" in dest:
            return  # write_dir refuses it, naming the field
        real = os.path.realpath(dest)
        for role, d in (("the learner's --model directory", self.model.model_dir),
                        ("the KL reference's directory", self.reference_dir)):
            if real == os.path.realpath(d):
                raise bad(f"{what}: {dest} is {role} ({d}), which the learner reads from; "
                          "save elsewhere; nothing was changed")
        first = self.non_finite()
        if first is not None:
            raise LearnerError("non_finite", f"{what}: weight {first} holds a value that is not finite; "
                               "not saved", 409)

    def _save_dir(self, dest, what: str, write) -> str:
        """The model directory, what `write` adds, and a manifest of both that says the learner
        wrote them (the mark a later save looks for before it replaces the directory)."""
        def fill(tmp):
            self.model.save(tmp)
            for n in (STATE_JSON, STATE_TENSORS, LEGACY_PICKLE, *ADDED_BY_MEMPO):
                # copied along from a checkpoint the model was started from: not this save's state
                with contextlib.suppress(FileNotFoundError):
                    os.remove(os.path.join(tmp, n))
            write(tmp)
            write_manifest(tmp, manifest_name(self.model.model_dir), writer=LEARNER)
        return write_dir(dest, what, fill)

    def save_weights(self, dest) -> str:
        self._check_dest(dest, "save_weights")
        return self._save_dir(dest, "save_weights", lambda tmp: None)

    def save_checkpoint(self, dest) -> str:
        self._check_dest(dest, "save_checkpoint")
        cuda = self.device if self.device.type == "cuda" else None
        return self._save_dir(dest, "save_checkpoint", lambda tmp: save_state(
            tmp, self.opt, self.param_names, step=self.step, seed=self.seed,
            reference_dir=self.reference_dir, cuda_device=cuda))

    def load_checkpoint(self, src) -> str:
        """Replaces weights, AdamW state, RNG state, step and seed with a checkpoint's, once all of
        it has been read and checked against the model (400 naming the file and the field)."""
        src = check_path(src, "load_checkpoint")
        try:
            names = os.listdir(src)
            kinds = {n: os.stat(os.path.join(src, n)).st_mode for n in names}
        except OSError as e:
            raise bad(f"load_checkpoint: {e.filename or src}: {e.strerror}") from None
        if STATE_JSON not in names:
            if LEGACY_PICKLE in names:
                raise bad(f"load_checkpoint: {src} holds {LEGACY_PICKLE}, the pickle format of earlier versions, which "
                          "is not loaded for safety (a pickle can run any code); save the checkpoint again with this version")
            raise bad(f"load_checkpoint: {src} is not a checkpoint directory (no {STATE_JSON})")
        odd = [n for n, m in kinds.items() if not (stat.S_ISREG(m) or stat.S_ISDIR(m))]
        if odd:
            raise bad(f"load_checkpoint: {os.path.join(src, sorted(odd)[0])} is not a regular file")
        # the learner writes no links: one leading out of the directory would load (and then copy
        # into every later save) a file the checkpoint does not hold
        home = os.path.realpath(src)
        for n in sorted(names):
            p = os.path.join(src, n)
            if os.path.islink(p) and os.path.commonpath([home, os.path.realpath(p)]) != home:
                raise bad(f"load_checkpoint: {p} is a symbolic link to {os.path.realpath(p)}, outside the "
                          "checkpoint directory")
        if isinstance(self.model, HfModel) and not any(n.endswith(".safetensors") and n != STATE_TENSORS for n in names):
            # transformers would fall back to pytorch_model.bin, a pickle
            raise bad(f"load_checkpoint: {src} has no model .safetensors; weights in a pickle are not loaded")
        state = load_state(src, self.opt, self.param_names, self.params, self.device)
        try:
            with torch.random.fork_rng(devices=[]):  # building the model draws from the CPU generator
                weights = type(self.model)(src).lm.state_dict()
        except (OSError, ValueError, RecursionError) as e:
            raise bad(f"load_checkpoint: {src}: {e}") from None
        mine = self.model.lm.state_dict()
        for k, v in mine.items():  # check all before replacing anything
            if k not in weights or weights[k].shape != v.shape:
                raise bad(f"load_checkpoint: {src}: weight {k} is missing or of another shape")
            if v.is_floating_point() and not bool(torch.isfinite(weights[k]).all()):
                raise bad(f"load_checkpoint: {src}: weight {k} holds a value that is not finite")
        extra = sorted(set(weights) - set(mine))
        if extra:
            raise bad(f"load_checkpoint: {src}: weight {extra[0]} is not one of the model's")
        self.model.lm.load_state_dict(weights)
        self.opt.load_state_dict(state.optimizer)
        self.opt.zero_grad(set_to_none=True)
        torch.set_rng_state(state.rng)
        if state.cuda_rng is not None and self.device.type == "cuda":
            torch.cuda.set_rng_state(state.cuda_rng, self.device)
        self.step, self.seed = state.step, state.seed
        if state.reference_dir != self.reference_dir:
            self.reference_dir, self.reference = state.reference_dir, None
        self.pending = None
        return src
