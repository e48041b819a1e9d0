"""Train mempo-tiny, the embedded MemPO search-agent model, and export it.

One command (from the repository root):

    npm run train            # bash training/train.sh: stage 1 (this script from random weights,
                             # --steps 7000), stage 2 (--init stage 1, --mix probes-full) and the
                             # repair (--mix repair); the flags of each: training/README.md

What it does (seeded: world 20260529, training 1234; CPU, 2 threads by default; with --steps 0, the
default, the step count fits a wall-clock budget, --max-minutes, and so follows the machine's speed):
  1. builds the TypeScript (`npx tsc -p tsconfig.tools.json`) unless dist-tools/tools/world/cli.js exists
     (rebuild it yourself after changing tools/world or the src/ modules it imports),
  2. writes tokenised per-round samples of the world's oracle trajectories with the shipped
     tokenizer (node dist-tools/tools/world/cli.js samples ...) into training/out/,
  3. trains the decoder on the output tokens of those samples (contexts of both policies),
  4. prints the loss curve, saves training/loss.png, and a per-round greedy check on dev,
  5. exports models/mempo-tiny/model.onnx + config.json + manifest.json.

Flags: --steps N, --max-minutes M, --skip-data, --no-export, --tokens-per-step T, --lr X,
--aux-weight W, --worlds N --per-world M (training mix: the shipped world and N-1 auxiliary
worlds, M train questions each; default 12 x 1100), --page-questions P (and P page questions each,
whose trajectories open pages with <access>; default 0), --init DIR (continue from a model directory's
weights), --mix NAME (sample-kind shares, MIXES; default scratch, probes with --init), --distill W
(with --init: the agent's own rounds learn KL to the --init weights instead of the oracle),
--rollout-samples F (with --init, --distill and --mix probes-full-rollouts or repair: the agent's own
rounds from a rollout, tools/world/rollout-samples.ts, distilled like the oracle's), --rollout-share S
(their share of tokens, default the mix's; the other kinds keep their proportions in the rest),
--rollout-teacher DIR (the rollout samples learn KL to this model's weights, not --init's),
--anchor-probes (the probes learn KL to the --init weights too, not the gold: a repair that keeps
the --init model's memory reward),
--threads N, --run-dir DIR (log, checkpoint, metrics; default training/out), --export-dir DIR.
"""
import os as _os
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # the machine is shared: do not spin
import argparse
import collections
import json
import math
import os
import random
import re
import subprocess
import sys
import time
import gc
import hashlib

try:
    import torch  # noqa: F401
except ImportError:  # pyenv python without Debian's torch: re-run under the system python
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != "/usr/bin/python3":
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
# model.py lives with the learner, which trains the same architecture (learner/mempo_learner)
sys.path.insert(0, os.path.join(ROOT, "learner", "mempo_learner"))
from model import Config, TinyLM, param_count  # noqa: E402

OUT = os.path.join(HERE, "out")
MODEL_DIR = os.path.join(ROOT, "models", "mempo-tiny")
ROW = 512

