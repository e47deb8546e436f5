"""How many test boards also occur in train (the paper: 14.7% for Feb vs Mar 2023).

    python -m pipeline.overlap TRAIN TEST

TRAIN and TEST are annotated splits (a shard directory, a shard file or a glob). Prints one
JSON object: unique test boards, how many are also train boards and the fraction; the same
weighted by each test board's `count` (occurrences in the test games); and, because FENs
differ in their move counters, the overlap on the position alone (pieces, side to move,
castling, en passant).
"""

from __future__ import annotations

import argparse
import json
import sys

import pyarrow.parquet as pq

from core.schema import board_files, check_schema, reading_shard


def _position(fen: str) -> str:
    return fen.rsplit(" ", 2)[0]


def _fens_and_counts(path: str):
    for file in board_files(path):
        with reading_shard(file):  # a truncated or corrupt shard: one error naming it
            handle = pq.ParquetFile(file)
            check_schema(handle.schema_arrow, file)
            for batch in handle.iter_batches(columns=["fen", "count"]):
                yield from zip(
                    batch.column("fen").to_pylist(), batch.column("count").to_pylist(), strict=True
                )


def overlap(train: str, test: str) -> dict:
    """The overlap report (see the module doc). Train FENs are held in memory as a set."""
    train_fens: set[str] = set()
    train_positions: set[str] = set()
    for fen, _ in _fens_and_counts(train):
        train_fens.add(fen)
        train_positions.add(_position(fen))
    boards = shared = occurrences = shared_occurrences = shared_positions = 0
    for fen, count in _fens_and_counts(test):
        boards += 1
        occurrences += count
        if fen in train_fens:
            shared += 1
            shared_occurrences += count
        if _position(fen) in train_positions:
            shared_positions += 1
    return {
        "train": train,
        "test": test,
        "train_boards": len(train_fens),
        "test_boards": boards,
        "test_boards_in_train": shared,
        "fraction": shared / boards if boards else 0.0,
        "test_occurrences": occurrences,
        "weighted_fraction": shared_occurrences / occurrences if occurrences else 0.0,
        "fraction_ignoring_move_counters": shared_positions / boards if boards else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline.overlap", description=__doc__)
    parser.add_argument("train", help="train split: shard directory, file or glob")
    parser.add_argument("test", help="test split: shard directory, file or glob")
    args = parser.parse_args(argv)
    try:
        report = overlap(args.train, args.test)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
