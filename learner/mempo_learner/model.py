"""Tiny Llama-style decoder (RMSNorm, RoPE, SwiGLU, tied embeddings) for mempo-tiny.

Shared by training/train.py, training/export.py and the learner (tiny.py). No dependency beyond torch.
"""
import json
import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    vocab_size: int = 3072
    hidden_size: int = 256
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    intermediate_size: int = 512
    max_position_embeddings: int = 2048
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    # heads of layer 0 whose attention is fixed to the previous token (see prev_token_bias)
    prev_token_heads: int = 1

    @property
    def head_dim(self):
        return self.hidden_size // self.num_attention_heads

    def to_dict(self):
        return asdict(self)


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_cos_sin(position_ids, head_dim, theta):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=position_ids.device) / head_dim))
    freqs = position_ids.to(torch.float32).unsqueeze(-1) * inv  # [B, T, hd/2]
    emb = torch.cat([freqs, freqs], dim=-1)  # [B, T, hd]
    return emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)  # [B, 1, T, hd]


def prev_token_bias(prev, self_):
    """Attention bias of a previous-token head: the previous token of the same sequence, or the
    token itself when there is none (first token). Such a head is what an induction (copy)
    circuit is built on; a small model trained on a few million tokens does not find one by
    itself, so it never learns to copy names it has not memorised."""
    zero = torch.zeros((), dtype=torch.float32, device=prev.device)
    return torch.where(prev, zero, torch.where(self_, torch.full_like(zero, -30.0),
                                               torch.full_like(zero, -1e9))).unsqueeze(1)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class Block(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        d = c.hidden_size
        self.c = c
        self.ln1 = RMSNorm(d, c.rms_norm_eps)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.ln2 = RMSNorm(d, c.rms_norm_eps)
        self.gate_up = nn.Linear(d, 2 * c.intermediate_size, bias=False)
        self.down = nn.Linear(c.intermediate_size, d, bias=False)

    def forward(self, x, cos, sin, bias, past_k=None, past_v=None, prev_bias=None):
        B, T, D = x.shape
        H, hd = self.c.num_attention_heads, self.c.head_dim
        h = self.ln1(x)
        q, k, v = self.qkv(h).split(D, dim=-1)
        q = q.view(B, T, H, hd).transpose(1, 2)
        k = k.view(B, T, H, hd).transpose(1, 2)
        v = v.view(B, T, H, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if past_k is not None:
            k = torch.cat([past_k, k], dim=2)
            v = torch.cat([past_v, v], dim=2)
        att = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(hd)) + bias
        if prev_bias is not None:  # fixed previous-token heads: position decides, not q.k
            n = self.c.prev_token_heads
            att = torch.cat([prev_bias.expand(B, n, T, att.shape[-1]), att[:, n:]], dim=1)
        att = torch.softmax(att, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(B, T, D)
        x = x + self.o(y)
        g, u = self.gate_up(self.ln2(x)).split(self.c.intermediate_size, dim=-1)
        x = x + self.down(F.silu(g) * u)
        return x, k, v


class TinyLM(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c.vocab_size, c.hidden_size)
        self.blocks = nn.ModuleList([Block(c) for _ in range(c.num_hidden_layers)])
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.apply(self._init)
        for b in self.blocks:  # scaled residual init
            nn.init.normal_(b.o.weight, std=0.02 / math.sqrt(2 * c.num_hidden_layers))
            nn.init.normal_(b.down.weight, std=0.02 / math.sqrt(2 * c.num_hidden_layers))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)

    def logits(self, h):
        return F.linear(self.norm(h), self.embed.weight)

    def forward_train(self, input_ids, position_ids, seg_ids):
        """Packed training forward: tokens attend causally within the same segment id."""
        T = input_ids.shape[1]
        x = self.embed(input_ids)
        cos, sin = rope_cos_sin(position_ids, self.c.head_dim, self.c.rope_theta)
        causal = torch.ones(T, T, dtype=torch.bool, device=input_ids.device).tril()
        same = seg_ids.unsqueeze(2) == seg_ids.unsqueeze(1)  # [B, T, T]
        allowed = same & causal
        bias = torch.zeros(allowed.shape, dtype=torch.float32, device=allowed.device).masked_fill(~allowed, -1e9).unsqueeze(1)
        pb = self.prev_bias(seg_ids)
        for i, b in enumerate(self.blocks):
            x, _, _ = b(x, cos, sin, bias, prev_bias=pb if i == 0 else None)
        return self.logits(x)

    def prev_bias(self, seg_ids):
        """Packed rows: the previous token is the one before, in the same segment."""
        if self.c.prev_token_heads == 0:
            return None
        T = seg_ids.shape[1]
        idx = torch.arange(T, device=seg_ids.device)
        same = seg_ids.unsqueeze(2) == seg_ids.unsqueeze(1)
        prev = same & (idx.unsqueeze(0) == idx.unsqueeze(1) - 1).unsqueeze(0)
        self_ = (idx.unsqueeze(0) == idx.unsqueeze(1)).unsqueeze(0).expand_as(prev)
        return prev_token_bias(prev, self_)


class OnnxWrapper(nn.Module):
    """optimum text-generation-with-past signature."""

    def __init__(self, lm: TinyLM):
        super().__init__()
        self.lm = lm

    def forward(self, input_ids, attention_mask, position_ids, *past):
        x, presents = self.hidden(input_ids, attention_mask, position_ids, *past)
        return (self.lm.logits(x), *presents)

    def hidden(self, input_ids, attention_mask, position_ids, *past):
        """The last block's output (before the final norm) and the presents; the learner takes
        the logits of the target positions only (lm.logits per row: the same math)."""
        c = self.lm.c
        T = input_ids.shape[1]
        S = attention_mask.shape[1]  # past + T
        P = S - T
        x = self.lm.embed(input_ids)
        cos, sin = rope_cos_sin(position_ids, c.head_dim, c.rope_theta)
        dev = input_ids.device  # the learner runs this on CUDA too
        q_pos = torch.arange(T, dtype=torch.int64, device=dev).unsqueeze(1) + P  # [T,1]
        k_pos = torch.arange(S, dtype=torch.int64, device=dev).unsqueeze(0)  # [1,S]
        causal = k_pos <= q_pos  # [T,S]
        keep = causal.unsqueeze(0) & (attention_mask > 0).unsqueeze(1)  # [B,T,S]
        bias = torch.where(keep, torch.zeros((), dtype=torch.float32, device=dev),
                           torch.full((), -1e9, dtype=torch.float32, device=dev)).unsqueeze(1)
        pb = None
        if c.prev_token_heads > 0:
            # padding is contiguous (left for generation, right for scoring), so the previous
            # token of key index q is index q-1 unless that is padding (then: itself)
            prev = (k_pos == q_pos - 1).unsqueeze(0) & (attention_mask > 0).unsqueeze(1)
            self_ = (k_pos == q_pos).unsqueeze(0).expand_as(prev)
            pb = prev_token_bias(prev, self_)
        presents = []
        for i, b in enumerate(self.lm.blocks):
            x, k, v = b(x, cos, sin, bias, past[2 * i], past[2 * i + 1], prev_bias=pb if i == 0 else None)
            presents += [k, v]
        return x, presents


def hf_config(c: Config, extra=None):
    d = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": c.vocab_size,
        "hidden_size": c.hidden_size,
        "intermediate_size": c.intermediate_size,
        "num_hidden_layers": c.num_hidden_layers,
        "num_attention_heads": c.num_attention_heads,
        "num_key_value_heads": c.num_attention_heads,
        "head_dim": c.head_dim,
        "max_position_embeddings": c.max_position_embeddings,
        "rope_theta": c.rope_theta,
        "rms_norm_eps": c.rms_norm_eps,
        "hidden_act": "silu",
        "tie_word_embeddings": True,
        "bos_token_id": 0,
        "eos_token_id": 0,
        "pad_token_id": 0,
        "torch_dtype": "float32",
        "use_cache": True,
        "transformers.js_config": {"dtype": "fp32", "use_external_data_format": False},
        # not plain Llama: layer 0's first heads attend to the previous token by position
        # (model.py prev_token_bias); the ONNX graph has it built in
        "mempo_prev_token_heads": c.prev_token_heads,
    }
    if extra:
        d.update(extra)
    return d


def param_count(m):
    return sum(p.numel() for p in m.parameters())
