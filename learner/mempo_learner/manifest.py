"""manifest.json of a model directory: every file's sha256 and size (mempo checks it at load).
Standard library only: training/export.py imports it too."""
import hashlib
import json
import os


def write_manifest(out_dir: str, name: str) -> None:
    files = {}
    for n in sorted(os.listdir(out_dir)):
        p = os.path.join(out_dir, n)
        if n == "manifest.json" or not os.path.isfile(p):
            continue
        with open(p, "rb") as f:
            files[n] = {"sha256": hashlib.sha256(f.read()).hexdigest(), "bytes": os.path.getsize(p)}
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump({"name": name, "files": files}, f, indent=2)
        f.write("\n")
