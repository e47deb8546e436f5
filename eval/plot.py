"""Figures: puzzle accuracy by rating, a training run's learning curves, and the Elo ladder's plot.

    python -m eval.plot results/puzzles.json [more.json ...] --out results/puzzles.png
    python -m eval.plot runs/small [runs/9m/metrics.jsonl ...] --out results/curves.png

The first combines the agents of several `eval.puzzles` result files (one bar group per
rating bucket, one bar per agent). Given run directories or their `metrics.jsonl`, it draws
learning curves instead, one line per run: loss (train, and test when evaluated), action
accuracy (the train batches' and the test boards') and Kendall's tau against steps.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only: no display needed

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from runtime.outputs import OutputError, check_file


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


def plot_elo_ladder(document: dict, path: str) -> None:
    """Writes a PNG of an eval.elo.ladder run: left, each player's Elo with its interval (an
    arrow where only a bound is known); right, each player's score against every Stockfish
    level it met (marker area ~ sqrt(games)) with the logistic curve of its fitted Elo."""
    players = [p for p in document["players"] if p["fit"]]
    if not players:
        raise ValueError("nothing to plot: no player has games")
    low, high = document["engine"]["low"], document["engine"]["high"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 0.6 * len(players) + 3.5))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for row, p in enumerate(players):
        fit, colour = p["fit"], colours[row % len(colours)]
        if fit["bound"] == "upper":
            left.annotate(
                "",
                (fit["upper"] - 250, row),
                (fit["upper"], row),
                arrowprops={"arrowstyle": "->", "color": colour},
            )
            left.plot([fit["upper"]], [row], "|", color=colour, markersize=12)
            label = f"< {fit['upper']:.0f}"
        elif fit["bound"] == "lower":
            left.annotate(
                "",
                (fit["lower"] + 250, row),
                (fit["lower"], row),
                arrowprops={"arrowstyle": "->", "color": colour},
            )
            left.plot([fit["lower"]], [row], "|", color=colour, markersize=12)
            label = f"> {fit['lower']:.0f}"
        else:
            left.errorbar(
                [fit["elo"]],
                [row],
                xerr=[[fit["elo"] - fit["lower"]], [fit["upper"] - fit["elo"]]],
                fmt="o",
                color=colour,
                capsize=4,
            )
            label = f"{fit['elo']:.0f} [{fit['lower']:.0f}, {fit['upper']:.0f}]"
        left.text(
            0.02,
            row + 0.25,
            f"{p['name']}: {label} ({len(p['games'])} games)",
            transform=left.get_yaxis_transform(),
            fontsize=8,
        )
        levels = p["levels"]
        right.scatter(
            [lv["elo"] for lv in levels],
            [100 * lv["points"] / lv["games"] for lv in levels],
            s=[25 * math.sqrt(lv["games"]) for lv in levels],
            color=colour,
            alpha=0.6,
            label=p["name"],
        )
        if fit["elo"] is not None:
            # From below the player's own rating when it lies under the engine's floor.
            xs = np.linspace(min(low, fit["elo"] - 200), high, 200)
            right.plot(xs, 100 / (1 + 10 ** ((xs - fit["elo"]) / 400)), color=colour)
    # Arrows do not widen the axes: the limits cover every finite end and the arrow's length.
    ends = [v for p in players for v in (p["fit"]["lower"], p["fit"]["upper"]) if v is not None]
    left.set_xlim(min(low, *ends) - 300, max(high, *ends) + 300)
    left.axvspan(low, high, color="0.92", zorder=0, label=f"UCI_Elo range {low}..{high}")
    left.set_yticks([])
    left.set_ylim(-0.7, len(players) - 0.2)
    left.set_xlabel("Elo (Stockfish UCI_Elo scale), 95% interval")
    left.legend(loc="lower right", fontsize=8)
    right.set_xlabel("Stockfish UCI_Elo of the opponent")
    right.set_ylabel("player's score (%)")
    right.set_ylim(-3, 103)
    right.axhline(50, color="0.7", lw=0.8)
    right.legend(fontsize=8, markerscale=0.6)
    fig.suptitle(f"Elo ladder: {document['time_control']}", fontsize=9)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def read_metrics(path: str) -> list[dict]:
    """The records of a run's metrics.jsonl (`path` is the file or its run directory); a
    step logged twice (a resumed run repeats the steps after its last checkpoint) keeps its
    last record."""
    if os.path.isdir(path):
        path = os.path.join(path, "metrics.jsonl")
    records: dict[tuple[str, int], dict] = {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                records[(record["kind"], int(record["step"]))] = record
            except (ValueError, KeyError, TypeError) as e:
                raise ValueError(f"{path}:{number}: not a metrics record ({e})") from None
    return sorted(records.values(), key=lambda r: (r["step"], r["kind"]))


# (panel title, [(record kind, key, line label)])
_CURVES = [
    ("loss", [("train", "loss", "train"), ("eval", "test_loss", "test")]),
    (
        "action accuracy",
        [("train", "accuracy", "train batches"), ("eval", "action_accuracy", "test boards")],
    ),
    ("Kendall's tau", [("eval", "kendall_tau", "test boards")]),
]


def plot_learning_curves(runs: dict[str, list[dict]], path: str, title: str = "") -> None:
    """Writes a PNG with one panel per measure (`_CURVES`), one line per run and series."""
    if not any(runs.values()):
        raise ValueError("nothing to plot: no metrics records")
    fig, axes = plt.subplots(1, len(_CURVES), figsize=(5.0 * len(_CURVES), 4.0))
    for ax, (name, series) in zip(axes, _CURVES, strict=True):
        for run, records in runs.items():
            for kind, key, label in series:
                points = [(r["step"], r[key]) for r in records if r["kind"] == kind and key in r]
                if points:
                    steps, values = zip(*points, strict=True)
                    style = "-" if kind == "train" else "o-"
                    ax.plot(steps, values, style, markersize=3, label=f"{run}: {label}")
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if ax.has_data():
            ax.legend(fontsize="x-small")
    fig.suptitle(title or "Learning curves")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _is_metrics(path: str) -> bool:
    return path.endswith(".jsonl") or os.path.isdir(path)


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
    parser = argparse.ArgumentParser(
        prog="python -m eval.plot",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "results",
        nargs="+",
        help="eval.puzzles JSON result files, or run directories / metrics.jsonl",
    )
    parser.add_argument("--out", required=True, help="PNG to write")
    parser.add_argument("--title", default="")
    args = parser.parse_args(argv)
    try:
        check_file(args.out, "--out")
    except OutputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if all(_is_metrics(p) for p in args.results):
        try:
            runs = {
                (p if p.endswith(".jsonl") else os.path.normpath(p)): read_metrics(p)
                for p in args.results
            }
            plot_learning_curves(runs, args.out, args.title)
        except (OSError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(f"wrote {args.out}", file=sys.stderr)
        return 0
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
