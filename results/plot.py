"""Training curves of the arms (results/arms.sh) in one figure: results/arms.png.

    /usr/bin/python3 results/plot.py results/arms/grpo/metrics.jsonl results/arms/mempo/metrics.jsonl [--out F]

(out/arms/<arm>/metrics.jsonl while the arms run; results/arms/ holds the committed copies.)

Per arm: batch mean score and the batch's format-valid trajectories (EMA 0.7 over steps, and the
raw steps faint), dev EM of the step's evaluation, mean memory reward and P_full / P_mem of the
step's snapshots (MemPO arms), KL to the starting weights. The arm's name is its directory's name.
"""
import argparse
import json
import os

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def ema(xs, k=0.7):
    out, e = [], None
    for x in xs:
        e = x if e is None else k * e + (1 - k) * x
        out.append(e)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("metrics", nargs="+")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "arms.png"))
    a = ap.parse_args()
    fig, ax = plt.subplots(2, 3, figsize=(15, 7))
    for path in a.metrics:
        name = os.path.basename(os.path.dirname(os.path.abspath(path)))
        rows = load(path)
        steps = [r for r in rows if r["step"] > 0]
        xs = [r["step"] for r in steps]
        score = [r["meanScore"] for r in steps]
        (line,) = ax[0, 0].plot(xs, ema(score), label=name)
        ax[0, 0].plot(xs, score, color=line.get_color(), alpha=0.25)
        ev = [(r["step"], r["eval"]["em"]) for r in rows if r.get("eval")]
        ax[0, 1].plot([s for s, _ in ev], [e for _, e in ev], marker="o", color=line.get_color(), label=name)
        valid = [r["formatValidRate"] for r in steps]
        ax[0, 2].plot(xs, ema(valid), color=line.get_color(), label=name)
        ax[0, 2].plot(xs, valid, color=line.get_color(), alpha=0.25)
        mr = [(r["step"], r["memoryReward"]["mean"], r["pFull"], r["pMem"]) for r in steps if r["memoryReward"]["mean"] is not None]
        if mr:
            ax[1, 0].plot([m[0] for m in mr], ema([m[1] for m in mr]), color=line.get_color(), label=name)
            ax[1, 1].plot([m[0] for m in mr], ema([m[2] for m in mr]), color=line.get_color(), ls=":", label=f"{name} P_full")
            ax[1, 1].plot([m[0] for m in mr], ema([m[3] for m in mr]), color=line.get_color(), ls="--", label=f"{name} P_mem")
        kl = [(r["step"], r["klRef"]) for r in steps if r["klRef"] is not None]
        ax[1, 2].plot([k[0] for k in kl], [k[1] for k in kl], color=line.get_color(), label=name)
    titles = [["batch mean score (EM, full policy, T = 1)", "dev EM (memory policy, greedy, 50 questions)",
               "format-valid trajectories of the batch"],
              ["memory reward, batch mean (EMA)", "P_full and P_mem, batch means (EMA)", "KL to the starting weights"]]
    for i in range(2):
        for j in range(3):
            ax[i, j].set_title(titles[i][j], fontsize=10)
            ax[i, j].set_xlabel("step")
            if ax[i, j].get_legend_handles_labels()[0]:
                ax[i, j].legend(fontsize=7)
            ax[i, j].grid(alpha=0.3)
    fig.tight_layout()
    tmp = a.out + ".tmp.png"
    fig.savefig(tmp, dpi=90)
    os.replace(tmp, a.out)
    print(a.out)


if __name__ == "__main__":
    main()
