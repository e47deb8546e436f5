"""`make cpu-model`: the strongest searchless model two cores make in under two hours, with its
evidence.

    python -m jobs.cpu_model [--scale full|quick] [--work data/cpu-model] [--runs runs/cpu-model]
        [--results results/cpu-model] [--models models/cpu] [--shared ../shared/data]
        [--config model/configs/cpu.toml] [--steps N] [--own-games N]
        [--own-games-model models/cpu] [--own-games-opponent SPEC] [--fresh]

`make cpu-transformer` is the same recipe with the square-token transformer
(`--config model/configs/cpu-transformer.toml`) into its own runs, results and model, on the
same data (the data's steps are reused).

Steps, each with its progress line, each reused on a rerun when what it was computed from is
unchanged (`<results>/steps.json`, see jobs/step_log.py; an interrupted annotation or training
resumes from its journal or checkpoint):

1. positions: Stockfish self-play games (pipeline.selfplay: the bundled ECO lines, a few
   random plies, some random moves later) for training, and other games (another seed) for
   the held-out test split.
2. annotate: full action values at a small node limit (pipeline.annotate) of the self-play
   games and of some real Lichess games in `<shared>/games` where present (`train-*`, and the
   `test` split), and one search per board (`--mode search`, ~1/16 of the cost: best move
   and state value) of all those real games (`search-lichess`), with `--exclude` of every
   puzzle CSV and EPD suite found (`<shared>/puzzles/*.csv`, `<shared>/epd/*.epd`,
   data/sample/puzzles.csv), and of those games' boards after a random move (one split per
   seed); of the splits of the check pool's seeds (`check_seeds`: none at the full scale, where
   they did not help) only the boards whose best move gives check are kept
   (pipeline.select_boards: the `search-random-move-checks` split); then an overlap
   check: training boards that are evaluation positions (must be 0) and test boards also in
   training. Optionally (`--own-games N`; off at the full scale, where 600 games did not help)
   before the check: positions from the model's own games (DAgger, jobs/cpu_model/own_games.py):
   the policy model (`--own-games-model`, default models/cpu) plays N games against an
   opponent, and their boards, valued by one search each, join the `search-*` splits.
3. train: model/configs/cpu.toml (the gateau edge backbone, told which moves give check) on
   the best move of every training board (BC: the paper's cheapest target, and at this scale
   the one that learns to play fastest, see 6.), with checkpoints along the way.
4. curve: every checkpoint on FIXED subsets (the first puzzles of the puzzle file, every
   k-th STS position): puzzle accuracy and STS points against training examples.
5. evaluate: the last checkpoint on the held-out test split (action accuracy, Kendall's tau,
   log-loss), the first 1,000 puzzles and all of STS, beside `greedy`, `random` and
   `stockfish:nodes=100000` (the ceiling on a subset at the quick scale).
6. ablations at equal compute (same network, steps and batch): AV vs SV vs BC on the same
   boards (the `train-*` ones, which have full action values), and AV on a quarter of them;
   each row with its data and compute cost.
7. ship: the final run's config and last checkpoint to `<models>` (models/cpu: a normal
   run directory, loaded by `neural:models/cpu` and by `searchless-uci` by default).

Writes `<results>/summary.json`, one JSON per step, `curve.png` and `ablations.png`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import pathlib
import shutil
import sys
import time

import matplotlib

from eval.agents.specs import parse_agent_spec
from jobs.cpu_model.judging import brief
from jobs.cpu_model.own_games import own_games
from jobs.cpu_model.plots import plot_ablations, plot_curve
from jobs.cpu_model.settings import MAIN_CONFIG, SCALES, SHIPPED_MODEL, Paths, banner
from jobs.cpu_model.stages import (
    ablations,
    annotate,
    curve,
    evaluate,
    overlap_check,
    positions,
    select_checks,
    ship,
    train_main,
)
from jobs.step_log import StepLog
from model import config as config_lib
from runtime.interrupts import interrupted
from runtime.outputs import OutputError, check_dir
from runtime.progress import Progress, format_duration


def run(scale_name: str, paths: Paths, fresh: bool = False, changes: dict | None = None) -> dict:
    """`changes`: Scale fields set on the command line (the main model's steps, the own games)."""
    scale = dataclasses.replace(SCALES[scale_name], **(changes or {}))
    if fresh:
        for path in (paths.results, paths.work, paths.runs):
            shutil.rmtree(path, ignore_errors=True)
    paths.results.mkdir(parents=True, exist_ok=True)
    paths.work.mkdir(parents=True, exist_ok=True)
    # The data's steps are logged beside the data, so that a recipe of another network on
    # the same `work` (`make cpu-transformer`) reuses them; the model's beside its results.
    data_steps = StepLog(paths.work / "steps.json")
    steps = StepLog(paths.results / "steps.json")
    adopt_data_steps(data_steps, steps)
    began = time.monotonic()
    seconds: dict[str, float] = {}
    progress = Progress("cpu-model", 7, "steps", every=0)

    def timed(number: int, name: str, title: str, fn):
        banner(number, title)
        started = time.monotonic()
        value = fn()
        seconds[name] = round(time.monotonic() - started, 1)
        progress.update(number, f"({name} took {format_duration(seconds[name])})")
        return value

    games = timed(1, "positions", "self-play games", lambda: positions(scale, paths, data_steps))
    annotated = timed(
        2,
        "annotate",
        "action values and single searches, evaluation positions excluded",
        lambda: annotate(scale, paths, data_steps),
    )
    own = own_games(scale, paths, data_steps)
    selected = select_checks(scale, paths, data_steps)
    checked = overlap_check(scale, paths, data_steps)
    trained = timed(
        3, "train", "the main model", lambda: train_main(scale, paths, steps, data_steps)
    )
    learning = timed(4, "curve", "learning curve", lambda: curve(scale, paths, steps, trained))
    final = timed(5, "evaluate", "final evaluation", lambda: evaluate(scale, paths, steps, trained))
    ablated = timed(
        6,
        "ablations",
        "ablations at equal compute",
        lambda: ablations(scale, paths, steps, data_steps, annotated),
    )
    shipped = timed(7, "ship", f"copy to {paths.models}", lambda: ship(paths, trained))
    matplotlib.use("Agg")  # files only: no display needed
    plot_curve(learning, final, paths.results / "curve.png")
    plot_ablations(ablated, paths.results / "ablations.png")
    summary = {
        "scale": scale_name,
        "settings": dataclasses.asdict(scale),
        "config": str(paths.config),
        "positions": games,
        "annotated": annotated,
        "selected": selected,
        "own_games": own,
        "overlap": {
            "train_boards_in_evaluation_sets": checked["train_boards_in_evaluation_sets"],
            "test_in_train": checked["test_in_train"],
        },
        "training": trained,
        "evaluation": {
            name: {k: v for k, v in entry.items() if k != "metrics"}
            | (
                {
                    "metrics": {
                        k: entry["metrics"][k]
                        for k in (
                            "boards",
                            "action_accuracy",
                            "kendall_tau",
                            "log_loss",
                            "uniform_log_loss",
                            "test_boards_left_out_as_in_train",
                        )
                    }
                }
                if "metrics" in entry
                else {}
            )
            for name, entry in final["agents"].items()
        },
        "evaluation_sets": final["sets"],
        "ceiling_sets": final["ceiling_sets"],
        "curve": [
            {k: v for k, v in p.items()}
            for p in sorted(learning["points"].values(), key=lambda p: p["step"])
        ],
        "ablations": ablated,
        "shipped": shipped,
        "step_seconds": seconds,
        "wall_seconds": round(time.monotonic() - began, 1),
    }
    (paths.results / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


# The steps whose marks belong to the data's log (a recipe run before the two logs kept
# them all in the results' log).
DATA_STEP_PREFIXES = ("selfplay-", "annotate-", "select-", "overlap")


def adopt_data_steps(data_steps: StepLog, steps: StepLog) -> None:
    """Marks of data steps found only in the results' log, moved to the data's log."""
    found = {k: v for k, v in steps.done.items() if k.startswith(DATA_STEP_PREFIXES)}
    for name, key in found.items():
        if name not in data_steps.done:
            data_steps.mark(name, key)


def print_summary(summary: dict) -> None:
    print("\n=== cpu-model summary ===")
    for name, entry in summary["evaluation"].items():
        print(f"{name}: {brief(entry)}")
    for name, row in summary["ablations"]["rows"].items():
        print(f"ablation {name}: {brief(row)}")
    print(f"shipped {summary['shipped']['path']} ({summary['shipped']['bytes'] / 1e6:.1f} MB)")
    print(f"done in {format_duration(summary['wall_seconds'])}")


def own_games_changes(args: argparse.Namespace) -> dict:
    """The Scale fields of the own games that the command line sets, checked (ValueError)."""
    changes = {}
    if args.own_games is not None:
        if args.own_games < 0 or args.own_games % 2:
            raise ValueError(
                f"--own-games must be even and >= 0 (each opening is played with both "
                f"colours), got {args.own_games}"
            )
        changes["own_games"] = args.own_games
    if args.own_games_opponent is not None:
        parse_agent_spec(args.own_games_opponent)  # a bad spec stops before any step
        changes["own_games_opponent"] = args.own_games_opponent
    games = changes.get("own_games", SCALES[args.scale].own_games)
    model = pathlib.Path(args.own_games_model)
    if games and args.own_games_model != str(SHIPPED_MODEL) and not model.is_dir():
        raise ValueError(f"--own-games-model {model}: no such model directory")
    return changes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.cpu_model", description=__doc__)
    parser.add_argument("--scale", choices=sorted(SCALES), default="full")
    parser.add_argument("--work", default="data/cpu-model", help="games and annotated Parquet")
    parser.add_argument("--runs", default="runs/cpu-model", help="training runs")
    parser.add_argument("--results", default="results/cpu-model")
    parser.add_argument("--models", default="models/cpu", help="where the final run is copied")
    parser.add_argument(
        "--shared", default="../shared/data", help="real games, puzzles, EPD (optional)"
    )
    parser.add_argument(
        "--config",
        default=str(MAIN_CONFIG),
        help="the network (default: the gateau of model/configs/cpu.toml)",
    )
    parser.add_argument(
        "--steps", type=int, help="the main model's training steps (default: the scale's)"
    )
    parser.add_argument(
        "--own-games",
        type=int,
        help="games (even) of the model against --own-games-opponent whose boards it also "
        "trains on (default: the scale's; 0 at the full scale, where they did not help)",
    )
    parser.add_argument(
        "--own-games-model",
        default=str(SHIPPED_MODEL),
        help="the model that plays those games (default: the shipped models/cpu)",
    )
    parser.add_argument(
        "--own-games-opponent", help="its opponent, an agent spec (default: the scale's)"
    )
    parser.add_argument("--fresh", action="store_true", help="recompute every step")
    args = parser.parse_args(argv)
    logging.getLogger("apache_beam").setLevel(logging.ERROR)
    paths = Paths(
        work=pathlib.Path(args.work),
        runs=pathlib.Path(args.runs),
        results=pathlib.Path(args.results),
        models=pathlib.Path(args.models),
        shared=pathlib.Path(args.shared),
        config=pathlib.Path(args.config),
        own_games_model=pathlib.Path(args.own_games_model),
    )
    try:
        for option in ("work", "runs", "results", "models"):
            check_dir(getattr(args, option), f"--{option}")
        config_lib.validate(config_lib.load(args.config), check_data=False)
        if args.steps is not None and args.steps < 1:
            raise config_lib.ConfigError(f"--steps must be >= 1, got {args.steps}")
        # The main model's training length; the data as the scale makes it.
        changes = {"steps": args.steps} if args.steps else {}
        changes |= own_games_changes(args)
    except (OutputError, config_lib.ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    try:
        print_summary(run(args.scale, paths, args.fresh, changes))
    except KeyboardInterrupt:
        return interrupted("cpu-model: interrupted; run it again: finished steps are reused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
