"""What one connection to the learner's server may cost (server.py; `python -m mempo_learner --help`).
No torch here: the command line is parsed before torch is imported."""
from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    max_connections: int = 256  # open at once; at the limit the one idle longest is closed for a new one
    header_timeout: float = 10.0  # request line and headers, from accept or from the request's first byte
    body_timeout: float = 10.0  # the longest pause inside a body
    idle_timeout: float = 60.0  # a kept-alive connection without a request; an answer the client stops reading
