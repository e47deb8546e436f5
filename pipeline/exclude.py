"""Positions a training set must not contain: those of the evaluation sets.

    load_exclusions(["puzzles.csv.zst", "STS1-STS15_LAN_v3.epd"]) -> Exclusions

A position is a FEN without its move counters (`position_key`, core/positions.py): the board,
the side to move, castling rights and the en-passant square, as python-chess writes them
(`board.fen()`, an en-passant square only when a capture there is legal), which is how every
FEN the pipeline makes is written. Two boards that differ only in their clocks are one
position, so an evaluation position is excluded whatever move number the game reached it at.

What each file contributes:
- a Lichess puzzle CSV (`.csv`, `.csv.zst`): the position after `Moves[0]` (the one the solver
  faces) and every later position of the solution line, through the position after the last
  move. The puzzle's own FEN (before the opponent's move) is not an evaluation position.
- an EPD file (`.epd`): each line's position.
The files are read by core/eval_sets.py, the same parser the evaluations use; malformed rows
and lines are counted per file (they hold no position an evaluation could use).
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import chess

from core.eval_sets import Puzzle, SkippedLine, SkippedRow, iter_puzzles, iter_suite
from core.positions import position_key
from runtime.text_files import NotTextError, reading

PUZZLE_SUFFIXES = (".csv", ".csv.zst")
EPD_SUFFIXES = (".epd",)


def puzzle_positions(puzzle: Puzzle) -> Iterator[str]:
    """The keys of the positions after Moves[0], Moves[1], ..., Moves[-1]."""
    board = chess.Board(puzzle.fen)
    for uci in puzzle.moves:
        board.push_uci(uci)
        yield position_key(board.fen())


@dataclass(frozen=True)
class ExclusionFile:
    """What one file added: records read, records skipped as malformed, distinct positions."""

    path: str
    kind: str  # "puzzles" | "epd"
    records: int
    skipped: int
    positions: int
    first_skipped: str = ""  # "line N: error" of the first malformed record, if any


@dataclass(frozen=True)
class Exclusions:
    """The positions to drop (keys of `position_key`) and where they came from."""

    keys: frozenset[str] = frozenset()
    files: tuple[ExclusionFile, ...] = field(default_factory=tuple)

    def __contains__(self, fen: str) -> bool:
        return position_key(fen) in self.keys

    def __len__(self) -> int:
        return len(self.keys)

    def describe(self) -> dict:
        """For stats.json: the files, what each held, and the distinct positions in all."""
        return {
            "positions": len(self.keys),
            "files": [
                {k: v for k, v in vars(f).items() if k != "first_skipped" or v} for f in self.files
            ],
        }


def kind_of(path: str) -> str:
    """ "puzzles" or "epd" by the file's suffix; ValueError naming the file otherwise."""
    lower = path.lower()
    if lower.endswith(PUZZLE_SUFFIXES):
        return "puzzles"
    if lower.endswith(EPD_SUFFIXES):
        return "epd"
    raise ValueError(
        f"--exclude {path}: not a puzzle CSV ({', '.join(PUZZLE_SUFFIXES)}) "
        f"or an EPD file ({', '.join(EPD_SUFFIXES)})"
    )


def _file_positions(path: str, kind: str) -> tuple[set[str], int, list[SkippedRow | SkippedLine]]:
    keys: set[str] = set()
    records = 0
    skipped: list = []
    with reading(path):  # a file that is not UTF-8 text: one NotTextError naming it
        if kind == "puzzles":
            try:
                for puzzle in iter_puzzles(path, skipped):
                    records += 1
                    keys.update(puzzle_positions(puzzle))
            except csv.Error as e:  # data that merely decodes, as read_puzzles says
                raise NotTextError(f"--exclude {path} is not a CSV text file ({e})") from None
        else:
            for position in iter_suite(path, skipped):
                records += 1
                keys.add(position_key(position.fen))
    return keys, records, skipped


def load_exclusions(paths: Sequence[str] | Iterable[str]) -> Exclusions:
    """The positions of every file in `paths` (see the module doc).

    FileNotFoundError or ValueError naming the file for a missing file or an unknown suffix,
    before any file is read.
    """
    paths = list(paths)
    kinds = [kind_of(path) for path in paths]
    for path in paths:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"--exclude {path}: no such file")
    keys: set[str] = set()
    files = []
    for path, kind in zip(paths, kinds, strict=True):
        found, records, skipped = _file_positions(path, kind)
        keys |= found
        first = f"line {skipped[0].line}: {skipped[0].error}" if skipped else ""
        files.append(ExclusionFile(path, kind, records, len(skipped), len(found), first))
    return Exclusions(frozenset(keys), tuple(files))
