"""AV-policy inference rate: moves chosen per second, all legal moves of a board in one batched
call to the predictor, for the small and 9M configs (randomly initialised parameters: the rate
does not depend on what the weights are).

Run as `python -m bench.inference` (`make bench`). Prints one JSON object. Measured per config:

- `moves_per_s`: NeuralAgent.choose_move, one board per call, the way a game is played
  (the repetition check included);
- `batched_moves_per_s`: boards evaluated BATCH at a time (how a puzzle or metrics run could
  go); `batched_vs_single` is the ratio of the two, measured in the same run;
- `action_values_per_s`: network rows (board, move) per second in the single-board path.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import chess
import jax

from bench.tokenize import random_game_fens
from eval.engines import NeuralAgent
from model.config import MODEL_SIZES, Config
from model.predictor import Predictor
from model.transformer import count_params, init_params


def predictor_for(size: str) -> Predictor:
    config = Config().replace(model={"size": size, **MODEL_SIZES[size]}, train={"target": "av"})
    return Predictor(init_params(config, seed=0), config)


def boards_for(num: int, seed: int) -> list[chess.Board]:
    boards = [chess.Board(fen) for fen in random_game_fens(num * 3, seed)]
    return [b for b in boards if not b.is_game_over()][::3][:num]


def measure(size: str, num_boards: int, batch: int) -> dict:
    predictor = predictor_for(size)
    agent = NeuralAgent(predictor, name=size)
    # Compile every padded shape (powers of two up to max_batch rows) before timing anything.
    size = 16
    while size <= predictor.max_batch:
        predictor.action_values([chess.STARTING_FEN], [["e2e4"] * size])
        size *= 2
    boards = boards_for(num_boards, seed=2)
    rows = sum(board.legal_moves.count() for board in boards)

    start = time.perf_counter()
    for board in boards:
        agent.choose_move(board)
    single = time.perf_counter() - start

    start = time.perf_counter()
    chosen = []
    for i in range(0, len(boards), batch):
        chunk = boards[i : i + batch]
        chosen += [moves[int(scores.argmax())] for moves, scores in predictor.move_values(chunk)]
    batched = time.perf_counter() - start
    assert len(chosen) == len(boards)
    return {
        "parameters": count_params(predictor.params),
        "boards": len(boards),
        "mean_legal_moves": round(rows / len(boards), 1),
        "moves_per_s": round(len(boards) / single, 2),
        "action_values_per_s": round(rows / single, 1),
        "batched_moves_per_s": round(len(boards) / batched, 2),
        "batched_vs_single": round(single / batched, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", nargs="+", default=["small", "9M"])
    parser.add_argument("--boards", type=int, default=200, help="boards timed for small")
    parser.add_argument("--boards-9m", type=int, default=30, help="boards timed for 9M")
    parser.add_argument("--batch", type=int, default=16, help="boards per call when batched")
    args = parser.parse_args()
    results = {}
    for size in args.sizes:
        num = args.boards_9m if size != "small" else args.boards
        results[size] = measure(size, num, args.batch)
    print(
        json.dumps(
            {
                "bench": "inference",
                "policy": "av",
                "device": jax.devices()[0].platform,
                "cpus": len(os.sched_getaffinity(0)),
                "batch_boards": args.batch,
                "configs": results,
            }
        )
    )


if __name__ == "__main__":
    main()
