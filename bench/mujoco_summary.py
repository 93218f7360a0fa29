"""The MuJoCo set's results (bench/mujoco_set.sh): ROOT/mujoco.md, one row per env over its seeds —
mean ± std (population) and IQM (the mean after trimming floor(n/4) seeds from each end, as
rliable) of the final deterministic return over 10 episodes, the min, the training return at the end
(the stochastic policy's episodes in the last update, averaged over seeds: what CleanRL reports) and
each run's training wall time — next to CleanRL's published 1M-step means for
ppo_continuous_action.py where it has the task;
and ROOT/mujoco_curves.png, each env's training return (progress.csv's ep_return_mean) against
steps, mean ± std over the seeds. Usage: python bench/mujoco_summary.py ROOT [ENV ...]"""
import csv, glob, os, sys

CLEANRL = {"HalfCheetah-v5": "1442.6 ± 46.0", "Hopper-v5": "2382.9 ± 271.7", "Walker2d-v5": "2288.0 ± 571.8",
           "InvertedPendulum-v5": "963.1 ± 22.2", "Humanoid-v5": "716.1 ± 49.1"}


def seeds_of(parent):
    rows = list(csv.DictReader(open(os.path.join(parent, "summary.csv"))))
    return [r for r in rows if r["seed"].isdigit() and not r["error"]]


def last_training_return(run):
    """The last update's mean return of the episodes that ended in it (the stochastic policy)."""
    rows = [r for r in csv.DictReader(open(os.path.join(run, "progress.csv"))) if r["ep_return_mean"]]
    return float(rows[-1]["ep_return_mean"]) if rows else None


def table(root, envs):
    out = ["| env | seeds | deterministic return: mean ± std | IQM | min | training return at 1M | wall per run (s) | CleanRL 1M |",
           "|---|---|---|---|---|---|---|---|"]
    for env in envs:
        parent = os.path.join(root, env)
        if not os.path.exists(os.path.join(parent, "summary.csv")):
            out.append(f"| {env} | not finished | | | | | | {CLEANRL.get(env, '—')} |")
            continue
        rows = seeds_of(parent)
        stats = {r["seed"]: float(r["final_return"]) for r in csv.DictReader(open(os.path.join(parent, "summary.csv")))
                 if r["seed"] in ("mean", "std", "iqm", "min")}
        walls = ", ".join(f"{float(r['train_seconds']):.0f}" for r in rows)
        last = [last_training_return(os.path.join(parent, f"seed_{r['seed']}")) for r in rows]
        last = [v for v in last if v is not None]
        train = f"{sum(last) / len(last):.1f}" if last else "—"
        out.append(f"| {env} | {len(rows)} | {stats['mean']:.1f} ± {stats['std']:.1f} | {stats['iqm']:.1f} | "
                   f"{stats['min']:.1f} | {train} | {walls} | {CLEANRL.get(env, '—')} |")
    return "\n".join(out)


def curves(root, envs, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    import warnings
    warnings.simplefilter("ignore", RuntimeWarning)  # the grid's points before a seed's first episode are NaN
    done = [e for e in envs if os.path.exists(os.path.join(root, e, "summary.csv"))]
    if not done:
        return
    cols = 4
    fig, axes = plt.subplots((len(done) + cols - 1) // cols, cols, figsize=(3.2 * cols, 2.4 * ((len(done) + cols - 1) // cols)), squeeze=False)
    grid = np.linspace(0, 1_000_000, 101)
    for ax, env in zip(axes.flat, done):
        ys = []
        for f in sorted(glob.glob(os.path.join(root, env, "seed_*", "progress.csv"))):
            pts = [(float(r["global_step"]), float(r["ep_return_mean"])) for r in csv.DictReader(open(f)) if r["ep_return_mean"]]
            if pts:
                x, y = zip(*pts)
                ys.append(np.interp(grid, x, y, left=np.nan))
        if ys:
            m, s = np.nanmean(ys, 0), np.nanstd(ys, 0)
            ax.plot(grid, m, lw=1.2)
            ax.fill_between(grid, m - s, m + s, alpha=0.25)
        ax.set_title(f"{env} ({len(ys)} seeds)", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.ticklabel_format(axis="x", style="sci", scilimits=(6, 6))
    for ax in list(axes.flat)[len(done):]:
        ax.axis("off")
    fig.suptitle("PPO, paper-mujoco: training return (mean ± std over seeds) vs steps", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=80)


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) >= 2 else 2)
    root = sys.argv[1]
    if not os.path.isdir(root):
        sys.exit(f"{root}: not a directory (the ROOT of bench/mujoco_set.sh)")
    # Named envs are all listed ("not finished" when a run failed); else every run directory in ROOT.
    envs = sys.argv[2:] or sorted(e for e in os.listdir(root) if os.path.isdir(os.path.join(root, e)))
    md = table(root, envs)
    open(os.path.join(root, "mujoco.md"), "w").write(md + "\n")
    print(md)
    try:
        curves(root, envs, os.path.join(root, "mujoco_curves.png"))
    except ImportError:
        print("(no matplotlib: no figure)", file=sys.stderr)


main()
