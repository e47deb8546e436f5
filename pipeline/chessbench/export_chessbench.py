"""Annotated-board Parquet -> ChessBench bag files, for the paper's reference code.

    python -m pipeline.chessbench.export_chessbench --input data/annotated/train --kind av \\
        --output 'data/export/action_value@4_data.bag'

writes the records of pipeline/chessbench/records.py: av one (FEN, move, win_prob) per valued move,
sv one (FEN, win_prob) per board with a state value, bc one (FEN, best move) per board with a
best move. Each board is written once, whatever its `count` (the released files hold each board
once), and all its records go to the same shard, chosen by a hash of the FEN, so the output
is the same on every run. Partial boards are left out of av (the reference code expects all
legal moves of a board) unless `--include-partial`. A board whose win probabilities are not
all numbers in [0, 1] (a NaN, say) is left out of av and sv (`boards_with_bad_values`): no
reader could use such a record. Every skipped board is counted.

Importing a bag and exporting it again gives the same records (import_chessbench.py
keeps win probabilities as float64 and moves as given), in a different order: by shard, then
by board, then in action-space order.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from core.schema import board_files, read_board_file, read_metadata
from core.values import is_win_probability
from pipeline.beam.shards import shard_of
from pipeline.chessbench.bag import BagWriter, shard_names
from pipeline.chessbench.records import KINDS, check_kind, encode_av, encode_bc, encode_sv
from runtime.cli import config_from_args
from runtime.outputs import OutputError, check_file
from runtime.progress import Progress

_COLUMNS = ["fen", "moves", "win_probs", "best_move", "state_win_prob", "partial"]


@dataclass(frozen=True)
class ExportConfig:
    input: str  # board shards: a split directory, a file or a glob
    kind: str  # av | sv | bc
    output: str  # a bag path, or `name@N_data.bag` for N shards (`.bagz`: compressed)
    include_partial: bool = False


class BadValue(ValueError):
    """A board row whose win probabilities are not all numbers in [0, 1]."""


def records(row: dict, kind: str, include_partial: bool) -> list[bytes]:
    """One board row's records of `kind` (empty when the row has none to give); BadValue
    when a win probability it would write is not a number in [0, 1]."""
    fen = row["fen"]
    if kind in ("av", "sv"):
        probs = row["win_probs"] if kind == "av" else [row["state_win_prob"]]
        if not is_win_probability([p for p in probs if p is not None]).all():
            raise BadValue(f"{fen}: win probabilities {probs} not all in [0, 1]")
    if kind == "av":
        if row["partial"] and not include_partial:
            return []
        return [
            encode_av(fen, move, p) for move, p in zip(row["moves"], row["win_probs"], strict=True)
        ]
    if kind == "sv":
        p = row["state_win_prob"]
        return [] if p is None else [encode_sv(fen, p)]
    if kind == "bc":
        return [encode_bc(fen, row["best_move"])] if row["best_move"] else []
    check_kind(kind)  # raises: an unknown kind
    return []


def _rows(path: str) -> Iterator[dict]:
    for file in board_files(path):
        table = read_board_file(file, _COLUMNS)
        for batch in table.to_batches(max_chunksize=4096):
            yield from batch.to_pylist()


def export(config: ExportConfig, show_progress: bool = True) -> dict:
    """Writes the bag shards; returns counts (also printed as JSON by the CLI)."""
    check_kind(config.kind)
    paths = shard_names(config.output) or [config.output]
    for path in paths:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    total = sum(read_metadata(f).num_rows for f in board_files(config.input))
    progress = Progress("export", total, "boards") if show_progress else None
    counts = {
        "boards": 0,
        "boards_exported": 0,
        "boards_without_records": 0,
        "boards_with_bad_values": 0,
        "records": 0,
    }
    writers = [BagWriter(path) for path in paths]
    try:
        for row in _rows(config.input):
            counts["boards"] += 1
            try:
                made = records(row, config.kind, config.include_partial)
            except BadValue as e:
                if not counts["boards_with_bad_values"]:
                    print(f"WARNING: skipping boards with bad values, e.g. {e}", file=sys.stderr)
                counts["boards_with_bad_values"] += 1
                continue
            writer = writers[shard_of(row["fen"], len(writers))]
            for record in made:
                writer.write(record)
            counts["boards_exported" if made else "boards_without_records"] += 1
            counts["records"] += len(made)
            if progress:
                progress.update(counts["boards"])
    except BaseException:
        for writer in writers:
            writer.abort()
        raise
    for writer in writers:
        writer.close()
    if progress:
        progress.done()
    return {"input": config.input, "kind": config.kind, "output": paths, **counts}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.chessbench.export_chessbench",
        description="Annotated-board Parquet -> ChessBench .bag/.bagz records",
    )
    parser.add_argument("--input", required=True, help="board shards: directory, file or glob")
    parser.add_argument("--kind", required=True, choices=KINDS)
    parser.add_argument(
        "--output", required=True, help="bag path, or 'dir/action_value@N_data.bag' for N shards"
    )
    parser.add_argument(
        "--include-partial", action="store_true", help="av: also boards with only some moves"
    )
    args = parser.parse_args(argv)
    config = config_from_args(ExportConfig, args)
    try:
        check_file(args.output, "--output")
        result = export(config)
    except (FileNotFoundError, ValueError, OutputError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
