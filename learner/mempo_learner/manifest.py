"""manifest.json of a model directory: every file's sha256 and size (mempo checks it at load).
A directory the learner saved also says `"writer": "mempo_learner"` there: the only kind of
non-empty directory a later save may replace (docs/learner.md, "Saved directories").
Standard library only: training/export.py imports it too."""
import hashlib
import json
import os
import stat
from typing import BinaryIO, Optional

MANIFEST = "manifest.json"
LEARNER = "mempo_learner"
# Files mempo adds to a directory the learner saved (src/train/checkpoint.ts: trainer.json marks a
# checkpoint complete): replacing such a directory may remove them with the rest.
ADDED_BY_MEMPO = ("trainer.json",)


def write_manifest(out_dir: str, name: str, writer: Optional[str] = None) -> None:
    files = {}
    for n in sorted(os.listdir(out_dir)):
        p = os.path.join(out_dir, n)
        if n == MANIFEST or not os.path.isfile(p):
            continue
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        files[n] = {"sha256": h.hexdigest(), "bytes": os.path.getsize(p)}
    m = {"name": name, "files": files}
    if writer is not None:
        m["writer"] = writer
    with open(os.path.join(out_dir, MANIFEST), "w") as f:
        json.dump(m, f, indent=2)
        f.write("\n")


def open_regular(path: str) -> BinaryIO:
    """Opens a regular file for reading; a FIFO, device or directory raises ValueError at once
    (opened non-blocking, so a FIFO with no writer cannot hang the caller)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path} is not a regular file")
        return os.fdopen(fd, "rb")  # O_NONBLOCK does nothing to a regular file's reads
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (else ValueError naming it)."""
    with open_regular(path) as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path} is over the {limit}-byte limit")
    return data


def foreign_content(d: str) -> Optional[str]:
    """None when directory d holds only what the learner wrote into it (its manifest says
    `"writer": "mempo_learner"` and lists every other file) and the files mempo adds; else what
    is foreign there, in words."""
    names = os.listdir(d)
    if MANIFEST not in names:
        return f"no {MANIFEST} from {LEARNER}"
    try:
        m = json.loads(read_regular(os.path.join(d, MANIFEST), 64 << 20))
    except (OSError, ValueError, RecursionError) as e:
        return f"{MANIFEST} does not parse ({e})"
    if not isinstance(m, dict) or m.get("writer") != LEARNER or not isinstance(m.get("files"), dict):
        return f'its {MANIFEST} is not one {LEARNER} wrote (no "writer": "{LEARNER}")'
    extra = sorted(n for n in names if n != MANIFEST and n not in m["files"] and n not in ADDED_BY_MEMPO)
    if extra:
        return f"it holds {extra[0]}, which {LEARNER} did not write"
    return None
