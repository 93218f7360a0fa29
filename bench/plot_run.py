"""The learning curve of one run directory: its progress.csv's `ep_return_mean` (the mean of the last 100
episodes' returns; for `atari:` envs the real game score over all lives) against environment steps, as a PNG.

    python bench/plot_run.py RUN_DIR OUT.png [--title TITLE] [--reference LABEL=VALUE ...]

Needs matplotlib. A reference draws a dashed horizontal line (a paper's or another library's final score)."""

from __future__ import annotations

import argparse
import csv
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir")
    p.add_argument("out")
    p.add_argument("--title", default=None)
    p.add_argument("--reference", action="append", default=[], metavar="LABEL=VALUE")
    a = p.parse_args()
    steps, returns = [], []
    with open(os.path.join(a.run_dir, "progress.csv")) as f:
        for row in csv.DictReader(f):
            if row.get("ep_return_mean") not in (None, "", "0") or returns:
                steps.append(int(row["global_step"]))
                returns.append(float(row["ep_return_mean"] or "nan"))
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    ax.plot(steps, returns, lw=1.2, label="Proxima (last 100 episodes)")
    for ref in a.reference:
        label, value = ref.rsplit("=", 1)
        ax.axhline(float(value), ls="--", lw=1, color="gray")
        ax.annotate(label, (steps[0] if steps else 0, float(value)), textcoords="offset points", xytext=(4, 3),
                    fontsize=8, color="gray")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("episode return")
    ax.set_title(a.title or os.path.basename(os.path.normpath(a.run_dir)))
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(a.out)


if __name__ == "__main__":
    main()
