"""A new split of the annotated boards whose best move is forcing: a check, a capture, or either.

    python -m pipeline.select_boards SPLIT [SPLIT ...] --out DIR --split NAME \\
        --best-move check|capture|forcing [--num-shards N] [--overwrite]

Each SPLIT is an annotated split (a shard directory, a shard file or a glob). The rows whose
`best_move` is of the kind asked are written unchanged, in input order, to
`DIR/NAME/boards-*.parquet` (N shards of consecutive rows), with `DIR/NAME.meta/stats.json`
(the counts per input) and the data card `DIR/README.md` rewritten.

Why: a Lichess puzzle starts with a forcing move far more often than a game does. The first
solver move of the first 1,000 puzzles of the puzzle file gives check in 59% of them; the best
move of a real game's board does in 7%, and of a board after a random move in 13%. A split
of the boards whose best move gives check shows a small network more of the kind of move it
must find, at the cost of the searches of the boards left out.

A row whose FEN or best move cannot be read is counted and skipped, with one line naming its
file and row.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import chess
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from core.schema import (
    BOARD_SCHEMA,
    BOARDS_PREFIX,
    MAX_SHARDS,
    ROW_GROUP_SIZE,
    board_files,
    meta_dir,
    read_board_file,
    shard_name,
    stats_path,
)
from pipeline.card import write_card
from runtime.cli import int_at_least, plain_name
from runtime.interrupts import interrupted
from runtime.outputs import check_dir
from runtime.progress import Progress

MoveKind = Literal["check", "capture", "forcing"]
MOVE_KINDS: tuple[MoveKind, ...] = ("check", "capture", "forcing")


def is_kind(board: chess.Board, move: chess.Move, kind: MoveKind) -> bool:
    """Whether `move` (legal on `board`) gives check, captures, or does either (`forcing`)."""
    if kind == "check":
        return board.gives_check(move)
    if kind == "capture":
        return board.is_capture(move)
    return board.gives_check(move) or board.is_capture(move)


def best_move_is(fen: str, best_move: str, kind: MoveKind) -> bool:
    """Whether the row's best move is of `kind`. ValueError when the FEN or the move cannot be
    read, or the move is not legal on the board. A board with no best move ("") has none."""
    if not best_move:
        return False
    board = chess.Board(fen)
    move = chess.Move.from_uci(best_move)
    if not board.is_legal(move):
        raise ValueError(f"best move {best_move} is not legal in {fen}")
    return is_kind(board, move, kind)


@dataclass(frozen=True)
class SelectConfig:
    inputs: tuple[str, ...]
    out: str
    split: str
    best_move: MoveKind = "check"
    num_shards: int = 1
    overwrite: bool = False

    def __post_init__(self):
        if self.best_move not in MOVE_KINDS:
            raise ValueError(
                f"--best-move must be one of {list(MOVE_KINDS)}, got {self.best_move!r}"
            )
        if self.num_shards < 1:
            raise ValueError(f"--num-shards must be at least 1, got {self.num_shards}")


def select(files: list[str], kind: MoveKind, say: Callable[[str], None]) -> tuple[pa.Table, dict]:
    """The rows of `files` whose best move is of `kind`, in order, and the counts per file."""
    kept, per_file = [], {}
    progress = Progress(f"select_boards ({kind})", len(files), "files")
    for number, file in enumerate(files):
        table = read_board_file(file)
        mask, skipped = [], 0
        fens, moves = table["fen"].to_pylist(), table["best_move"].to_pylist()
        for row, (fen, move) in enumerate(zip(fens, moves, strict=True)):
            try:
                mask.append(best_move_is(fen, move, kind))
            except ValueError as e:
                say(f"{file}: row {row}: skipped: {e}")
                mask.append(False)
                skipped += 1
        chosen = table.filter(pa.array(mask, pa.bool_()))
        kept.append(chosen)
        per_file[file] = {"rows": table.num_rows, "kept": chosen.num_rows, "skipped": skipped}
        progress.update(number + 1)
    progress.done()
    table = pa.concat_tables(kept) if kept else BOARD_SCHEMA.empty_table()
    return table, per_file


def run(config: SelectConfig, say: Callable[[str], None] | None = None) -> dict:
    """Writes the split (see the module doc) and returns its stats document."""
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    split_dir = os.path.join(config.out, config.split)
    check_dir(config.out)  # before the selection, which reads every input
    files = [file for pattern in config.inputs for file in board_files(pattern)]
    files = list(dict.fromkeys(files))
    if os.path.abspath(split_dir) in {os.path.abspath(os.path.dirname(f)) for f in files}:
        raise ValueError(f"the output split {split_dir} is one of the inputs")
    existing = [path for path in (split_dir, meta_dir(split_dir)) if os.path.exists(path)]
    if existing and not config.overwrite:
        raise FileExistsError(f"{existing[0]} exists (--overwrite replaces it)")
    table, per_file = select(files, config.best_move, say)
    if config.num_shards > max(table.num_rows, 1):
        raise ValueError(
            f"--num-shards {config.num_shards} is more than the {table.num_rows:,} boards "
            "selected: some shards would be empty"
        )
    for path in existing:  # only now: an input that fails to read leaves the old split whole
        shutil.rmtree(path)
    os.makedirs(split_dir)
    os.makedirs(meta_dir(split_dir))
    per_shard = -(-table.num_rows // config.num_shards)
    for index in range(config.num_shards):
        shard = table.slice(index * per_shard, per_shard)
        path = os.path.join(split_dir, shard_name(BOARDS_PREFIX, index, config.num_shards))
        pq.write_table(shard, path, row_group_size=ROW_GROUP_SIZE)
    document = {
        "source": "select",
        "best_move": config.best_move,
        "inputs": files,
        "rows": sum(f["rows"] for f in per_file.values()),
        "kept": table.num_rows,
        "skipped": sum(f["skipped"] for f in per_file.values()),
        "per_input": per_file,
        "action_values": pc.sum(pc.list_value_length(table["moves"])).as_py() or 0,
        "num_shards": config.num_shards,
    }
    with open(stats_path(split_dir), "w") as handle:
        json.dump(document, handle, indent=2)
    write_card(config.out)
    return document


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.select_boards",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("inputs", nargs="+", help="annotated splits: directories, files, globs")
    parser.add_argument("--out", required=True, help="the directory of the new split")
    parser.add_argument(
        "--split", required=True, type=plain_name, help="the new split's name (a plain name)"
    )
    parser.add_argument("--best-move", choices=MOVE_KINDS, default="check")
    parser.add_argument(
        "--num-shards",
        type=int_at_least(1, MAX_SHARDS),
        default=1,
        help=f"at most the boards selected and at most {MAX_SHARDS:,}",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing split")
    args = parser.parse_args(argv)
    try:
        config = SelectConfig(tuple(args.inputs), args.out, args.split, args.best_move,
                              args.num_shards, args.overwrite)  # fmt: skip
        document = run(config)
    except (OSError, ValueError) as e:  # a missing input, an output in the way, a bad file
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return interrupted("select_boards: interrupted; run it again with --overwrite")
    print(
        f"{config.split}: kept {document['kept']:,} of {document['rows']:,} boards "
        f"(best move: {config.best_move}), {document['skipped']:,} skipped",
        file=sys.stderr,
    )
    print(json.dumps({k: v for k, v in document.items() if k != "per_input"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
