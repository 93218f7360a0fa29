"""The learning curve of one or more run directories (one line each): their progress.csv's `ep_return_mean` (the mean of the last 100
episodes' returns; for `atari:` envs the real game score over all lives) against environment steps, as a PNG.

    python bench/plot_run.py RUN_DIR [RUN_DIR ...] OUT.png [--title TITLE] [--reference LABEL=VALUE ...]

Needs matplotlib. Several run directories (seeds of one setting) are labelled by their directory names. A reference draws a dashed horizontal line (a paper's or another library's final score)."""

from __future__ import annotations

import argparse
import csv
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_curve(run_dir: str) -> tuple[list[int], list[float]]:
    """(global_step, ep_return_mean) rows of RUN_DIR/progress.csv from the first finished episode on."""
    steps, returns = [], []
    with open(os.path.join(run_dir, "progress.csv")) as f:
        for row in csv.DictReader(f):
            if row.get("ep_return_mean") not in (None, "", "0") or returns:
                steps.append(int(row["global_step"]))
                returns.append(float(row["ep_return_mean"] or "nan"))
    return steps, returns


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    p.add_argument("out")
    p.add_argument("--title", default=None)
    p.add_argument("--reference", action="append", default=[], metavar="LABEL=VALUE")
    a = p.parse_args()
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    steps: list[int] = []
    for run_dir in a.run_dirs:
        steps, returns = read_curve(run_dir)
        label = "Proxima (last 100 episodes)"
        if len(a.run_dirs) > 1:
            label += ", " + os.path.basename(os.path.normpath(run_dir))
        ax.plot(steps, returns, lw=1.2, label=label)
    for ref in a.reference:
        label, value = ref.rsplit("=", 1)
        ax.axhline(float(value), ls="--", lw=1, color="gray")
        ax.annotate(label, (steps[0] if steps else 0, float(value)), textcoords="offset points", xytext=(4, 3),
                    fontsize=8, color="gray")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("episode return")
    ax.set_title(a.title or os.path.basename(os.path.normpath(a.run_dirs[0])))
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(a.out)


if __name__ == "__main__":
    main()
