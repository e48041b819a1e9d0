"""A minimal ONNX protobuf reader/writer for initializer bytes (no `onnx` package needed).

Reading walks ModelProto.graph (field 7) -> GraphProto.node (1) / .initializer (5) ->
TensorProto dims (1), data_type (2), name (8), raw_data (9) or packed float_data (4), and records
where each tensor's bytes lie in the file. Writing copies the template bytes and overwrites each
region in place (same size), so the graph stays byte-identical except the weights: the rollout
engines reload the same graph with new initializers, it is never re-exported.
"""
import math
import os
from dataclasses import dataclass
from typing import Dict, List, Tuple

import numpy as np

from .manifest import open_regular

# TensorProto.DataType -> numpy dtype (the ones a model's initializers use)
DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 5: np.int16, 6: np.int32, 7: np.int64,
          9: np.bool_, 10: np.float16, 11: np.float64}


# protobuf's own bound on a message, and what `mempo serve` reads (src/engines/local/reload.ts
# MAX_ONNX_BYTES): a larger model.onnx is refused by its size, before a byte is read
MAX_ONNX_BYTES = 2 ** 31 - 1


class OnnxFormatError(ValueError):
    pass


@dataclass
class Tensor:
    name: str
    data_type: int
    dims: Tuple[int, ...]
    offset: int  # byte offset of the raw data in the file
    length: int  # byte length of the raw data

    @property
    def dtype(self):
        if self.data_type not in DTYPES:
            raise OnnxFormatError(f"initializer {self.name}: unsupported data_type {self.data_type}")
        return np.dtype(DTYPES[self.data_type])


def _varint(buf, pos, end):
    out = 0
    shift = 0
    while True:
        if pos >= end:
            raise OnnxFormatError("truncated varint")
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, pos
        shift += 7
        if shift > 63:
            raise OnnxFormatError("varint too long")


def _fields(buf, start, end):
    """Yields (field number, wire type, value or (offset, length)) of one message."""
    pos = start
    while pos < end:
        at = pos
        key, pos = _varint(buf, pos, end)
        field, wire = key >> 3, key & 7
        if field == 0:  # protobuf reserves it: zeros here are not a model (a sparse or truncated file)
            raise OnnxFormatError(f"field number 0 at byte {at}")
        if field >= 1 << 29:
            raise OnnxFormatError(f"field number {field} at byte {at} is over protobuf's 2^29 - 1")
        if wire == 0:
            val, pos = _varint(buf, pos, end)
            yield field, wire, val
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
            if pos > end:
                raise OnnxFormatError(f"field {field}: a fixed-size value runs past its message")
            yield field, wire, None
        elif wire == 2:
            n, pos = _varint(buf, pos, end)
            if pos + n > end:
                raise OnnxFormatError(f"field {field}: length {n} runs past its message")
            yield field, wire, (pos, n)
            pos += n
        else:
            raise OnnxFormatError(f"unsupported wire type {wire} (field {field})")
    if pos != end:
        raise OnnxFormatError("message overruns its length")


def _string(buf, span):
    try:
        return bytes(buf[span[0]:span[0] + span[1]]).decode("utf-8")
    except UnicodeDecodeError as e:
        raise OnnxFormatError(f"a name at byte {span[0]} is not UTF-8 ({e.reason})") from None


def _tensor(buf, start, end) -> Tensor:
    name, data_type, dims, region = "", 0, [], None
    for field, wire, val in _fields(buf, start, end):
        if field == 1 and wire == 0:
            dims.append(val)
        elif field == 1 and wire == 2:  # packed dims
            p, e = val[0], val[0] + val[1]
            while p < e:
                d, p = _varint(buf, p, e)
                dims.append(d)
        elif field == 2:
            data_type = val
        elif field == 8:
            name = _string(buf, val)
        elif field in (9, 4) and wire == 2:  # raw_data, or packed float_data (same bytes)
            region = val
        elif field == 4:
            raise OnnxFormatError(f"initializer {name or '?'}: unpacked float_data is not supported")
        elif field == 14:
            raise OnnxFormatError(f"initializer {name or '?'}: external data is not supported")
    if region is None:
        region = (end, 0)
    t = Tensor(name, data_type, tuple(dims), region[0], region[1])
    if t.data_type in DTYPES and math.prod(t.dims) * t.dtype.itemsize != t.length:  # Python ints: no wrap
        raise OnnxFormatError(f"initializer {name}: {t.length} bytes do not hold dims {list(t.dims)}")
    return t


