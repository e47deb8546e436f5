"""AV-policy inference rate against the paper's own engine, on the same parameters and boards.

Run as `python -m bench.inference` (`make bench`). Prints one JSON object. For each size
(`small` and `9M` by default) the parameters are initialised by the reference code in the
released architecture (random weights: the rate does not depend on them) and imported with
model.import_reference's renaming, so both sides compute the same network; where
../shared/reference is absent, this project's own initialisation is used and the reference
columns say why they are missing. Measured per size, board by board in turns (so that a
machine shared with other jobs slows both sides alike):

- `ours`: NeuralAgent.choose_move, one board per call as in a game (legal moves, one
  predictor call in row passes, model/predictor.py; repetition rule): `moves_per_s` and
  `action_values_per_s`;
- `reference`: their ActionValueEngine.play on the same board, its predict function built
  as their engines build it (engines/constants.py: `wrap_predict_fn(..., batch_size=1)`);
  `reference_batch32`: the same with their wrapper's default batch of 32 sequences;
- `vs_reference` and `vs_reference_batch32`: ours / theirs in action values per second;
  `same_moves`: both chose the same move on every board.
- `batched_moves_per_s`: this project's boards BATCH at a time (a puzzle or metrics run).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import chess
import jax

from bench import oracle
from bench.tokenizer_speed import random_game_fens
from eval.agents.players import NeuralAgent
from model.config import CUSTOM_SIZE, MODEL_SIZES, Config, ModelConfig, TrainConfig
from model.import_reference import to_project
from model.networks.transformer import count_params, init_params
from model.predictor import Predictor

NUM_BINS = 128


def boards_for(num: int, seed: int) -> list[chess.Board]:
    boards = [chess.Board(fen) for fen in random_game_fens(num * 3, seed)]
    return [b for b in boards if not b.is_game_over()][::3][:num]


def av_config(size: str) -> Config:
    model = ModelConfig(size=size if size in MODEL_SIZES else CUSTOM_SIZE, **MODEL_SIZES[size])
    return Config(model=model, train=TrainConfig(target="av", num_bins=NUM_BINS))


def reference_engines(ref, config: Config):
    """(our params, {name: their engine}) for one network initialised by their code."""
    m = config.model
    their_config = oracle.transformer_config(
        ref, m.num_layers, m.embedding_dim, NUM_BINS, num_heads=m.num_heads
    )
    predictor = ref.transformer.build_transformer_predictor(their_config)
    params = oracle.init_params(predictor)
    values = oracle.bucket_values(ref, NUM_BINS)
    engines = {
        name: ref.neural_engines.ActionValueEngine(
            return_buckets_values=values,
            predict_fn=ref.neural_engines.wrap_predict_fn(predictor, params, batch_size=batch),
        )
        for name, batch in (("reference", 1), ("reference_batch32", 32))
    }
    return to_project(params, m.num_layers), engines


def measure(size: str, num_boards: int, batch: int, ref, reason: str | None) -> dict:
    config = av_config(size)
    if ref is not None:
        params, engines = reference_engines(ref, config)
    else:
        params, engines = init_params(config, seed=0), {}
    predictor = Predictor(params, config)
    agent = NeuralAgent(predictor, name=size)
    boards = boards_for(num_boards, seed=2)
    rows = sum(board.legal_moves.count() for board in boards)
    players = {"ours": lambda b: agent.choose_move(b)} | {
        name: engine.play for name, engine in engines.items()
    }
    # Every compiled shape first (ours: the buckets these boards need; theirs: one shape).
    for play in players.values():
        for board in boards:
            play(board.copy())
    for i in range(0, len(boards), batch):
        predictor.best_moves(boards[i : i + batch])

    seconds = dict.fromkeys(players, 0.0)
    same_moves = True
    for board in boards:
        chosen = {}
        for name, play in players.items():
            copy = board.copy()
            start = time.perf_counter()
            chosen[name] = play(copy)
            seconds[name] += time.perf_counter() - start
        same_moves &= len({m.uci() for m in chosen.values()}) == 1

    start = time.perf_counter()
    for i in range(0, len(boards), batch):
        predictor.best_moves(boards[i : i + batch])
    batched = time.perf_counter() - start

    result = {
        "parameters": count_params(predictor.params),
        "rows_per_pass": predictor.rows_per_pass,
        "boards": len(boards),
        "mean_legal_moves": round(rows / len(boards), 1),
        "moves_per_s": round(len(boards) / seconds["ours"], 2),
        "action_values_per_s": round(rows / seconds["ours"], 1),
        "batched_moves_per_s": round(len(boards) / batched, 2),
    }
    for name in engines:
        result[f"{name}_action_values_per_s"] = round(rows / seconds[name], 1)
        result[f"vs_{name}"] = round(seconds[name] / seconds["ours"], 2)
    if engines:
        result["same_moves"] = same_moves
    else:
        result["reference"] = f"not measured: {reason}"
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["small", "9M"])
    parser.add_argument("--boards", type=int, default=40, help="boards timed for small")
    parser.add_argument("--boards-9m", type=int, default=10, help="boards timed for 9M and up")
    parser.add_argument("--batch", type=int, default=16, help="boards per call when batched")
    args = parser.parse_args()
    try:
        ref, reason = oracle.load(), None
    except oracle.OracleUnavailable as e:
        ref, reason = None, str(e)
    results = {}
    for size in args.sizes:
        num = args.boards if size == "small" else args.boards_9m
        results[size] = measure(size, num, args.batch, ref, reason)
    print(
        json.dumps(
            {
                "bench": "inference",
                "policy": "av",
                "device": jax.devices()[0].platform,
                "cpus": len(os.sched_getaffinity(0)),
                "reference": f"searchless_chess {ref.commit}" if ref else f"absent: {reason}",
                "batch_boards": args.batch,
                "configs": results,
            }
        )
    )


if __name__ == "__main__":
    main()
