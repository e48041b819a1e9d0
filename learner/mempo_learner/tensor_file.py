"""Tensors in a safetensors file: an 8-byte little-endian header length N, N bytes of JSON
`{name: {dtype, shape, data_offsets}}`, then the raw little-endian bytes, contiguous. Written and
read here with numpy (Debian has no python3-safetensors). Reading checks the header's size and
every entry's dtype, shape and offsets against the file's size before it reads a byte of data;
nothing in the file is executed."""
import json
import math
import os
import struct
from typing import Dict, List, Tuple

import numpy as np

from .manifest import open_regular

DTYPES = {"F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
          "I64": np.dtype("<i8"), "I32": np.dtype("<i4"), "U8": np.dtype("u1")}
NAMES = {(dt.kind, dt.itemsize): name for name, dt in DTYPES.items()}
MAX_HEADER = 100 << 20  # the safetensors library's own bound
MAX_ELEMENTS = 2 ** 62  # any dimension numpy accepts stays below it
METADATA = "__metadata__"


class TensorFileError(ValueError):
    """A malformed tensor file; the message names the file and the entry."""


def write_tensors(path: str, tensors: Dict[str, np.ndarray]) -> None:
    """Writes the tensors in the given order (header padded with spaces to 8 bytes); OSError
    (a full disk) reaches the caller, which owns the directory and removes it."""
    header: Dict[str, dict] = {}
    arrays: List[np.ndarray] = []
    at = 0
    for name, arr in tensors.items():
        kind = NAMES.get((arr.dtype.kind, arr.dtype.itemsize))
        if kind is None:
            raise TypeError(f"tensor {name}: dtype {arr.dtype} has no safetensors name here")
        a = np.asarray(arr, dtype=DTYPES[kind], order="C")  # (ascontiguousarray makes a 0-d array 1-d)
        header[name] = {"dtype": kind, "shape": list(a.shape), "data_offsets": [at, at + a.nbytes]}
        arrays.append(a)
        at += a.nbytes
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for a in arrays:
            f.write(a.reshape(-1).view(np.uint8).data)


def _entry(path: str, name, e, data_size: int) -> Tuple[int, int, np.dtype, List[int]]:
    def fail(msg):
        return TensorFileError(f"{path}: tensor {name}: {msg}")

    if not isinstance(e, dict) or set(e) != {"dtype", "shape", "data_offsets"}:
        raise fail("the header entry is not {dtype, shape, data_offsets}")
    dt = DTYPES.get(e["dtype"]) if isinstance(e["dtype"], str) else None
    if dt is None:
        raise fail(f"dtype {e['dtype']!r}, expected one of {', '.join(DTYPES)}")
    shape, off = e["shape"], e["data_offsets"]
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise fail(f"shape {shape!r} is not a list of sizes")
    if (not isinstance(off, list) or len(off) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in off)):
        raise fail(f"data_offsets {off!r} is not [begin, end]")
    b, end = off
    if not 0 <= b <= end <= data_size:
        raise fail(f"data_offsets [{b}, {end}] outside the {data_size} data bytes")
    if end - b != math.prod(shape) * dt.itemsize:  # Python integers: a shape of 2^70 cannot wrap
        raise fail(f"{end - b} bytes do not hold {e['dtype']} {shape}")
    if math.prod(max(d, 1) for d in shape) > MAX_ELEMENTS:  # [0, 2^70] holds 0 bytes, but numpy refuses its shape
        raise fail(f"shape {shape} is over {MAX_ELEMENTS} elements")
    return b, end, dt, shape


def read_tensors(path: str) -> Dict[str, np.ndarray]:
    """name -> array (native byte order, writable); TensorFileError naming the entry, OSError
    when the file cannot be read, ValueError when it is not a regular file."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(8)
        if len(head) < 8:
            raise TensorFileError(f"{path}: {size} bytes hold no header length")
        (n,) = struct.unpack("<Q", head)
        if n > min(MAX_HEADER, size - 8):
            raise TensorFileError(f"{path}: header length {n} runs past the {size}-byte file "
                                  f"(or over the {MAX_HEADER}-byte limit)")
        try:
            header = json.loads(f.read(n).decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            raise TensorFileError(f"{path}: the header is not JSON ({type(e).__name__}: {e})") from None
        if not isinstance(header, dict):
            raise TensorFileError(f"{path}: the header is not a JSON object")
        meta = header.pop(METADATA, {})
        if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
            raise TensorFileError(f"{path}: {METADATA} is not an object of strings")
        data_size = size - 8 - n
        spans = sorted(((*_entry(path, name, e, data_size), name) for name, e in header.items()),
                       key=lambda s: (s[0], s[1], s[4]))
        at = 0
        for b, end, _, _, name in spans:
            if b != at:
                raise TensorFileError(f"{path}: tensor {name}: data_offsets start at {b}, expected {at} "
                                      "(contiguous, no overlap)")
            at = end
        if at != data_size:
            raise TensorFileError(f"{path}: {data_size - at} data bytes after the last tensor")
        out = {}
        for b, end, dt, shape, name in spans:
            buf = bytearray(end - b)
            f.seek(8 + n + b)
            if f.readinto(buf) != len(buf):
                raise TensorFileError(f"{path}: tensor {name}: the file ended early (changed while read)")
            out[name] = np.frombuffer(buf, dtype=dt).reshape(shape).astype(dt.newbyteorder("="), copy=False)
        return out