def _node(buf, start, end):
    inputs, op = [], ""
    for field, wire, val in _fields(buf, start, end):
        if field == 1 and wire == 2:
            inputs.append(_string(buf, val))
        elif field == 4 and wire == 2:
            op = _string(buf, val)
    return op, inputs


class OnnxWeights:
    """The initializers of an ONNX file (name -> Tensor) and the MatMul nodes' initializer inputs."""

    def __init__(self, path: str):
        self.path = path
        # a FIFO is refused unopened, a device or a file over the limit before a byte is read
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_ONNX_BYTES:
                raise OnnxFormatError(f"{path} has {size} bytes, more than the {MAX_ONNX_BYTES} an ONNX model may have")
            self.data = f.read(size + 1)
        if len(self.data) != size:
            raise OnnxFormatError(f"{path} changed size while it was read ({size} bytes at open)")
        try:
            self._parse()
        except OnnxFormatError as e:
            if str(e).startswith(path):
                raise
            raise OnnxFormatError(f"{path}: {e}") from None

    def _parse(self) -> None:
        path = self.path
        buf = memoryview(self.data)
        graph = None
        for field, wire, val in _fields(buf, 0, len(buf)):
            if field == 7 and wire == 2:
                graph = val
        if graph is None:
            raise OnnxFormatError(f"{path}: no graph (ModelProto field 7)")
        self.tensors: Dict[str, Tensor] = {}
        nodes: List[Tuple[str, List[str]]] = []
        g0, g1 = graph[0], graph[0] + graph[1]
        for field, wire, val in _fields(buf, g0, g1):
            if field == 5 and wire == 2:
                t = _tensor(buf, val[0], val[0] + val[1])
                self.tensors[t.name] = t
            elif field == 1 and wire == 2:
                nodes.append(_node(buf, val[0], val[0] + val[1]))
        self.matmul_weights: List[str] = [
            i for op, ins in nodes if op == "MatMul" for i in ins if i in self.tensors]

    def read(self, name: str) -> np.ndarray:
        t = self.tensors[name]
        return np.frombuffer(self.data, dtype=t.dtype, count=t.length // t.dtype.itemsize,
                             offset=t.offset).reshape(t.dims)

    def write(self, out_path: str, arrays: Dict[str, np.ndarray]) -> None:
        """Copies the template with `arrays` in place of those initializers' bytes; out_path
        appears whole (a temp name, then rename)."""
        out = bytearray(self.data)
        for name, arr in arrays.items():
            t = self.tensors.get(name)
            if t is None:
                raise OnnxFormatError(f"no initializer named {name}")
            a = np.ascontiguousarray(arr, dtype=t.dtype.newbyteorder("<"))
            if tuple(a.shape) != t.dims:
                raise OnnxFormatError(f"initializer {name}: shape {list(a.shape)} != {list(t.dims)}")
            out[t.offset:t.offset + t.length] = a.tobytes()
        tmp = f"{out_path}.tmp-{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(out)
        os.replace(tmp, out_path)


if __name__ == "__main__":  # python3 -m mempo_learner.onnx_weights FILE: list the initializers
    import sys
    w = OnnxWeights(sys.argv[1])
    for n, t in w.tensors.items():
        print(n, t.data_type, list(t.dims), t.offset, t.length)
    print("MatMul initializers:", w.matmul_weights)