# Share of trained tokens per sample kind. The score kinds are the memory reward's probes
# (tools/world/samples.ts): after the memory context, after the full context, and either where the
# gold is not in the context; they get no loss on their context (tensorize). `scratch` is stage 1
# (from random weights: the shares of the 2026-11-29 run); `probes` and `probes-full` are stage 2,
# continued training with --init, mostly the probes (two from-scratch runs with full probes in the
# mix stalled on the loss plateau before names are copied: training/README.md). `probes-full` is the
# shipped stage 2, with --distill: its agent rounds learn the stage-1 distributions, not the oracle.
MIXES = {
    "scratch": {"memory": 0.45, "stream": 0.25, "score": 0.10, "copy": 0.20},
    "probes": {"memory": 0.27, "stream": 0.16, "score": 0.07, "score_full": 0.40, "score_absent": 0.02, "copy": 0.08},
    "probes-full": {"memory": 0.24, "stream": 0.14, "score": 0.06, "score_full": 0.50, "score_absent": 0.02, "copy": 0.04},
    # probes-full plus the agent's own rounds (--rollout-samples, tools/world/rollout-samples.ts): the
    # other shares scale by 1 - rollout (--rollout-share), so that --steps N / (1 - rollout) trains
    # each of them on as many tokens as probes-full in N steps; distillation then also covers
    # contexts only the agent writes.
    "probes-full-rollouts": {"memory": 0.24, "rollout": 0.08, "stream": 0.14, "score": 0.06, "score_full": 0.50,
                             "score_absent": 0.02, "copy": 0.04},
    # a repair stage from the shipped weights (--anchor-probes, --rollout-teacher): the agent's rollouts
    # learn another model's rounds, every other kind is held to the --init weights; no copy drill.
    "repair": {"rollout": 0.30, "memory": 0.35, "stream": 0.15, "score": 0.07, "score_full": 0.36, "score_absent": 0.07},
    # training continued (--init) on the page world with the bundles' share raised: the stage 1 trained
    # from scratch with pages (--page-questions) never learnt a bundle's second round (it takes the mem's
    # last answer as the next subject, as in a chain: training/README.md, "Bundles"). `_bundle`: samples
    # of 2-10 objectives, `_page`: of page questions; the plain kind keeps the rest (the chains). In that
    # stage 1 the memory tokens were 48 % chains, 26 % bundles, 27 % pages; here 40 / 36 / 24.
    "bundles": {"memory": 0.20, "memory_bundle": 0.18, "memory_page": 0.12, "stream": 0.10, "stream_bundle": 0.08,
                "stream_page": 0.07, "score": 0.10, "copy": 0.15},
    # the same with the page questions' share raised (memory tokens 29 / 29 / 42 %): 1,500 steps of
    # `bundles` from the search-only model kept the old kinds but copied no page URL right
    "bundles-pages": {"memory": 0.15, "memory_bundle": 0.15, "memory_page": 0.22, "stream": 0.07, "stream_bundle": 0.06,
                      "stream_page": 0.12, "score": 0.10, "copy": 0.13},
    # bundles-pages with part of the copy drill given to the URL drill (url_samples): 1,000 steps of
    # bundles-pages from the search-only model wrote every page URL's first word right and its second
    # wrong (`Lelos_Broup` for Lelos Stuzo's https://world.wiki/Lelos_Stuzo)
    "bundles-pages-url": {"memory": 0.15, "memory_bundle": 0.15, "memory_page": 0.22, "stream": 0.07, "stream_bundle": 0.06,
                          "stream_page": 0.12, "score": 0.10, "copy": 0.05, "copy_url": 0.08},
    # bundles-pages-url continued from its own weights with the chains' `full` rounds (stream) raised from 7 to
    # 16 % of the tokens, from the page rounds and the bundles' memory rounds: stage 1 after bundles-pages-url
    # is at 71.5 % under `full` on the old kinds (3-hop 86.1 %) against the search-only model's 71.8 %
    "bundles-pages-stream": {"memory": 0.15, "memory_bundle": 0.13, "memory_page": 0.17, "stream": 0.16, "stream_bundle": 0.06,
                             "stream_page": 0.10, "score": 0.10, "copy": 0.05, "copy_url": 0.08},
    # stage 2 after bundles-pages-url: probes-full's shares, its agent rounds split as in that stage 1
    # (memory 29 / 29 / 42 %, stream 28 / 24 / 48 %) and its copy drill shared with the URL drill.
    # probes-full drew bundle rounds in their natural share (a quarter of the memory tokens) and lost
    # stage 1's bundles: 81.7 -> 61.7 % on the 60 test bundles of 2.
    "probes-full-bundles": {"memory": 0.069, "memory_bundle": 0.069, "memory_page": 0.102, "stream": 0.039,
                            "stream_bundle": 0.034, "stream_page": 0.067, "score": 0.06, "score_full": 0.50,
                            "score_absent": 0.02, "copy": 0.015, "copy_url": 0.025},
    # the same with the chains at probes-full's own share of them (memory 48 %, stream 51 %): probes-full-bundles
    # took the bundles' tokens from the chains and lost 3-hop chains under `full` (79.7 % against 86.1 %).
    # The bundles keep probes-full-bundles' shares; the page rounds get the rest.
    "probes-full-chains": {"memory": 0.115, "memory_bundle": 0.069, "memory_page": 0.056, "stream": 0.071,
                           "stream_bundle": 0.034, "stream_page": 0.035, "score": 0.06, "score_full": 0.50,
                           "score_absent": 0.02, "copy": 0.015, "copy_url": 0.025},
}
AGENT_KINDS = ("memory", "stream", "rollout")  # the agent's own rounds: with --distill, KL to the --init weights
PROBE_KINDS = ("score", "score_full", "score_absent")  # the memory reward's probes: with --anchor-probes, KL too


def mix_shares(name, rollout_share=None):
    """MIXES[name], with a `rollout` share (default the mix's own, or --rollout-share) and the
    other kinds' shares, which sum to 1 in MIXES, scaled into the rest."""
    mix = dict(MIXES[name])
    if "rollout" not in mix:
        if rollout_share is not None:
            raise SystemExit(f"--rollout-share needs a mix with a `rollout` share (probes-full-rollouts), not {name}")
        return mix
    r = mix["rollout"] if rollout_share is None else rollout_share
    if not 0 < r < 1:
        raise SystemExit(f"--rollout-share {r}: must be in (0, 1)")
    return {k: (r if k == "rollout" else round(v * (1 - r), 6)) for k, v in mix.items()}


def whole_word_pairs():
    """(" word", "word") token id pairs of the tokenizer's whole-word tokens (name pieces and
    years; tools/world/tokenizer.ts puts them right after the 256 byte symbols)."""
    with open(os.path.join(MODEL_DIR, "tokenizer.json")) as f:
        tok = json.load(f)
    vocab = tok["model"]["vocab"]
    n_special = len(tok["added_tokens"])
    inv = {i: t for t, i in vocab.items()}
    pairs, i = [], n_special + 256
    while i + 1 in inv and inv[i].startswith("\u0120") and inv[i][1:] == inv[i + 1]:
        pairs.append((i, i + 1))
        i += 2
    return pairs


