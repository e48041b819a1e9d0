"""Frames (docs/learner.md, "Wire protocol"): a safetensors file whose `__metadata__.params` holds
the operation's JSON parameters. Only I32 and F32 travel, little-endian."""
import json
import math
import struct
from typing import Dict, Tuple

import numpy as np

CONTENT_TYPE = "application/x-mempo-frame"
DTYPES = {"I32": np.dtype("<i4"), "F32": np.dtype("<f4")}
METADATA = "__metadata__"
MAX_RANK = 8
MAX_ELEMENTS = 2 ** 31 - 1  # I32 / F32 arrays indexed by int32: more cannot be a learner's array


class FrameError(ValueError):
    """A malformed frame; the message names the field."""


def encode(params: dict, tensors: Dict[str, np.ndarray]) -> bytes:
    """Tensors laid out in the given order, contiguous; header padded with spaces to 8 bytes."""
    header = {METADATA: {"params": json.dumps(params)}}
    parts = []
    offset = 0
    for name, arr in tensors.items():
        kind = "I32" if arr.dtype.kind in "iu" else "F32"
        a = np.ascontiguousarray(arr, dtype=DTYPES[kind])
        header[name] = {"dtype": kind, "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        parts.append(a.tobytes())
        offset += a.nbytes
    h = json.dumps(header).encode("utf-8")
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(parts)


def _shape(name, shape) -> list:
    """The shape, checked before numpy sees it: a huge entry (2^70) or rank would raise
    OverflowError / ValueError there, and a zero entry would let any other pass the byte count."""
    if not isinstance(shape, list):
        raise FrameError(f"tensor {name}: shape is not a list")
    if len(shape) > MAX_RANK:
        raise FrameError(f"tensor {name}: shape has rank {len(shape)}, over {MAX_RANK}")
    for v in shape:
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise FrameError(f"tensor {name}: shape holds {v!r}, not a size")
    if math.prod(max(v, 1) for v in shape) > MAX_ELEMENTS:
        raise FrameError(f"tensor {name}: shape {shape} is over {MAX_ELEMENTS} elements")
    return shape


def _json(text, what: str):
    try:
        return json.loads(text.decode("utf-8") if isinstance(text, bytes) else text)
    except (UnicodeDecodeError, ValueError) as e:
        raise FrameError(f"{what} is not JSON: {e}") from None
    except RecursionError:
        raise FrameError(f"{what} is not JSON: nested too deeply") from None


def decode(body: bytes) -> Tuple[dict, Dict[str, np.ndarray]]:
    """(params, name -> array); raises FrameError naming what is wrong."""
    if len(body) < 8:
        raise FrameError(f"frame of {len(body)} bytes has no header length")
    (n,) = struct.unpack_from("<Q", body, 0)
    if n > len(body) - 8:
        raise FrameError(f"header length {n} runs past the end of the {len(body)}-byte frame")
    header = _json(bytes(body[8:8 + n]), "header")
    if not isinstance(header, dict):
        raise FrameError("header is not a JSON object")
    data = memoryview(body)[8 + n:]
    params = {}
    meta = header.pop(METADATA, None)
    if meta is not None:
        if not isinstance(meta, dict):
            raise FrameError("__metadata__ is not an object")
        if "params" in meta:
            if not isinstance(meta["params"], str):
                raise FrameError("__metadata__.params is not a string")
            params = _json(meta["params"], "__metadata__.params")
            if not isinstance(params, dict):
                raise FrameError("__metadata__.params is not a JSON object")
    tensors = {}
    spans = []
    for name, e in header.items():
        if not isinstance(e, dict):
            raise FrameError(f"tensor {name}: header entry is not an object")
        dt = DTYPES.get(e["dtype"]) if isinstance(e.get("dtype"), str) else None
        if dt is None:
            raise FrameError(f"tensor {name}: dtype {e.get('dtype')!r}, expected I32 or F32")
        shape, off = _shape(name, e.get("shape")), e.get("data_offsets")
        if (not isinstance(off, list) or len(off) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in off)):
            raise FrameError(f"tensor {name}: data_offsets is not [begin, end]")
        b, end = off
        count = math.prod(shape)
        if b < 0 or end < b or end > len(data):
            raise FrameError(f"tensor {name}: data_offsets [{b}, {end}] outside the {len(data)} data bytes")
        if end - b != count * dt.itemsize:
            raise FrameError(f"tensor {name}: {end - b} bytes do not hold {e['dtype']} {shape}")
        tensors[name] = np.frombuffer(data[b:end], dtype=dt).reshape(shape).astype(dt.newbyteorder("="))
        spans.append((b, end, name))
    at = 0
    for b, end, name in sorted(spans):
        if b != at:
            raise FrameError(f"tensor {name}: data_offsets start at {b}, expected {at} (contiguous, no overlap)")
        at = end
    if at != len(data):
        raise FrameError(f"{len(data) - at} data bytes after the last tensor")
    return params, tensors
