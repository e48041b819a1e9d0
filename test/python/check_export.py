#!/usr/bin/env python3
"""Checks mempo's exports (docs/export.md) against batch.jsonl with NumPy only, without mempo.

    check_export.py --batch DIR/batch.jsonl --pad N [--verl F.safetensors] [--tensors F.npz] [--trl F.json]

The safetensors file is parsed by hand (8-byte little-endian header length, JSON header,
raw little-endian data), the .npz with numpy.load(allow_pickle=False). Every expected value is
computed here from the JSON lines: left-padded prompts, right-padded responses, verl's
position_ids = clip(cumsum(attention_mask) - 1, 0). Prints every mismatch; exits 1 on any.
"""
import argparse
import json
import math
import sys

import numpy as np

FAILURES = []


def fail(where, msg):
    FAILURES.append(f"{where}: {msg}")


def same(where, got, want, dtype=None, shape=None):
    """Exact comparison (NaN equals NaN); float32 values are compared after rounding the JSON to float32."""
    if got is None:
        fail(where, "missing")
        return
    if dtype is not None and got.dtype != np.dtype(dtype):
        fail(where, f"dtype {got.dtype}, expected {np.dtype(dtype)}")
    if shape is not None and tuple(got.shape) != tuple(shape):
        fail(where, f"shape {tuple(got.shape)}, expected {tuple(shape)}")
        return
    want = np.asarray(want, dtype=got.dtype).reshape(got.shape)
    eq = (got == want) | (np.isnan(got) & np.isnan(want)) if got.dtype.kind == "f" else got == want
    if not np.all(eq):
        idx = tuple(int(i) for i in np.argwhere(~eq)[0])
        fail(where, f"{int((~eq).sum())} values differ; first at {idx}: {got[idx].item()!r}, expected {want[idx].item()!r}")


def floats(values):
    return [math.nan if v is None else v for v in values]