def copy_samples(n, rng, pairs, fixed=False):
    """Induction drill: random name pieces / years, a tag followed by a run of them, more pieces,
    the tag again, then the same run with its first word in the no-space form (as after
    `<search>` or `<answer>`). Only the repeat is trained. Names in the agent data are unpredictable except by copying them from the context;
    this teaches the copy on its own, so the agent data is not spent discovering it. `fixed`:
    every sample has the same layout, so position alone finds the run (the warm-up: the copy
    circuit forms in ~100 steps this way, then the variable layout makes it content-based)."""
    tags = [3, 7, 9]  # <mem>, <search>, <answer> (src/protocol/tags.ts SPECIAL_TOKENS order)
    out = []
    for _ in range(n):
        k = 4 if fixed else rng.randint(2, 12)
        run = [rng.choice(pairs) for _ in range(k)]
        first = [sp for sp, _ in run]
        again = [run[0][1]] + [sp for sp, _ in run[1:]]
        filler = [rng.choice(pairs)[0] for _ in range(16 if fixed else rng.randint(0, 16))]
        tag = rng.choice(tags)  # the cue: the run follows the tag's earlier occurrence
        cut = 8 if fixed else rng.randint(0, len(filler))
        c = filler[cut:] + [tag] + first + filler[:cut] + [tag]
        out.append({"p": "copy", "c": c, "o": again})
    return out


