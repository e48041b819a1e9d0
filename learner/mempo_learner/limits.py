"""What one connection to the learner's server may cost (server.py; `python -m mempo_learner --help`).
No torch here: the command line is parsed before torch is imported."""
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Limits:
    max_connections: int = 256  # open at once; at the limit the one idle longest is closed for a new one
    header_timeout: float = 10.0  # request line and headers, from accept or from the request's first byte
    body_timeout: float = 10.0  # the longest pause inside a body
    idle_timeout: float = 60.0  # a kept-alive connection without a request; an answer the client stops reading


# What one /forward may hold (docs/learner.md, "Limits of a request"), announced in /info and
# checked from the frame's size and its `lengths` before the learner allocates anything for it.
GRAPH_TOKENS = 16384  # twice mempo's default --micro-batch-tokens; raised to the model's context


@dataclass(frozen=True)
class RequestLimits:
    max_forward_tokens: int = 1 << 20  # Σ lengths of one /forward (its ids; also bounds its logp)
    max_forward_samples: int = 16384  # samples of one /forward
    # padded tokens (rows × longest, summed over the learner's chunks) of a forward with grad: its
    # activations are kept until /backward. None: GRAPH_TOKENS, or the model's context if longer
    max_graph_tokens: Optional[int] = None

    def resolved(self, max_context: Optional[int]) -> "RequestLimits":
        if self.max_graph_tokens is not None:
            return self
        return RequestLimits(self.max_forward_tokens, self.max_forward_samples, max(GRAPH_TOKENS, max_context or 0))
