"""`make cpu-model`'s figures: the learning curve and the ablations (jobs/cpu_model/recipe.py)."""

from __future__ import annotations

import pathlib

import matplotlib.pyplot as plt
import numpy as np


def plot_curve(document: dict, evaluation: dict, path: pathlib.Path) -> None:
    points = sorted(document["points"].values(), key=lambda p: p["step"])
    boards = [p["boards_seen"] for p in points]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, key, label in (
        (axes[0], "puzzles", "puzzles solved (%)"),
        (axes[1], "sts", "STS points (% of max)"),
    ):
        if not points or key not in points[0]:
            ax.set_visible(False)
            continue
        if key == "puzzles":
            ys = [100 * p["puzzles"]["accuracy"] for p in points]
        else:
            ys = [100 * p["sts"]["points"] / p["sts"]["max_points"] for p in points]
        ax.plot(boards, ys, marker="o", label="model (fixed subset)")
        for name, entry in evaluation["agents"].items():
            if name == "model" or key not in entry:
                continue
            value = entry[key]
            y = 100 * (
                value["accuracy"] if key == "puzzles" else value["points"] / value["max_points"]
            )
            ax.axhline(y, linestyle="--", linewidth=1, label=name, color=_colour(name))
        ax.set_xlabel("training boards seen (each with all its action values)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle("make cpu-model: learning curve (baselines on the full evaluation sets)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _colour(name: str) -> str:
    return {"greedy": "tab:orange", "random": "tab:grey"}.get(name, "tab:green")


def plot_ablations(document: dict, path: pathlib.Path) -> None:
    names = list(document["rows"])
    fig, ax = plt.subplots(figsize=(7, 4))
    x = np.arange(len(names))
    rows = [document["rows"][n] for n in names]
    puzzles = [100 * r["puzzles"]["accuracy"] if "puzzles" in r else 0 for r in rows]
    sts = [100 * r["sts"]["points"] / r["sts"]["max_points"] if "sts" in r else 0 for r in rows]
    ax.bar(x - 0.2, puzzles, 0.4, label="puzzles solved (%)")
    ax.bar(x + 0.2, sts, 0.4, label="STS points (% of max)")
    ax.set_xticks(x, names)
    compute = document["equal_compute"]
    ax.set_title(
        f"ablations: targets at {compute['targets_steps']} steps, "
        f"data sizes at {compute['data_steps']} steps"
    )
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
