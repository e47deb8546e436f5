"""Puzzle accuracy against rating, one bar group per rating bucket, one bar per agent.

    python -m eval.plot results/puzzles.json [more.json ...] --out results/puzzles.png

combines the agents of several `eval.puzzles` result files in one figure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only: no display needed

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def plot_puzzle_accuracy(results: list[dict], path: str, title: str = "") -> None:
    """Writes a PNG: for each rating bucket any agent has, each agent's accuracy side by side.

    `results` are the per-agent dicts of eval.puzzles.evaluate (keys agent, accuracy,
    buckets with lo, hi, total, accuracy).
    """
    if not results:
        raise ValueError("nothing to plot: no agent results")
    buckets = sorted({(b["lo"], b["hi"]) for r in results for b in r["buckets"]})
    x = np.arange(len(buckets))
    width = 0.8 / len(results)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(buckets) + 2), 4.5))
    for i, result in enumerate(results):
        by = {(b["lo"], b["hi"]): b["accuracy"] for b in result["buckets"]}
        heights = [100 * by.get(key, np.nan) for key in buckets]
        ax.bar(
            x - 0.4 + width * (i + 0.5),
            heights,
            width,
            label=f"{result['agent']} ({100 * result['accuracy']:.1f}% overall)",
        )
    sizes = {
        key: max(b["total"] for r in results for b in r["buckets"] if (b["lo"], b["hi"]) == key)
        for key in buckets
    }
    labels = [f"{lo}-{hi - 1}\n(n={sizes[(lo, hi)]})" for lo, hi in buckets]
    ax.set_xticks(x, labels, fontsize="small")
    ax.set_xlabel("puzzle rating (Elo)")
    ax.set_ylabel("puzzles solved (%)")
    ax.set_ylim(0, 100)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    ax.set_title(title or "Puzzle accuracy by rating")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def read_agents(path: str) -> list[dict]:
    """The per-agent results of an eval.puzzles JSON file; ValueError naming the file if it
    cannot be read or is not one."""
    try:
        with open(path, encoding="utf-8") as f:
            agents = json.load(f)["agents"]
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror or e}") from None
    except (ValueError, KeyError, TypeError):  # not JSON (or not text), or not its shape
        agents = None
    if not isinstance(agents, list) or not all(isinstance(a, dict) for a in agents):
        raise ValueError(f"{path} is not an eval.puzzles result (JSON with an 'agents' list)")
    return agents


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.plot", description=__doc__)
    parser.add_argument("results", nargs="+", help="eval.puzzles JSON result files")
    parser.add_argument("--out", required=True, help="PNG to write")
    parser.add_argument("--title", default="")
    args = parser.parse_args(argv)
    try:
        agents = [agent for path in args.results for agent in read_agents(path)]
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    plot_puzzle_accuracy(agents, args.out, args.title)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
