"""Packs annotated splits as the games they come from, for a lent accelerator: a board is its
place in a game and its label, ~5 bytes instead of a FEN's ~40 (pipeline/game_pack.py).

    python -m jobs.pack_games --out gpu-carry/data \\
        --split data/cpu-model/annotated/search-lichess \\
        --after-move data/cpu-model/annotated/search-random-move \\
        --games ../shared/data/games [--beside gpu-carry/wheels] [--budget-mib N]

`--split` names a split whose boards are boards of the games (the FEN before a move),
`--after-move` one whose boards are one move past them (`annotate --random-move`); each is a
split folder, a glob or a file of board shards, and may be given again. `--games` are the PGN
inputs the splits were annotated from (files, globs, folders; `.pgn.zst` too). A row the games
do not say (another shape, a board in none of them) is carried unchanged in `loose/`, so the
pack holds every row of the splits: `jobs.gpu_window --data` unpacks it on the device
(`pipeline.game_pack.unpack`) before it trains. The pack must fit the budget: by default what
the 64 MiB a device call carries leave after the repository's tracked files and the
`--beside` folders (jobs/pack_data.py). It is written as `<out>.partial` and replaces an
earlier pack at `--out` only once it is whole and within the budget, so a failed run leaves
that pack as it was; the inputs are checked before the minutes of reading.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys
import time
from collections.abc import Iterator, Sequence

import chess

from core.schema import SchemaError, board_files
from jobs.pack_data import check_replaceable, clear_pack, default_budget
from pipeline import pgn
from pipeline.game_pack import Game, PackError, SplitCount, pack
from pipeline.sources import NoInputError, expand_inputs, read_lines
from runtime.outputs import OutputError, check_dir
from runtime.progress import Progress
from runtime.text_files import InputError


def read_games(patterns: Sequence[str], progress: bool = True) -> Iterator[Game]:
    """The games of the PGN inputs a split is annotated from, as `parse_game` reads them (a
    game it skips gives no boards there either)."""
    inputs = expand_inputs(list(patterns))  # a pattern matching nothing is an error
    shown = Progress("games", None, unit="games") if progress else None
    read = 0
    for path in inputs:
        for _, parsed in pgn.parsed_games(read_lines(path)):
            read += 1
            if shown:
                shown.update(read, extra=os.path.basename(path))
            yield Game(parsed.fens[0], tuple(chess.Move.from_uci(m) for m in parsed.moves))
    if shown:
        shown.done()


def split_counts(direct: Sequence[str], after_move: Sequence[str]) -> list[SplitCount]:
    splits = [SplitCount(name_of(path), path, False) for path in direct]
    splits += [SplitCount(name_of(path), path, True) for path in after_move]
    return splits


def name_of(path: str) -> str:
    return path if glob.has_magic(path) else os.path.basename(os.path.normpath(path))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m jobs.pack_games", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--out", default="gpu-carry/data", help="the pack's folder (replaced)")
    parser.add_argument("--split", action="append", default=[], help="boards of the games")
    parser.add_argument(
        "--after-move", action="append", default=[], help="boards one move past the games'"
    )
    parser.add_argument("--games", nargs="+", required=True, help="the PGN inputs")
    parser.add_argument("--budget-mib", type=float, help="default: what the 64 MiB leave")
    parser.add_argument("--beside", action="append", default=[], help="carried with it")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    args = parser.parse_args(argv)
    if not args.split and not args.after_move:
        parser.error("give at least one --split or --after-move")
    budget = (
        int(args.budget_mib * 2**20) if args.budget_mib is not None else default_budget(args.beside)
    )
    began = time.monotonic()
    partial = os.path.normpath(args.out) + ".partial"
    try:
        check_dir(args.out)
        check_replaceable(args.out)
        for path in (*args.split, *args.after_move):
            board_files(path)  # a typo stops here, before minutes of reading
        inputs = expand_inputs(list(args.games))
        shutil.rmtree(partial, ignore_errors=True)
        manifest = pack(
            split_counts(args.split, args.after_move), read_games(inputs, not args.quiet), partial
        )
        if manifest["bytes"] > budget:
            shutil.rmtree(partial)
            raise OutputError(
                f"the pack is {manifest['bytes'] / 2**20:.1f} MiB, over the budget of "
                f"{budget / 2**20:.1f} MiB: not written; pack fewer splits or raise --budget-mib"
            )
        clear_pack(args.out)
        os.replace(partial, args.out)
    except (FileNotFoundError, NoInputError, InputError, SchemaError, PackError, OutputError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for split in manifest["splits"]:
        print(
            f"{split['name']}: {split['rows']:,} rows, {split['in_games']:,} said by the games, "
            f"{split['loose']:,} loose"
        )
    print(
        f"packed {manifest['boards']:,} boards ({manifest['games']:,} games, "
        f"{manifest['plies']:,} moves) in {manifest['bytes'] / 2**20:.2f} MiB of a "
        f"{budget / 2**20:.1f} MiB budget in {time.monotonic() - began:.0f}s -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
