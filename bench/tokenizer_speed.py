"""Tokenizer throughput: FENs per second through the batch path on one core.

Run as `python -m bench.tokenizer_speed` (`make bench`). Prints one JSON object. The baseline
measured in the same run is the one-FEN-at-a-time path.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time

import chess

from core.tokenizer import tokenize, tokenize_batch


def random_game_fens(num_fens: int, seed: int = 0) -> list[str]:
    """Distinct-ish positions from random legal games (the project makes its own input)."""
    rng = random.Random(seed)
    fens: list[str] = []
    while len(fens) < num_fens:
        board = chess.Board()
        for _ in range(rng.randint(20, 120)):
            moves = list(board.legal_moves)
            if not moves:
                break
            fens.append(board.fen())
            board.push(rng.choice(moves))
    return fens[:num_fens]


def best_rate(fn, items, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(items)
        best = min(best, time.perf_counter() - start)
    return len(items) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fens", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    fens = random_game_fens(args.fens)
    batch = best_rate(tokenize_batch, fens, args.repeats)
    single = best_rate(lambda xs: [tokenize(f) for f in xs], fens[:20_000], 2)
    print(
        json.dumps(
            {
                "bench": "tokenize",
                "fens": len(fens),
                "cores": 1,
                "batch_fens_per_s": round(batch),
                "single_fens_per_s": round(single),
                "batch_vs_single": round(batch / single, 2),
                "target_fens_per_s": 200_000,
                "meets_target": batch >= 200_000,
            }
        )
    )


if __name__ == "__main__":
    main()