def bpe_ids(text, tok):
    """ASCII text to ids as the shipped byte-level BPE tokenizer (tokenizer.json) encodes it: GPT-2's
    pre-tokenizer split, a pre-token that is in the vocabulary whole taken whole (ignore_merges), the
    others merged pair by pair in the merges' order."""
    if not text.isascii():
        raise SystemExit(f"bpe_ids: ASCII only, not {text!r}")
    vocab = tok["model"]["vocab"]
    ranks = {tuple(m.split(" ")): i for i, m in enumerate(tok["model"]["merges"])}
    out = []
    for piece in re.findall(r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+", text):
        word = piece.replace(" ", "\u0120").replace("\n", "\u010a")
        if word in vocab:
            out.append(vocab[word])
            continue
        syms = list(word)
        while len(syms) > 1:
            best = min(range(len(syms) - 1), key=lambda i: ranks.get((syms[i], syms[i + 1]), 1 << 30))
            if (syms[best], syms[best + 1]) not in ranks:
                break
            syms[best:best + 2] = [syms[best] + syms[best + 1]]
        out += [vocab[x] for x in syms]
    return out


URL_PREFIX = "https://world.wiki/"  # the embedded pages' URLs: tools/world (a name's words joined by `_`)


def url_samples(n, rng, pairs):
    """URL drill (issue 32): an `<access>` URL spells a name's words in their no-space forms joined by
    `_`. The context holds 2-6 search-result heads, `](URL):` and the name in its spaced form, with
    names that share a first word (as Lelos Stuzo and Lelos Broup do), then a name in its spaced form
    and `<access>https://world.wiki/`; the target is that name's URL tail and `</access>`. The copy
    drill teaches a name's first word only; after `_` the next word is found by the two tokens before
    it, which the agent data alone did not teach in 1,000 steps."""
    with open(os.path.join(MODEL_DIR, "tokenizer.json")) as f:
        tok = json.load(f)

    def ids(text):
        return bpe_ids(text, tok)
    head, tail, opener, closer, us = ids("](" + URL_PREFIX), ids("):"), ids("<access>" + URL_PREFIX), ids("</access>"), ids("_")[0]

    def url(name):
        out = [name[0][1]]
        for _sp, ns in name[1:]:
            out += [us, ns]
        return out
    inv = {i: t for t, i in tok["model"]["vocab"].items()}
    pairs = [(sp, ns) for sp, ns in pairs if not inv[ns].isdigit()]  # name pieces: a URL holds no year
    out = []
    for _ in range(n):
        firsts = [rng.choice(pairs) for _ in range(rng.randint(1, 3))]
        names = [[rng.choice(firsts)] + [rng.choice(pairs) for _ in range(rng.choice((1, 1, 1, 2)))]
                 for _ in range(rng.randint(2, 6))]
        c = []
        for name in names:
            c += head + url(name) + tail + [sp for sp, _ns in name]
            c += [rng.choice(pairs)[0] for _ in range(rng.randint(0, 6))]
        target = rng.choice(names)
        c += [sp for sp, _ns in target] + [rng.choice(pairs)[0] for _ in range(rng.randint(0, 4))] + opener
        out.append({"p": "copy_url", "c": c, "o": url(target) + closer})
    return out


def log(msg, fh=None):
    print(msg, flush=True)
    if fh:
        fh.write(msg + "\n")
        fh.flush()


def make_data(skip, worlds, per_world, pages=0, out=OUT):
    # with page questions (issue 32) the file has its own name, so --skip-data never reuses one without
    train = os.path.join(out, f"samples-train-w{worlds}.jsonl" if pages == 0 else f"samples-train-w{worlds}-p{pages}.jsonl")
    # dev with pages: every dev page question too (and the page-tool prompt on every trajectory)
    dev = os.path.join(out, "samples-dev.jsonl" if pages == 0 else "samples-dev-pages.jsonl")
    if skip and os.path.exists(train) and os.path.exists(dev):
        return train, dev
    os.makedirs(out, exist_ok=True)
    if not os.path.exists(os.path.join(ROOT, "dist-tools", "tools", "world", "cli.js")):
        subprocess.run(["npx", "tsc", "-p", "tsconfig.tools.json"], cwd=ROOT, check=True)
    # the shipped world's train split (+ auxiliary worlds from other seeds with --worlds > 1)
    subprocess.run(["node", "dist-tools/tools/world/cli.js", "samples", "--split", "train", "--draws", "1",
                    "--worlds", str(worlds), "--per-world", str(per_world), "--no-full",
                    *(["--pages", str(pages)] if pages > 0 else []),
                    "--samples-out", train], cwd=ROOT, check=True)
    subprocess.run(["node", "dist-tools/tools/world/cli.js", "samples", "--split", "dev", "--draws", "1", "--flaw-rate", "0",
                    *(["--pages", "100"] if pages > 0 else []), "--samples-out", dev], cwd=ROOT, check=True)
    return train, dev


def file_digest(paths):
    """sha256 over the files' bytes, in order."""
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def load(path):
    out = []
    with open(path) as f:
        for line in f:
            if line.strip():
                out.append(json.loads(line))
    return out


def mix_key(s, mix):
    """The mix share a sample draws from: its kind, or `<kind>_page` / `<kind>_bundle` where the mix
    splits that kind by question (a page question, or a bundle of 2-10 objectives)."""
    p = s["p"]
    if s.get("pg") and p + "_page" in mix:
        return p + "_page"
    if s.get("k", 1) >= 2 and p + "_bundle" in mix:
        return p + "_bundle"
    return p


def select(samples, budget_tokens, rng, mix):
    by = {k: [] for k in mix}
    for s in samples:
        by.setdefault(mix_key(s, mix), []).append(s)
    chosen = []
    for k, share in mix.items():
        xs = by[k][:]
        rng.shuffle(xs)
        tot = 0
        for s in xs:
            n = len(s["c"]) + len(s["o"])
            if tot + n > budget_tokens * share:
                break
            chosen.append(s)
            tot += n
    rng.shuffle(chosen)
    return chosen


def batches(samples, tokens_per_step, rng):
    """Pack samples into rows (<= ROW tokens, or one long sample per row); group rows into
    batches of about tokens_per_step (padded) tokens."""
    short = [s for s in samples if len(s["c"]) + len(s["o"]) <= ROW]
    long_ = [s for s in samples if len(s["c"]) + len(s["o"]) > ROW]
    rows = []
    cur, curlen = [], 0
    for s in short:
        n = len(s["c"]) + len(s["o"])
        if curlen + n > ROW:
            rows.append(cur)
            cur, curlen = [], 0
        cur.append(s)
        curlen += n
    if cur:
        rows.append(cur)
    out = []
    per = max(1, tokens_per_step // ROW)
    for i in range(0, len(rows), per):
        out.append(rows[i:i + per])
    long_.sort(key=lambda s: len(s["c"]) + len(s["o"]))
    i = 0
    while i < len(long_):
        L = len(long_[i]["c"]) + len(long_[i]["o"])
        group = []
        while i < len(long_):
            n = len(long_[i]["c"]) + len(long_[i]["o"])
            if group and (len(group) + 1) * n > tokens_per_step:
                break
            group.append([long_[i]])
            i += 1
        out.append(group)
    rng.shuffle(out)
    return out


def tensorize(rows, distilled=AGENT_KINDS, rollout_teacher=False):
    """ids, positions, segment ids, targets of generated tokens (tgt) and next-token targets of
    every other token of the same sample (aux: prompt, context, observations), and which teacher
    each target learns from with --distill (teach: 0 none, cross-entropy; 1 the --init weights, for
    the kinds in `distilled`; 2 the --rollout-teacher, for `rollout` samples when there is one)."""
    T = max(sum(len(s["c"]) + len(s["o"]) for s in r) for r in rows)
    B = len(rows)
    ids = torch.zeros(B, T, dtype=torch.long)
    pos = torch.zeros(B, T, dtype=torch.long)
    seg = torch.full((B, T), -1, dtype=torch.long)
    tgt = torch.full((B, T), -100, dtype=torch.long)
    aux = torch.full((B, T), -100, dtype=torch.long)
    teach = torch.zeros(B, T, dtype=torch.int8)
    for b, r in enumerate(rows):
        o = 0
        for j, s in enumerate(r):
            seq = torch.tensor(s["c"] + s["o"])
            n = len(seq)
            c = len(s["c"])
            ids[b, o:o + n] = seq
            pos[b, o:o + n] = torch.arange(n)
            seg[b, o:o + n] = j
            gen = torch.zeros(n, dtype=torch.bool)  # token t is a generated (trained) token
            if "m" in s:
                gen[c:] = torch.tensor(s["m"]) > 0
            else:
                gen[c:] = True
            nxt = seq[1:]
            # position t predicts token t+1
            tgt[b, o:o + n - 1] = torch.where(gen[1:], nxt, torch.full_like(nxt, -100))
            if not s["p"].startswith("score"):  # a probe's context ends in the forced <answer>: never a target
                aux[b, o:o + n - 1] = torch.where(~gen[1:], nxt, torch.full_like(nxt, -100))
            if s["p"] in distilled:
                k = 2 if (rollout_teacher and s["p"] == "rollout") else 1
                teach[b, o:o + n - 1] = gen[1:].to(torch.int8) * k
            o += n
    return ids, pos, seg, tgt, aux, teach


def loss_fn(lm, ids, pos, seg, tgt, aux=None, aux_w=0.0, teachers=(), teach=None, distill_w=0.0):
    """Cross-entropy on the targets (returned as `main` too) plus aux_w times the context loss.
    With teachers (stage 2, --distill): a target whose teach index is k > 0 is trained on distill_w
    times KL(teachers[k-1] || model) instead of its cross-entropy, so the probes are learnt while the
    agent's next-token distributions stay those of the stage-1 weights."""
    h = lm_hidden(lm, ids, pos, seg)
    m = tgt >= 0
    logits = lm.logits(h[m])
    per = F.cross_entropy(logits, tgt[m], reduction="none")
    main = per.mean()
    loss = main
    if teachers and distill_w > 0:
        tk = teach[m]
        kl_sum = per.new_zeros(())
        for k, teacher in enumerate(teachers, start=1):
            sel = tk == k
            if not bool(sel.any()):
                continue
            with torch.no_grad():
                t = F.log_softmax(teacher.logits(lm_hidden(teacher, ids, pos, seg)[m][sel]), -1)
            kl_sum = kl_sum + F.kl_div(F.log_softmax(logits[sel], -1), t, log_target=True, reduction="none").sum()
        # same normalisation as the cross-entropy: a mean over all trained tokens
        loss = (per.masked_fill(tk > 0, 0.0).sum() + distill_w * kl_sum) / per.numel()
    if aux is not None and aux_w > 0:
        ma = aux >= 0
        loss = loss + aux_w * F.cross_entropy(lm.logits(h[ma]), aux[ma])
    return loss, main, int(m.sum())


def lm_hidden(lm, ids, pos, seg):
    from model import rope_cos_sin
    T = ids.shape[1]
    x = lm.embed(ids)
    cos, sin = rope_cos_sin(pos, lm.c.head_dim, lm.c.rope_theta)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    allowed = (seg.unsqueeze(2) == seg.unsqueeze(1)) & causal
    bias = torch.zeros(allowed.shape).masked_fill(~allowed, -1e9).unsqueeze(1)
    pb = lm.prev_bias(seg)
    for i, b in enumerate(lm.blocks):
        x, _, _ = b(x, cos, sin, bias, prev_bias=pb if i == 0 else None)
    return x


@torch.no_grad()
def dev_check(lm, dev, n, fh):
    """Per-round greedy exact match against the oracle output on dev contexts. Teacher-forced
    argmax at every output position equals the target <=> greedy decoding reproduces it."""
    lm.eval()
    res = {}
    rng = random.Random(7)
    for p in ("memory", "full", "score", "score_full", "stream"):
        xs = [s for s in dev if s["p"] == p and len(s["c"]) + len(s["o"]) <= 1024]
        rng.shuffle(xs)
        xs = xs[:n]
        ok = 0
        for s in xs:
            ids, pos, seg, tgt, _, _ = tensorize([[s]])
            h = lm_hidden(lm, ids, pos, seg)
            m = tgt >= 0
            pred = lm.logits(h[m]).argmax(-1)
            ok += int(bool((pred == tgt[m]).all()))
        res[p] = round(ok / max(1, len(xs)), 3)
    pg = [s for s in dev if s["p"] == "memory" and s.get("pg") and len(s["c"]) + len(s["o"]) <= 1024]
    if pg:  # the page questions' rounds alone (issue 32): <access> with a copied URL, the fact into <mem>
        rng.shuffle(pg)
        ok = 0
        for s in pg[:n]:
            ids, pos, seg, tgt, _, _ = tensorize([[s]])
            pred = lm.logits(lm_hidden(lm, ids, pos, seg)[tgt >= 0]).argmax(-1)
            ok += int(bool((pred == tgt[tgt >= 0]).all()))
        res["memory_page"] = round(ok / len(pg[:n]), 3)
    lm.train()
    log(f"dev per-round exact-match (greedy vs oracle): {json.dumps(res)}", fh)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=0,
                    help="optimiser steps; 0 = auto: fit the measured step time into --max-minutes")
    ap.add_argument("--max-minutes", type=float, default=34.0, help="time budget of the optimisation loop")
    ap.add_argument("--tokens-per-step", type=int, default=2048)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--aux-weight", type=float, default=0.2,
                    help="weight of the next-token loss on context/observation tokens")
    ap.add_argument("--skip-data", action="store_true")
    ap.add_argument("--worlds", type=int, default=12,
                    help="training worlds: the shipped one plus N-1 generated from other seeds (fresh names)")
    ap.add_argument("--per-world", type=int, default=1100, help="questions per world (0 = all train questions)")
    ap.add_argument("--page-questions", type=int, default=0,
                    help="page questions per world (issue 32): their oracle trajectories open pages with <access>; "
                         "0 (default) = the samples of the shipped model, without pages")
    ap.add_argument("--copy-warmup", type=int, default=120, help="optimiser steps of the fixed-layout copy drill alone, first")
    ap.add_argument("--no-export", action="store_true")
    ap.add_argument("--dev-n", type=int, default=60)
    ap.add_argument("--init", default=None,
                    help="start from this model directory's weights (its model.onnx) instead of a random init")
    ap.add_argument("--mix", choices=sorted(MIXES), default=None,
                    help="sample-kind shares (default: scratch, or probes with --init)")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    ap.add_argument("--distill", type=float, default=0.0,
                    help="with --init: weight of KL(init weights || model) on the agent's own rounds")
    ap.add_argument("--rollout-samples", default=None,
                    help="with --init and --distill: `rollout` samples, the agent's own rounds "
                         "(node dist-tools/tools/world/cli.js rollout-samples --batch B --samples-out F)")
    ap.add_argument("--rollout-share", type=float, default=None,
                    help="with probes-full-rollouts or repair: the `rollout` share of tokens (default the mix's); "
                         "the other kinds keep their proportions in the rest")
    ap.add_argument("--rollout-teacher", default=None,
                    help="with --rollout-samples: the rollout samples learn KL to this model directory's weights "
                         "instead of --init's")
    ap.add_argument("--anchor-probes", action="store_true",
                    help="with --distill: the probes (score kinds) learn KL to the --init weights instead of the "
                         "gold, so that a repair keeps the --init model's memory reward")
    ap.add_argument("--samples-dir", default=OUT, help="where the samples files are written (and found with --skip-data)")
    ap.add_argument("--run-dir", default=OUT,
                    help="where the log, checkpoint, metrics and loss curve go (samples stay in training/out)")
    ap.add_argument("--export-dir", default=MODEL_DIR, help="model directory the weights are exported to")
    ap.add_argument("--resume", action="store_true",
                    help="continue from RUN_DIR/checkpoint.pt (written every --checkpoint-every steps) when it is there; "
                         "it must have been written with the same training flags")
    ap.add_argument("--checkpoint-every", type=int, default=200)
    a = ap.parse_args()
    if a.resume and a.steps <= 0:
        raise SystemExit("--resume needs --steps N: the auto step count follows the machine's speed, so a resumed run would not be the same run")
    run_dir = a.run_dir
    mix = mix_shares(a.mix or ("probes" if a.init else "scratch"), a.rollout_share)
    if a.rollout_samples and not (a.init and a.distill > 0):
        raise SystemExit("--rollout-samples needs --init and --distill: the agent's own rounds are only distilled, never imitated")
    if (mix.get("rollout", 0) > 0) != bool(a.rollout_samples):
        raise SystemExit("--rollout-samples and a mix with a `rollout` share (probes-full-rollouts, repair) go together")
    if a.rollout_teacher and not a.rollout_samples:
        raise SystemExit("--rollout-teacher needs --rollout-samples: it is the teacher of the `rollout` samples only")
    if a.anchor_probes and not (a.init and a.distill > 0):
        raise SystemExit("--anchor-probes needs --init and --distill: the probes are held to the --init weights")
    distilled = AGENT_KINDS + (PROBE_KINDS if a.anchor_probes else ())

    t0 = time.time()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)
    os.makedirs(run_dir, exist_ok=True)
    ckpt_path = os.path.join(run_dir, "checkpoint.pt")
    # what fixes the data and the optimisation: a checkpoint continues only the run that wrote it
    fingerprint = {k: getattr(a, k) for k in ("steps", "tokens_per_step", "lr", "seed", "aux_weight", "worlds", "per_world",
                                              "page_questions", "copy_warmup", "init", "mix", "distill", "rollout_samples",
                                              "rollout_share", "rollout_teacher", "anchor_probes")}
    ckpt = None
    if not a.resume and os.path.exists(ckpt_path):  # never overwrite a run's checkpoint unasked
        raise SystemExit(f"{ckpt_path} exists: --resume continues that run; to start over, remove it or give another --run-dir")
    if a.resume and os.path.exists(ckpt_path):
        # weights_only: the unpickler builds tensors and plain containers only, so a checkpoint
        # cannot run code (README: nothing read from disk is executed)
        # (torch 1.13's weights-only unpickler knows no floats: the plain data travels as one JSON string)
        ckpt = torch.load(ckpt_path, map_location="cpu", weights_only=True)
        ckpt.update(json.loads(ckpt.pop("meta")))
        if {k: v for k, v in ckpt["fingerprint"].items() if k != "data"} != fingerprint:
            diff = {k: (ckpt["fingerprint"].get(k), v) for k, v in fingerprint.items() if ckpt["fingerprint"].get(k) != v}
            raise SystemExit(f"--resume: {ckpt_path} was written by another run (flag: (checkpoint, now)): {diff}; "
                             "give another --run-dir, or remove that file to start over")
    fh = open(os.path.join(run_dir, "train.log"), "a" if ckpt else "w")
    train_path, dev_path = make_data(a.skip_data, a.worlds, a.per_world, a.page_questions, a.samples_dir)
    # the samples themselves (regenerated by every run without --skip-data): a checkpoint continues only on the same data
    fingerprint["data"] = file_digest([train_path] + ([a.rollout_samples] if a.rollout_samples else []))
    if ckpt and ckpt["fingerprint"].get("data") != fingerprint["data"]:
        raise SystemExit(f"--resume: {ckpt_path} was trained on other samples than {train_path} now holds "
                         f"(sha256 {ckpt['fingerprint'].get('data')} against {fingerprint['data']}); "
                         "give another --run-dir, or remove that file to start over")
    samples = load(train_path)
    if a.rollout_samples:
        samples += load(a.rollout_samples)
    pairs = whole_word_pairs()
    samples += copy_samples(100000, rng, pairs)
    if "copy_url" in mix:  # its own generator, so that every other mix draws exactly the samples it did before
        samples += url_samples(60000, random.Random(a.seed + 1), pairs)
    dev = load(dev_path)
    max_steps = a.steps if a.steps > 0 else 8000
    budget = int(max_steps * a.tokens_per_step * 0.9)
    chosen = select(samples, budget, rng, mix)
    del samples
    gc.collect()
    gc.freeze()
    bs = batches(chosen, a.tokens_per_step, rng)
    if a.copy_warmup > 0:  # copy drill first: the induction circuit forms before the agent data
        bs = batches(copy_samples(a.copy_warmup * 90, rng, pairs, fixed=True), a.tokens_per_step, rng)[: a.copy_warmup] + bs
    log(f"mix: {json.dumps(mix)}" + (f", from {a.init}" if a.init else ""), fh)
    log(f"data: {len(chosen)} samples, {sum(len(s['c']) + len(s['o']) for s in chosen)} tokens, "
        f"{len(bs)} batches ({json.dumps(collections.Counter(s['p'] for s in chosen))}); prep {time.time() - t0:.0f}s", fh)

    cfg = Config()
    with open(os.path.join(MODEL_DIR, "tokenizer.json")) as f:
        n_vocab = len(json.load(f)["model"]["vocab"])
    if n_vocab > cfg.vocab_size:
        raise SystemExit(f"tokenizer has {n_vocab} tokens but the model's vocab_size is {cfg.vocab_size}")
    if a.init:  # the learner's reader of the exported initializers (learner/mempo_learner/tiny.py)
        sys.path.insert(0, os.path.join(ROOT, "learner"))
        from mempo_learner.tiny import TinyModel
        lm = TinyModel(a.init).lm
        if lm.c.to_dict() != cfg.to_dict():
            raise SystemExit(f"--init {a.init}: config {lm.c.to_dict()} differs from {cfg.to_dict()}")
    else:
        lm = TinyLM(cfg)
    teachers = []  # teach index k learns from teachers[k - 1] (tensorize)
    if a.distill > 0:
        if not a.init:
            raise SystemExit("--distill needs --init (the weights to stay close to)")
        for d in [a.init] + ([a.rollout_teacher] if a.rollout_teacher else []):
            t = TinyModel(d).lm.eval()
            if t.c.to_dict() != cfg.to_dict():
                raise SystemExit(f"teacher {d}: config {t.c.to_dict()} differs from {cfg.to_dict()}")
            for p in t.parameters():
                p.requires_grad_(False)
            teachers.append(t)
    n_params = param_count(lm)
    log(f"model: {n_params} parameters, config {json.dumps(cfg.to_dict())}", fh)
    decay = [p for n, p in lm.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in lm.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05},
                             {"params": no_decay, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    steps = min(max_steps, len(bs))
    warm = 50
    budget_s = a.max_minutes * 60

    def lr_at(s, el):
        """Linear warm-up, then cosine decay to 5% over the step budget (--steps) or, in auto
        mode, over the wall-clock budget (the loop stops when it is spent)."""
        if s < warm:
            return a.lr * (s + 1) / warm
        p = (s - warm) / max(1, steps - warm) if a.steps > 0 else el / budget_s
        return a.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(1.0, p))))

    curve = []
    t_train = time.time()
    ema = None
    lm.train()
    step = 0
    lr = a.lr
    done_s = 0.0  # training seconds of earlier sessions (resume)
    if ckpt:
        lm.load_state_dict(ckpt["model"])
        opt.load_state_dict({"state": {int(k): v for k, v in ckpt["opt_state"].items()}, "param_groups": ckpt["param_groups"]})
        step, ema, done_s = int(ckpt["step"]), ckpt["ema"], float(ckpt["train_s"])
        curve = [(int(x), float(y)) for x, y in ckpt["curve"]]
        log(f"resumed from {ckpt_path} at step {step}/{steps}", fh)
        del ckpt

    def save_checkpoint(next_step):
        """The whole optimisation state, written to a temporary file and renamed over the last one."""
        tmp = ckpt_path + ".tmp"
        osd = opt.state_dict()
        meta = {"fingerprint": fingerprint, "param_groups": osd["param_groups"], "step": next_step, "ema": ema,
                "train_s": done_s + time.time() - t_train, "curve": curve}
        torch.save({"model": lm.state_dict(), "opt_state": {str(k): v for k, v in osd["state"].items()},
                    "meta": json.dumps(meta)}, tmp)
        os.replace(tmp, ckpt_path)
    while step < steps:
        lr = lr_at(step, time.time() - t_train)
        for g in opt.param_groups:
            g["lr"] = lr
        ids, pos, seg, tgt, aux, teach = tensorize(bs[step], distilled, bool(a.rollout_teacher))
        loss, main_loss, ntok = loss_fn(lm, ids, pos, seg, tgt, aux, a.aux_weight, teachers, teach, a.distill)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(lm.parameters(), 1.0)
        opt.step()
        lv = float(main_loss)
        ema = lv if ema is None else 0.95 * ema + 0.05 * lv
        curve.append((step, lv))
        el = time.time() - t_train
        if step % 10 == 0 or step == steps - 1:
            log(f"step {step:4d}/{steps} loss {lv:.4f} ema {ema:.4f} objective {float(loss):.4f} lr {lr:.2e} "
                f"tokens {ids.numel()} out-tokens {ntok} elapsed {el / 60:.1f}m", fh)
        if a.steps > 0 and (step + 1) % a.checkpoint_every == 0 and step + 1 < steps:
            save_checkpoint(step + 1)
        if a.steps == 0 and el > budget_s:
            log(f"time budget reached at step {step}", fh)
            break
        step += 1
    train_s = done_s + time.time() - t_train
    final = sum(l for _, l in curve[-20:]) / len(curve[-20:])
    torch.save({"config": json.dumps(cfg.to_dict()), "model": lm.state_dict()}, os.path.join(run_dir, "model.pt"))
    log(f"training done: {len(curve)} steps in {train_s / 60:.1f} min, final loss (mean of last 20) {final:.4f}", fh)

    # loss curve
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        xs = [s for s, _ in curve]
        ys = [l for _, l in curve]
        sm, e = [], None
        for y in ys:
            e = y if e is None else 0.9 * e + 0.1 * y
            sm.append(e)
        plt.figure(figsize=(7, 4))
        plt.plot(xs, ys, alpha=0.35, label="loss per step")
        plt.plot(xs, sm, label="EMA(0.9)")
        plt.yscale("log")
        plt.xlabel(f"optimiser step (~{a.tokens_per_step} tokens)")
        plt.ylabel("cross-entropy on round outputs")
        plt.title(f"mempo-tiny ({n_params / 1e6:.2f}M params)")
        plt.legend()
        plt.tight_layout()
        plt.savefig(os.path.join(HERE if run_dir == OUT else run_dir, "loss.png"), dpi=100)
    except Exception as ex:  # plotting is best effort
        log(f"plot failed: {ex}", fh)

    devres = dev_check(lm, dev, a.dev_n, fh)
    meta = {
        "mempo_trained": True,
        "train_steps": len(curve),
        "train_minutes": round(train_s / 60, 2),
        "total_minutes": round((time.time() - t0) / 60, 2),
        "final_loss": round(final, 4),
        "num_parameters": n_params,
        "seed": a.seed,
        "mix": a.mix or ("probes" if a.init else "scratch"),
        **({"init": a.init} if a.init else {}),
        **({"distill": a.distill} if a.distill > 0 else {}),
        **({"rollout_teacher": a.rollout_teacher} if a.rollout_teacher else {}),
        **({"anchor_probes": True} if a.anchor_probes else {}),
        "dev_round_exact_match": devres,
    }
    with open(os.path.join(run_dir, "metrics.json"), "w") as f:
        json.dump({**meta, "curve": curve}, f)
    # plain data as JSON strings: training/export.py reads the file with torch.load(weights_only=True)
    torch.save({"config": json.dumps(cfg.to_dict()), "model": lm.state_dict(), "meta": json.dumps(meta)}, os.path.join(run_dir, "model.pt"))
    if not a.no_export:
        from export import export
        export(lm, a.export_dir, {"mempo": meta})
        log(f"exported to {a.export_dir}", fh)
    log(json.dumps(meta), fh)


if __name__ == "__main__":
    main()