def read_records(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_safetensors(path):
    with open(path, "rb") as f:
        buf = f.read()
    n = int.from_bytes(buf[:8], "little")
    if n % 8 != 0:
        fail("safetensors header", f"length {n} is not a multiple of 8")
    header = json.loads(buf[8 : 8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    data = memoryview(buf)[8 + n :]
    dtypes = {"I64": "<i8", "I32": "<i4", "F32": "<f4", "U8": "u1", "BOOL": "?"}
    spans = sorted((v["data_offsets"][0], v["data_offsets"][1], k) for k, v in header.items())
    end = 0
    for begin, stop, name in spans:
        if begin != end:
            fail(f"safetensors {name}", f"starts at {begin}, the previous tensor ends at {end} (gap or overlap)")
        end = stop
    if end != len(data):
        fail("safetensors data", f"tensors end at {end}, the data section has {len(data)} bytes")
    tensors = {}
    for name, v in header.items():
        dt = np.dtype(dtypes[v["dtype"]])
        begin, stop = v["data_offsets"]
        if begin % dt.itemsize != 0:
            fail(f"safetensors {name}", f"offset {begin} is not aligned to {dt.itemsize} bytes")
        count = int(np.prod(v["shape"])) if v["shape"] else 1
        if stop - begin != count * dt.itemsize:
            fail(f"safetensors {name}", f"{stop - begin} bytes for shape {v['shape']} of {v['dtype']}")
            continue
        tensors[name] = np.frombuffer(data, dtype=dt, count=count, offset=begin).reshape(v["shape"])
    return tensors, meta


class Expected:
    """The padded batch, built from the JSON lines alone."""

    def __init__(self, records, pad):
        self.r = records
        self.B = len(records)
        self.P = max(len(r["promptIds"]) for r in records)
        self.T = max(len(r["responseIds"]) for r in records)
        self.pad = pad

    def prompts(self):
        out = np.full((self.B, self.P), self.pad, dtype=np.int64)
        mask = np.zeros((self.B, self.P), dtype=np.int64)
        for b, r in enumerate(self.r):
            p = r["promptIds"]
            if p:
                out[b, self.P - len(p) :] = p
                mask[b, self.P - len(p) :] = 1
        return out, mask

    def per_token(self, key, fill=0.0, dtype=np.float32):
        out = np.full((self.B, self.T), fill, dtype=dtype)
        for b, r in enumerate(self.r):
            v = r[key]
            if v:
                out[b, : len(v)] = floats(v) if dtype == np.float32 else v
        return out

    def response_attention(self):
        out = np.zeros((self.B, self.T), dtype=np.int64)
        for b, r in enumerate(self.r):
            out[b, : len(r["responseIds"])] = 1
        return out

    def scores(self):
        return np.array([0.0 if r["score"] is None else r["score"] for r in self.r], dtype=np.float32)

    def has_logprobs(self):
        return all(r["oldLogp"] is not None for r in self.r)


def check_positions(where, pos, mask):
    # verl's compute_position_id_with_mask, and independently: 0, 1, 2, ... over each row's real tokens.
    same(where, pos, np.clip(np.cumsum(mask, axis=-1) - 1, 0, None))
    for b in range(mask.shape[0]):
        real = pos[b][mask[b] == 1]
        if not np.array_equal(real, np.arange(len(real))):
            fail(f"{where} row {b}", f"positions on real tokens are {real[:8].tolist()}..., expected 0, 1, 2, ...")


def check_verl(path, e):
    t, meta = read_safetensors(path)
    L = e.P + e.T
    prompts, pmask = e.prompts()
    responses = e.per_token("responseIds", e.pad, np.int64)
    rattn = e.response_attention()
    same("verl input_ids", t.get("input_ids"), np.concatenate([prompts, responses], axis=1), "<i8", (e.B, L))
    same("verl attention_mask", t.get("attention_mask"), np.concatenate([pmask, rattn], axis=1), "<i8", (e.B, L))
    if "position_ids" in t and "attention_mask" in t:
        check_positions("verl position_ids", t["position_ids"], t["attention_mask"])
    same("verl prompts", t.get("prompts"), prompts, "<i8", (e.B, e.P))
    same("verl responses", t.get("responses"), responses, "<i8", (e.B, e.T))
    same("verl response_mask", t.get("response_mask"), e.per_token("responseMask", 0, np.int64), "<i8", (e.B, e.T))
    same("verl loss_mask", t.get("loss_mask"), e.per_token("responseMask", 0, np.int64), "<i8", (e.B, e.T))
    for name, key in [("advantages", "advantages"), ("outcome_advantages", "outcomeAdvantage"), ("memory_advantages", "memoryAdvantage")]:
        same(f"verl {name}", t.get(name), e.per_token(key), "<f4", (e.B, e.T))
    if e.has_logprobs():
        same("verl old_log_probs", t.get("old_log_probs"), e.per_token("oldLogp"), "<f4", (e.B, e.T))
        same("verl rollout_log_probs", t.get("rollout_log_probs"), e.per_token("oldLogp"), "<f4", (e.B, e.T))
    elif "old_log_probs" in t:
        fail("verl old_log_probs", "present although some trajectory has no log-probs")
    scores = e.scores()
    tls = np.zeros((e.B, e.T), dtype=np.float32)
    for b, r in enumerate(e.r):
        if r["responseIds"]:
            tls[b, len(r["responseIds"]) - 1] = scores[b]
    same("verl token_level_scores", t.get("token_level_scores"), tls, "<f4", (e.B, e.T))
    same("verl scores", t.get("scores"), scores, "<f4", (e.B,))
    same("verl excluded", t.get("excluded"), [r["excluded"] for r in e.r], "?", (e.B,))
    if json.loads(meta.get("mempo.uid", "null")) != [r["uid"] for r in e.r]:
        fail("verl metadata mempo.uid", "differs from the uids of batch.jsonl")
    if meta.get("mempo.pad_token_id") != str(e.pad):
        fail("verl metadata mempo.pad_token_id", f"{meta.get('mempo.pad_token_id')!r}, expected {e.pad}")


def check_tensors(path, e):
    with np.load(path, allow_pickle=False) as z:
        t = {k: z[k] for k in z.files}
    prompts, pmask = e.prompts()
    same("tensors prompt_ids", t.get("prompt_ids"), prompts, "<i4", (e.B, e.P))
    same("tensors prompt_mask", t.get("prompt_mask"), pmask, "u1", (e.B, e.P))
    same("tensors response_ids", t.get("response_ids"), e.per_token("responseIds", e.pad, np.int64), "<i4", (e.B, e.T))
    same("tensors response_mask", t.get("response_mask"), e.per_token("responseMask", 0, np.int64), "u1", (e.B, e.T))
    same("tensors attention_mask", t.get("attention_mask"), e.response_attention(), "u1", (e.B, e.T))
    for name, key in [("advantages", "advantages"), ("outcome_advantages", "outcomeAdvantage"), ("memory_advantages", "memoryAdvantage")]:
        same(f"tensors {name}", t.get(name), e.per_token(key), "<f4", (e.B, e.T))
    if e.has_logprobs():
        same("tensors old_log_probs", t.get("old_log_probs"), e.per_token("oldLogp"), "<f4", (e.B, e.T))
    same("tensors scores", t.get("scores"), e.scores(), "<f4", (e.B,))
    same("tensors excluded", t.get("excluded"), [int(r["excluded"]) for r in e.r], "u1", (e.B,))
    same("tensors sample", t.get("sample"), [r["sample"] for r in e.r], "<i4", (e.B,))
    uid = t.get("uid")
    if uid is None or uid.dtype.kind != "U" or uid.tolist() != [r["uid"] for r in e.r]:
        fail("tensors uid", f"{None if uid is None else uid.tolist()!r} differs from the uids of batch.jsonl")
    same("tensors pad_token_id", t.get("pad_token_id"), e.pad, "<i8", ())


def check_trl(path, e):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    ro = doc.get("rollout", {})
    pairs = [("prompt_ids", "promptIds"), ("completion_ids", "responseIds"), ("env_mask", "responseMask"), ("score", "score"), ("uid", "uid"), ("sample", "sample")]
    if e.has_logprobs():
        pairs.append(("logprobs", "oldLogp"))
    for key, rk in pairs:
        want = [r[rk] for r in e.r]
        if ro.get(key) != want:
            fail(f"trl {key}", "differs from batch.jsonl")
    adv = ro.get("advantages", [])
    if len(adv) != e.B:
        fail("trl advantages", f"{len(adv)} rows, expected {e.B}")
    for b, (a, r) in enumerate(zip(adv, e.r)):
        # JSON writes NaN as null: compare with NumPy, NaN equal to NaN.
        same(f"trl advantages row {b}", np.array(floats(a), dtype=np.float64), floats(r["advantages"]), shape=(len(r["advantages"]),))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", required=True)
    ap.add_argument("--pad", type=int, required=True)
    ap.add_argument("--verl")
    ap.add_argument("--tensors")
    ap.add_argument("--trl")
    a = ap.parse_args()
    e = Expected(read_records(a.batch), a.pad)
    checked = []
    for name, path, fn in [("verl", a.verl, check_verl), ("tensors", a.tensors, check_tensors), ("trl", a.trl, check_trl)]:
        if path:
            fn(path, e)
            checked.append(name)
    if FAILURES:
        print(f"FAIL: {len(FAILURES)} mismatches between the exports and {a.batch}:", file=sys.stderr)
        for f in FAILURES:
            print(f"  {f}", file=sys.stderr)
        return 1
    print(f"OK: {', '.join(checked)} match {a.batch} ({e.B} rows, P={e.P}, T={e.T}, pad {e.pad}, numpy {np.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
