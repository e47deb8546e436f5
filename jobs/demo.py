"""The product's main job, end to end on the bundled sample (`make demo`).

    python -m jobs.demo [--results results] [--work data/demo] [--run runs/demo] [--fresh]

1. annotate: the pipeline (DirectRunner, two engines) turns the sample's PGNs into Stockfish
   action values: train from the famous games and the Stockfish-against-random games, test
   from the self-play games (different inputs, as the paper's Feb/Mar 2023 split).
2. train: the `demo` config (model/configs/demo.toml) for a few minutes on the CPU.
3. metrics: action accuracy, Kendall's tau and log-loss on the test split.
4. puzzles: the model, a random mover and Stockfish on the sample's puzzles, with a plot.
5. tournament: model, random mover and a weak Stockfish, round robin with Elo.

Every step writes its results under --results and records what it was computed from in
`steps.json`; running the demo again reuses every step whose inputs have not changed (the
training run also resumes from its last checkpoint if it was interrupted). `summary.json`
collects the figures.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import pathlib
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from jobs.step_log import StepLog, annotate_step, fingerprint
from pipeline.beam.environment import VERBOSE_FLAG, VERBOSE_HELP, set_verbose
from runtime.cli import config_from_args
from runtime.interrupts import exit_code, interrupted, sigint_exits
from runtime.outputs import OutputError, check_dir

ROOT = pathlib.Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "data" / "sample"


@dataclass(frozen=True)
class DemoConfig:
    results: str = "results"
    work: str = "data/demo"  # annotated Parquet
    run: str = "runs/demo"  # checkpoints
    train_inputs: tuple[str, ...] = (
        str(SAMPLE / "games.pgn.zst"),
        str(SAMPLE / "mismatch.pgn.zst"),
    )
    test_inputs: tuple[str, ...] = (str(SAMPLE / "selfplay.pgn.zst"),)
    limit: str = "nodes=500"
    workers: int = 2
    train_config: str = str(ROOT / "model" / "configs" / "demo.toml")
    puzzles: str = str(SAMPLE / "puzzles.csv")
    metrics_boards: int = 500
    stockfish: str = "stockfish:nodes=20000,name=stockfish-20k"
    weak_stockfish: str = "stockfish:nodes=200,skill=0,name=stockfish-weak"
    tournament_games: int = 10  # per pair
    tournament_max_plies: int = 200
    adjudicate: str = "stockfish:nodes=2000,cp=600,plies=6"
    engine: str | None = None


_INTERRUPTED = "demo: interrupted; run it again: finished steps are reused"


def banner(number: int, title: str) -> None:
    print(f"\n=== demo step {number}/5: {title} ===", flush=True)


# --- the steps ---------------------------------------------------------------------------


def _print_with(prefix: str, line: str) -> None:
    print(prefix + line)


def annotate(config: DemoConfig, log: StepLog) -> dict:
    stats = {}
    for split, inputs in (("train", config.train_inputs), ("test", config.test_inputs)):
        split_dir = pathlib.Path(config.work) / split
        key = fingerprint(*inputs, config.limit)
        argv = [*inputs, "--out", config.work, "--split", split, "--limit", config.limit]
        argv += ["--runner=DirectRunner", f"--direct_num_workers={config.workers}"]
        argv += ["--direct_running_mode=multi_processing"]
        if config.engine:
            argv += ["--engine", config.engine]
        say = functools.partial(_print_with, f"{split}: ")
        document = annotate_step(log, split, split_dir, argv, key, say)
        stats[split] = {
            "games": document["games"]["used"],
            "unique_boards": document["boards"]["unique"],
            "action_values": document["action_values"],
            "failed": document["boards"]["failed"],
            "wall_time_s": document.get("wall_time_s"),
        }
        print(
            f"{split}: {stats[split]['games']} games, {stats[split]['unique_boards']:,} boards, "
            f"{stats[split]['action_values']:,} action values"
        )
    return stats


def train(config: DemoConfig, log: StepLog) -> dict:
    with sigint_exits(_INTERRUPTED):  # JAX's import: see sigint_exits
        from model import config as config_lib
        from model.training.train import train as train_model

    work = pathlib.Path(config.work)
    model_config = config_lib.load(
        config.train_config,
        [f"data.train='{work / 'train'}'", f"data.test='{work / 'test'}'"],
    )
    key = fingerprint(config.train_config, model_config.to_dict(), log.done.get("annotate-train"))
    if not log.finished("train", key, [pathlib.Path(config.run) / "checkpoints"]):
        if log.done.get("train") != key and os.path.isdir(config.run):
            # Different data or settings: a resumed run would mix two experiments.
            shutil.rmtree(config.run)
        started = time.monotonic()
        result = train_model(model_config, config.run)
        if result.stopped_early:  # by SIGTERM or Ctrl-C, with a checkpoint
            print("training stopped early; run the demo again to resume it", file=sys.stderr)
            raise SystemExit(exit_code(result.stop_signal) if result.stop_signal else 1)
        log.mark("train", key)
        print(f"trained {result.step} steps in {time.monotonic() - started:.0f}s")
    else:
        print(f"reusing the finished run in {config.run}")
    return {
        "run": config.run,
        "model": model_config.model.size,
        "target": model_config.target,
        "steps": model_config.train.num_steps,
        "batch_size": model_config.train.batch_size,
    }


def metrics(config: DemoConfig, log: StepLog, out: pathlib.Path) -> dict:
    with sigint_exits(_INTERRUPTED):  # JAX's import: see sigint_exits
        from eval.metrics import evaluate_checkpoint, read_rows
        from model.predictor import Predictor

    key = fingerprint(log.done.get("train"), log.done.get("annotate-test"), config.metrics_boards)
    if not log.finished("metrics", key, [out]):
        rows = read_rows(str(pathlib.Path(config.work) / "test"), config.metrics_boards)
        result = evaluate_checkpoint(Predictor.from_checkpoint(config.run), rows)
        out.write_text(json.dumps(result, indent=2) + "\n")
        log.mark("metrics", key)
    result = json.loads(out.read_text())
    print(
        f"test split ({result['boards']} boards): action accuracy "
        f"{result['action_accuracy']:.3f}, Kendall's tau {result['kendall_tau']:.3f}, "
        f"log-loss {result['log_loss']:.3f} (uniform {result['uniform_log_loss']:.3f})"
    )
    return result


def agent_specs(config: DemoConfig) -> dict[str, str]:
    return {
        "model": f"neural:{config.run},name=model",
        "random": "random:name=random",
        "stockfish": config.stockfish,
        "weak": config.weak_stockfish,
    }


def puzzles(config: DemoConfig, log: StepLog, out: pathlib.Path, plot: pathlib.Path) -> dict:
    with sigint_exits(_INTERRUPTED):  # JAX's import: see sigint_exits
        from core.eval_sets import read_puzzles
        from eval.agents.players import make_agent
        from eval.plot import plot_puzzle_accuracy
        from eval.puzzles import evaluate

    specs = agent_specs(config)
    chosen = [specs["model"], specs["random"], specs["stockfish"]]
    key = fingerprint(log.done.get("train"), config.puzzles, chosen)
    if not log.finished("puzzles", key, [out, plot]):
        puzzle_list, skipped = read_puzzles(config.puzzles)
        results = []
        for spec in chosen:
            with make_agent(spec, config.engine) as agent:
                results.append(evaluate(agent, puzzle_list))
        plot_puzzle_accuracy(results, str(plot), title="Sample puzzles: accuracy by rating")
        out.write_text(json.dumps({"puzzles": config.puzzles, "results": results}, indent=2))
        log.mark("puzzles", key)
    results = json.loads(out.read_text())["results"]
    summary = {r["agent"]: {"accuracy": r["accuracy"], "solved": r["solved"]} for r in results}
    for agent, figures in summary.items():
        print(f"{agent}: {figures['accuracy']:.1%} of puzzles solved")
    return summary


def tournament(config: DemoConfig, log: StepLog, out_dir: pathlib.Path) -> dict:
    with sigint_exits(_INTERRUPTED):  # JAX's import: see sigint_exits
        from eval.agents.players import make_agent
        from eval.elo.tournament import TournamentConfig, run_tournament
        from eval.game import AdjudicationConfig

    specs = agent_specs(config)
    chosen = [specs["model"], specs["random"], specs["weak"]]
    settings = TournamentConfig(
        games_per_pair=config.tournament_games,
        max_plies=config.tournament_max_plies,
        anchor="random",
    )
    key = fingerprint(log.done.get("train"), chosen, asdict(settings), config.adjudicate)
    summary_path = out_dir / "tournament.json"
    if not log.finished("tournament", key, [summary_path]):
        # An interrupted tournament of this same model, agents and settings keeps its games.
        resume = log.done.get("tournament-started") == key
        log.mark("tournament-started", key)
        agents = [make_agent(spec, config.engine) for spec in chosen]
        try:
            run_tournament(
                agents,
                out_dir,
                settings,
                adjudication=AdjudicationConfig.parse(config.adjudicate, config.engine),
                resume=resume,
            )
        finally:
            for agent in agents:
                agent.close()
        log.mark("tournament", key)
    summary = json.loads(summary_path.read_text())
    print(summary["table"])
    return summary


def model_vs(summary: dict, opponent: str) -> dict | None:
    for pair in summary["pairs"]:
        if {pair["a"], pair["b"]} == {"model", opponent}:
            score = pair["a_score"] if pair["a"] == "model" else 1 - pair["a_score"]
            return {"games": pair["games"], "model_score": score}
    return None


# --- the job -----------------------------------------------------------------------------


def run(config: DemoConfig, fresh: bool = False) -> dict:
    results = pathlib.Path(config.results)
    if fresh:
        for path in (results, pathlib.Path(config.work), pathlib.Path(config.run)):
            shutil.rmtree(path, ignore_errors=True)
    results.mkdir(parents=True, exist_ok=True)
    log = StepLog(results / "steps.json")
    began = time.monotonic()
    timings: dict[str, float] = {}

    def timed(name: str, number: int, title: str, fn: Callable[[], dict]) -> dict:
        banner(number, title)
        started = time.monotonic()
        value = fn()
        timings[name] = round(time.monotonic() - started, 1)
        return value

    data = timed("annotate", 1, "annotate the sample with Stockfish", lambda: annotate(config, log))
    trained = timed("train", 2, "train the demo model", lambda: train(config, log))
    scores = timed(
        "metrics",
        3,
        "metrics on the test split",
        lambda: metrics(config, log, results / "metrics.json"),
    )
    solved = timed(
        "puzzles",
        4,
        "puzzles",
        lambda: puzzles(config, log, results / "puzzles.json", results / "puzzles.png"),
    )
    played = timed(
        "tournament", 5, "tournament", lambda: tournament(config, log, results / "tournament")
    )
    summary = {
        "data": data,
        "training": trained,
        "metrics": {
            k: scores[k]
            for k in ("boards", "action_accuracy", "kendall_tau", "log_loss", "uniform_log_loss")
        },
        "puzzles": solved,
        "tournament": {
            "table": played["table"],
            "model_vs_random": model_vs(played, "random"),
            "model_vs_weak_stockfish": model_vs(played, "stockfish-weak"),
            "pgn": played["pgn"],
        },
        "step_seconds": timings,
        "wall_seconds": round(time.monotonic() - began, 1),
        "outputs": {
            "summary": str(results / "summary.json"),
            "metrics": str(results / "metrics.json"),
            "puzzles": str(results / "puzzles.json"),
            "plot": str(results / "puzzles.png"),
            "tournament": str(results / "tournament"),
        },
    }
    (results / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def print_summary(summary: dict) -> None:
    vs_random = summary["tournament"]["model_vs_random"]
    print("\n=== demo summary ===")
    for split, figures in summary["data"].items():
        print(
            f"data/{split}: {figures['unique_boards']:,} boards, "
            f"{figures['action_values']:,} Stockfish action values"
        )
    m = summary["metrics"]
    print(
        f"model: {summary['training']['model']} {summary['training']['target'].upper()}, "
        f"{summary['training']['steps']} steps; test action accuracy {m['action_accuracy']:.1%}, "
        f"Kendall's tau {m['kendall_tau']:.3f}"
    )
    print(
        "puzzles: " + ", ".join(f"{a} {f['accuracy']:.1%}" for a, f in summary["puzzles"].items())
    )
    if vs_random:
        print(
            f"tournament: the model scored {vs_random['model_score']:.1%} against the random "
            f"mover over {vs_random['games']} games"
        )
    print(f"done in {summary['wall_seconds']:.0f}s; results in {summary['outputs']['summary']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jobs.demo", description=__doc__)
    defaults = DemoConfig()
    parser.add_argument("--results", default=defaults.results)
    parser.add_argument("--work", default=defaults.work, help="annotated Parquet goes here")
    parser.add_argument("--run", default=defaults.run, help="the training run directory")
    parser.add_argument("--limit", default=defaults.limit, help="Stockfish limit per action")
    parser.add_argument("--workers", type=int, default=defaults.workers, help="engines at once")
    parser.add_argument("--engine", default=None, help="Stockfish binary")
    parser.add_argument("--fresh", action="store_true", help="recompute every step")
    parser.add_argument(VERBOSE_FLAG, action="store_true", help=VERBOSE_HELP)
    args = parser.parse_args(argv)
    set_verbose(
        args.verbose
    )  # Beam's start-up chatter: not news here (pipeline/beam/environment.py)
    config = config_from_args(DemoConfig, args)
    try:
        for option, path in (("--results", args.results), ("--work", args.work),
                             ("--run", args.run)):  # fmt: skip
            check_dir(path, option)
    except OutputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    try:
        print_summary(run(config, fresh=args.fresh))
    except KeyboardInterrupt:
        return interrupted(_INTERRUPTED)
    return 0


if __name__ == "__main__":
    sys.exit(main())
