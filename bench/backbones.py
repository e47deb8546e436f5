"""The gateau edge backbone against the transformer at equal parameters, in one run.

    python -m bench.backbones                      # speed: training and play
    python -m bench.backbones --quality --train data/real/train --test data/real/test \\
        --seconds 600 --puzzles PUZZLES.csv --sts STS1-STS15_LAN_v3.epd

Prints one JSON object (progress on stderr):

- `models`: the two configs and parameter counts. Gateau's is `--gateau-config`; the
  transformer's shape is the one whose parameter count is closest to it (4 heads), trained
  with the same settings but batches of 256 (board, move) rows.
- `train`: per backbone, the jitted train step's examples/s and action values learned/s
  (the transformer learns one per example; gateau one per valued move edge of each board),
  measured in alternating rounds of `--rate-seconds`; `values_ratio` = gateau / transformer
  per round (the goal: >= 20).
- `play`: per backbone, boards/s of Predictor.move_values (every legal move valued) and of
  NeuralAgent.choose_move (that and the agent's repetition check), one board per call as in
  a game, alternating rounds; `ratio` and `agent_ratio` per round (goal >= 20).
- `quality` (with --quality): both trained by model.training.train for the same wall-clock on the
  same data (steps = `--seconds` x the step rate just measured; the seconds actually taken
  are reported), then, on the test split, eval.metrics (test log-loss, action accuracy,
  Kendall's tau) on `--metrics-boards` boards, the first `--num-puzzles` puzzles and every
  `--sts-every`-th STS position, with the baselines (`--baseline`, default `random` and
  `stockfish:nodes=100000`, plus `greedy` where eval.agents.players has it) on the same puzzles and
  positions.

Speed is measured with random parameters on real positions from seeded random games (or
--train's boards): neither rate depends on what the weights are.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time

import chess
import jax
import numpy as np

from bench.train_speed import write_bench_shards
from core.eval_sets import read_puzzles, read_suite
from eval.agents.players import NeuralAgent, make_agent
from eval.agents.specs import parse_agent_spec
from eval.metrics import evaluate_checkpoint, read_rows
from eval.puzzles import evaluate as evaluate_puzzles
from eval.suites import run_suite
from model import config as config_lib
from model.config import Config
from model.data.loader import load_boards
from model.data.train_data import loader_settings, make_batches
from model.networks.network import init_params
from model.networks.transformer import count_params
from model.predictor import Predictor
from model.training.step import Placement, compile_train_step, init_state
from model.training.train import train
from runtime.progress import Progress

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BASELINES = ("random", "stockfish:nodes=100000", "greedy")
TRANSFORMER_BATCH = 256  # (board, move) rows, as bench.train_speed measures the transformer


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the two models -------------------------------------------------------------------------


def matching_transformer(gateau: Config, params: int) -> Config:
    """The transformer (AV, same bins and training settings) whose parameter count is
    closest to `params`, over 1-8 layers and widths 16-256 with 4 heads."""
    best = None
    for layers in range(1, 9):
        for width in range(16, 257, 16):
            candidate = gateau.replace(
                train={"batch_size": TRANSFORMER_BATCH},
                model={
                    "backbone": "transformer",
                    "size": "small",
                    "num_layers": layers,
                    "embedding_dim": width,
                    "num_heads": 4,
                    "widening_factor": 4,
                },
            )
            count = _transformer_params(layers, width, gateau.num_bins)
            if best is None or abs(count - params) < abs(best[0] - params):
                best = (count, candidate)
    return best[1]


def _transformer_params(layers: int, width: int, bins: int) -> int:
    """model/networks/transformer.py's count: embeddings, positions, per block 2 LayerNorms,
    4 attention and 3 SwiGLU (4x) projections without biases, final norm, head."""
    from model.config import EMBEDDING_VOCAB_SIZE, MAX_SEQUENCE_LENGTH

    block = 4 * width + 4 * width * width + 3 * 4 * width * width
    return (
        (EMBEDDING_VOCAB_SIZE + MAX_SEQUENCE_LENGTH) * width
        + layers * block
        + 2 * width
        + width * bins
        + bins
    )


# --- speed ----------------------------------------------------------------------------------


def train_rate(config: Config, data, seconds: float, state_and_step=None) -> dict:
    """Examples/s and action values/s of the jitted train step over `seconds`."""
    placement = Placement.over_all_devices()
    if state_and_step is None:
        state = init_state(config, placement)
        step = compile_train_step(config, placement)
    else:
        state, step = state_and_step
    t = config.train
    settings = dataclasses.replace(loader_settings(config), sampler="uniform", prefetch=2)
    loader = make_batches(config, data, settings)
    start = time.perf_counter()
    state, metrics = step(state, placement.global_batch(next(loader)))
    jax.block_until_ready(metrics)
    first = time.perf_counter() - start
    steps, values = 0, 0.0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds or steps < 2:
        state, metrics = step(state, placement.global_batch(next(loader)))
        jax.block_until_ready(metrics)
        steps += 1
        values += float(metrics.get("values_per_board", 1.0)) * t.batch_size
    elapsed = time.perf_counter() - start
    loader.close()
    return {
        "batch_size": t.batch_size,
        "steps": steps,
        "first_step_s": round(first, 2),
        "steps_per_s": steps / elapsed,
        "examples_per_s": round(steps * t.batch_size / elapsed, 1),
        "action_values_per_s": round(values / elapsed, 1),
    }, (state, step)


def play_rate(config: Config, boards: list[chess.Board], seconds: float) -> dict:
    """Boards/s, one board per call as in a game (every shape compiled first): of
    Predictor.move_values (the network's evaluation of every legal move) and of
    NeuralAgent.choose_move (that plus the agent's repetition check)."""
    predictor = Predictor(init_params(config, seed=0), config)
    agent = NeuralAgent(predictor, name=config.model.backbone)
    for board in boards:  # compiles every shape these boards need
        agent.choose_move(board)

    def rate(call) -> float:
        done = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds / 2 or done < len(boards):
            call(boards[done % len(boards)])
            done += 1
        return done / (time.perf_counter() - start)

    moves = sum(b.legal_moves.count() for b in boards) / len(boards)
    return {
        "boards_per_s": round(rate(lambda board: predictor.move_values([board])), 2),
        "agent_boards_per_s": round(rate(agent.choose_move), 2),
        "mean_legal_moves": round(moves, 1),
    }


def play_boards(num: int) -> list[chess.Board]:
    from bench.tokenizer_speed import random_game_fens

    boards = [chess.Board(fen) for fen in random_game_fens(num * 4, seed=2)]
    return [b for b in boards if not b.is_game_over()][::4][:num]


# --- quality --------------------------------------------------------------------------------


def train_for(config: Config, steps: int, out: str) -> dict:
    config = config.replace(
        train={
            "num_steps": max(1, steps),
            "eval_every": 0,
            "checkpoint_every": max(1, steps),
            "log_every": max(1, steps // 10),
            "warmup_steps": min(config.train.warmup_steps, max(0, steps // 10)),
            "eval_boards": 50,  # the judging is eval.metrics' on --metrics-boards below
        }
    )
    start = time.perf_counter()
    result = train(config, out, log=log)
    return {
        "steps": result.step,
        "seconds": round(time.perf_counter() - start, 1),
        "examples": result.data_position,
        "trainer_eval": result.last_eval,
    }


def quality(args, configs: dict[str, Config], rates: dict[str, float], out_dir: str) -> dict:
    rows = read_rows(args.test, args.metrics_boards)
    puzzles, _ = read_puzzles(args.puzzles, args.num_puzzles) if args.puzzles else ([], [])
    positions = []
    if args.sts:
        every, _ = read_suite(args.sts)
        positions = every[:: args.sts_every]
    result: dict = {
        "train": args.train,
        "test": args.test,
        "seconds_budget": args.seconds,
        "metrics_boards": len(rows),
        "puzzles": {"file": args.puzzles, "num": len(puzzles)},
        "sts": {"file": args.sts, "every": args.sts_every, "positions": len(positions)},
        "models": {},
        "baselines": {},
    }
    for name, config in configs.items():
        steps = int(args.seconds * rates[name])
        run = os.path.join(out_dir, name)
        log(f"quality: training {name} for {steps} steps (~{args.seconds:.0f} s) in {run}")
        config = config.replace(data={"train": args.train, "test": args.test})
        entry = train_for(config, steps, run)
        predictor = Predictor.from_checkpoint(run)
        entry["metrics"] = evaluate_checkpoint(predictor, rows)
        agent = NeuralAgent(predictor, name=name)
        entry |= judge(agent, puzzles, positions)
        result["models"][name] = entry
        log(f"quality: {name}: {json.dumps(_brief(entry))}")
    for spec in args.baseline:
        with make_agent(spec) as agent:
            result["baselines"][spec] = judge(agent, puzzles, positions)
            log(f"quality: {spec}: {json.dumps(_brief(result['baselines'][spec]))}")
    return result


def judge(agent, puzzles, positions) -> dict:
    out = {}
    if puzzles:
        solved = evaluate_puzzles(agent, puzzles)
        out["puzzles"] = {k: solved[k] for k in ("solved", "total", "accuracy", "buckets")}
    if positions:
        suite = run_suite(agent, positions)
        out["sts"] = {k: v for k, v in suite.items() if k not in ("records", "by_theme")}
    return out


def _brief(entry: dict) -> dict:
    brief = {}
    if "metrics" in entry:
        m = entry["metrics"]
        brief |= {k: m[k] for k in ("log_loss", "action_accuracy", "kendall_tau")}
    if "puzzles" in entry:
        brief["puzzles"] = entry["puzzles"]["accuracy"]
    if "sts" in entry:
        brief["sts_points"] = entry["sts"].get("points")
    return brief


# --- main -----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.backbones", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--gateau-config", default=os.path.join(ROOT, "model/configs/gateau.toml"))
    parser.add_argument("--boards", type=int, default=3000, help="synthetic boards for speed")
    parser.add_argument("--rate-seconds", type=float, default=20.0, help="per timed round")
    parser.add_argument("--rounds", type=int, default=2, help="alternating timed rounds")
    parser.add_argument("--play-boards", type=int, default=40)
    parser.add_argument("--quality", action="store_true", help="also train both and judge them")
    parser.add_argument("--train", help="annotated train split (quality; speed uses it too)")
    parser.add_argument("--test", help="annotated test split (quality)")
    parser.add_argument("--seconds", type=float, default=600.0, help="training budget each")
    parser.add_argument("--metrics-boards", type=int, default=500)
    parser.add_argument("--puzzles", help="Lichess puzzle CSV (quality)")
    parser.add_argument("--num-puzzles", type=int, default=300)
    parser.add_argument("--sts", help="STS EPD file (quality)")
    parser.add_argument("--sts-every", type=int, default=5)
    parser.add_argument("--baseline", action="append", help="agent specs (repeatable)")
    parser.add_argument("--out", help="run directories for --quality (default: a temp dir)")
    args = parser.parse_args(argv)
    if args.quality and not (args.train and args.test):
        parser.error("--quality needs --train and --test")
    if args.baseline is None:
        args.baseline = []
        for spec in DEFAULT_BASELINES:
            try:
                parse_agent_spec(spec)
                args.baseline.append(spec)
            except ValueError:
                log(f"baseline {spec!r} is not an agent here; left out")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    gateau = config_lib.load(args.gateau_config)
    gateau_params = count_params(init_params(gateau))
    transformer = matching_transformer(gateau, gateau_params)
    m = transformer.model
    if count_params(init_params(transformer)) != _transformer_params(
        m.num_layers, m.embedding_dim, transformer.num_bins
    ):
        raise AssertionError("_transformer_params no longer counts model/networks/transformer.py")
    configs = {"transformer": transformer, "gateau": gateau}
    document: dict = {
        "bench": "backbones",
        "cores": len(os.sched_getaffinity(0)),
        "backend": jax.default_backend(),
        "models": {
            name: {
                "params": count_params(init_params(config)),
                "model": config.to_dict()["model"],
                "batch_size": config.train.batch_size,
            }
            for name, config in configs.items()
        },
    }
    with tempfile.TemporaryDirectory() as scratch:
        if args.train:
            data = load_boards(args.train)
        else:
            write_bench_shards(scratch, args.boards)
            data = load_boards(scratch)
        document["speed_data"] = args.train or f"{data.num_boards} random-game boards"

        rounds: dict[str, list[dict]] = {name: [] for name in configs}
        compiled: dict = {}
        progress = Progress("train rate", args.rounds * len(configs), "rounds")
        for _ in range(args.rounds):
            for name, config in configs.items():
                rate, compiled[name] = train_rate(
                    config, data, args.rate_seconds, compiled.get(name)
                )
                rounds[name].append(rate)
                progress.update(sum(map(len, rounds.values())))
        progress.done()
        document["train"] = {
            **rounds,
            "values_ratio": [
                round(g["action_values_per_s"] / t["action_values_per_s"], 1)
                for t, g in zip(rounds["transformer"], rounds["gateau"], strict=True)
            ],
        }
        steps_per_s = {
            name: float(np.median([r["steps_per_s"] for r in rs])) for name, rs in rounds.items()
        }
        compiled.clear()

        boards = play_boards(args.play_boards)
        plays: dict[str, list[dict]] = {name: [] for name in configs}
        for _ in range(args.rounds):
            for name, config in configs.items():
                plays[name].append(play_rate(config, boards, args.rate_seconds))
        document["play"] = {
            **plays,
            "ratio": [
                round(g["boards_per_s"] / t["boards_per_s"], 1)
                for t, g in zip(plays["transformer"], plays["gateau"], strict=True)
            ],
            "agent_ratio": [
                round(g["agent_boards_per_s"] / t["agent_boards_per_s"], 1)
                for t, g in zip(plays["transformer"], plays["gateau"], strict=True)
            ],
        }
        log(
            json.dumps(
                {"train": document["train"]["values_ratio"], "play": document["play"]["ratio"]}
            )
        )

        if args.quality:
            out_dir = args.out or os.path.join(scratch, "runs")
            document["quality"] = quality(args, configs, steps_per_s, out_dir)
    print(json.dumps(document))
    return 0


if __name__ == "__main__":
    sys.exit(main())
