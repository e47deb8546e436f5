"""The evaluation sets' files, parsed: Lichess puzzle CSVs and EPD test suites.

Pure reading, in one place for everything that needs these positions: eval/ scores agents on
them (eval/puzzles.py, eval/suites.py) and pipeline/ keeps them out of training data
(pipeline/exclude.py).

Puzzles: a Lichess puzzle CSV (`.csv` or `.csv.zst`) with the Lichess header
(`PuzzleId,FEN,Moves,Rating,...`, 10 or 11 columns) or none: then 3 columns are
`FEN,Moves,Rating` and 10 or more the Lichess order. `Moves[0]` is the opponent's move; the
solver then plays `Moves[1]`, `Moves[3]`, ....

EPD suites: each line a position and operations. `c0` (or `c1`) may list move points,
`"f5=10, Be5+=2, Bf2=3"` (SAN, the Strategic Test Suite's format); `bm` are the best moves,
`am` moves to avoid; `id` names the position ("STS(v1.0) Undermine.001", theme "Undermine").

Malformed rows and lines are returned with their line number (SkippedRow, SkippedLine) for
the caller to report, never raised.
"""

from __future__ import annotations

import csv
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import chess

from runtime.text_files import NotTextError, open_text, reading

# --- Lichess puzzles ---------------------------------------------------------------------

LICHESS_COLUMNS = ("PuzzleId", "FEN", "Moves", "Rating")  # the first four, in this order
SHORT_COLUMNS = ("FEN", "Moves", "Rating")  # a header-less 3-column file


@dataclass(frozen=True)
class Puzzle:
    line: int  # 1-based line of the record in its file
    fen: str
    moves: tuple[str, ...]  # UCI; moves[0] is the opponent's setup move
    rating: int
    puzzle_id: str = ""
    themes: str = ""


@dataclass(frozen=True)
class SkippedRow:
    line: int
    error: str


def _check_file(path: str, what: str) -> None:
    """FileNotFoundError for a missing `path`, NotTextError for a directory (opening one
    would raise a bare IsADirectoryError)."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"{what} {path!r} does not exist")
    if os.path.isdir(path):
        raise NotTextError(f"{what} {path!r} is a directory; give a file")


def _is_header(row: list[str]) -> bool:
    names = {cell.strip().lower() for cell in row}
    return bool(names & {name.lower() for name in LICHESS_COLUMNS})


def _header_columns(row: list[str], path: str) -> dict[str, int]:
    """Column positions by name (case-insensitive); ValueError if FEN, Moves or Rating lacks."""
    names = {cell.strip().lower(): i for i, cell in enumerate(row)}
    columns = {
        name: names[name.lower()] for name in (*LICHESS_COLUMNS, "Themes") if name.lower() in names
    }
    missing = [name for name in SHORT_COLUMNS if name not in columns]
    if missing:
        raise ValueError(f"{path}: header {row} lacks the column(s) {missing}")
    return columns


def _columns_for(row: list[str], header: dict[str, int] | None) -> dict[str, int]:
    if header is not None:
        return header
    if len(row) == len(SHORT_COLUMNS):
        return {name: i for i, name in enumerate(SHORT_COLUMNS)}
    if len(row) >= 10:
        columns = {name: i for i, name in enumerate(LICHESS_COLUMNS)}
        columns["Themes"] = 7
        return columns
    raise ValueError(
        f"{len(row)} columns: without a header a row needs 3 (FEN,Moves,Rating) "
        "or the Lichess 10+ (PuzzleId,FEN,Moves,Rating,...)"
    )


def parse_puzzle(row: list[str], columns: dict[str, int], line: int) -> Puzzle:
    """One CSV record -> Puzzle, checking the FEN and that every move is legal in turn.

    ValueError saying what is wrong (the caller adds the file and line).
    """

    def cell(name: str) -> str:
        index = columns.get(name)
        if index is None or index >= len(row):
            raise ValueError(f"no {name} column ({len(row)} fields)")
        return row[index].strip()

    fen = cell("FEN")
    moves = tuple(cell("Moves").split())
    rating_text = cell("Rating")
    try:
        rating = int(float(rating_text))
    except ValueError:
        raise ValueError(f"rating {rating_text!r} is not a number") from None
    if len(moves) < 2:
        raise ValueError(f"needs the setup move and at least one solution move, got {moves}")
    try:
        board = chess.Board(fen)
    except ValueError as e:
        raise ValueError(f"bad FEN {fen!r}: {e}") from None
    for ply, uci in enumerate(moves):
        try:
            board.push_uci(uci)
        except ValueError:
            raise ValueError(f"move {ply} {uci!r} is not legal after {moves[:ply]}") from None
    return Puzzle(
        line=line,
        fen=fen,
        moves=moves,
        rating=rating,
        puzzle_id=row[columns["PuzzleId"]].strip() if "PuzzleId" in columns else "",
        themes=row[columns["Themes"]].strip()
        if "Themes" in columns and columns["Themes"] < len(row)
        else "",
    )


def iter_puzzles(path: str, skipped: list[SkippedRow] | None = None) -> Iterator[Puzzle]:
    """The puzzles of a Lichess puzzle CSV (`.csv` or `.csv.zst`, header or none), in file
    order. Malformed rows are appended to `skipped` (and reported on stderr when it is None)."""
    with open_text(path) as stream:
        reader = csv.reader(stream)
        header: dict[str, int] | None = None
        first = True
        for row in reader:
            line = reader.line_num
            if not row or all(not cell.strip() for cell in row):
                continue
            if first:
                first = False
                if _is_header(row):
                    header = _header_columns(row, path)
                    continue
            try:
                yield parse_puzzle(row, _columns_for(row, header), line)
            except ValueError as e:
                record = SkippedRow(line, str(e))
                if skipped is None:
                    print(f"{path}:{line}: skipped: {e}", file=sys.stderr)
                else:
                    skipped.append(record)


def read_puzzles(path: str, num: int | None = None) -> tuple[list[Puzzle], list[SkippedRow]]:
    """The first `num` well-formed puzzles of `path` (all when None) and the rows skipped.

    FileNotFoundError for a missing file, NotTextError (a ValueError) naming a file that is
    not text."""
    _check_file(path, "puzzle file")
    skipped: list[SkippedRow] = []
    puzzles: list[Puzzle] = []
    with reading(path):
        try:
            for puzzle in iter_puzzles(path, skipped):
                if num is not None and len(puzzles) >= num:
                    break
                puzzles.append(puzzle)
        except csv.Error as e:  # e.g. a "line" of megabytes: data that merely decodes
            raise NotTextError(f"{path} is not a CSV text file ({e})") from None
    return puzzles, skipped


# --- EPD suites -------------------------------------------------------------------------

POINT_FIELDS = ("c0", "c1")
_POINT_ITEM = re.compile(r"^\s*(\S+?)\s*=\s*(-?\d+)\s*$")


@dataclass(frozen=True)
class TestPosition:
    line: int
    fen: str
    id: str
    theme: str
    points: dict[str, int]  # UCI -> points; empty when the line has no point list
    best: frozenset[str]  # UCI moves of `bm`
    avoid: frozenset[str]  # UCI moves of `am`

    @property
    def max_points(self) -> int:
        return max(self.points.values()) if self.points else 0

    @property
    def has_solution(self) -> bool:
        return bool(self.best or self.avoid)


@dataclass(frozen=True)
class SkippedLine:
    line: int
    error: str


def parse_points(text: str, board: chess.Board) -> dict[str, int] | None:
    """`"f5=10, Be5+=2"` -> {UCI: points}; None when `text` is not a point list at all (e.g. a
    game's name in Arasan's c0); ValueError when it is one but a move does not parse."""
    items = [item for item in text.split(",") if item.strip()]
    matches = [_POINT_ITEM.match(item) for item in items]
    if not items or not any(matches):
        return None
    if not all(matches):
        raise ValueError(f"point list {text!r} mixes moves=points with other text")
    points: dict[str, int] = {}
    for match in matches:
        san, value = match.group(1), int(match.group(2))
        try:
            move = board.parse_san(san)
        except ValueError:
            raise ValueError(f"{san!r} in point list {text!r} is not a legal move") from None
        points[move.uci()] = value
    return points


def theme_of(position_id: str) -> str:
    """The test's theme from its id: "STS(v1.0) Undermine.001" -> "Undermine", "WAC.001" ->
    "WAC"; the id itself when it has no trailing number."""
    name = position_id.split(") ", 1)[1] if ") " in position_id else position_id
    stem, dot, number = name.strip().rpartition(".")
    return stem if dot and number.isdigit() and stem else name.strip()


def parse_epd_line(text: str, line: int) -> TestPosition:
    """One EPD line -> TestPosition; ValueError saying what is wrong."""
    fields = text.split()
    if len(fields) > 6 and fields[4].isdigit() and fields[5].isdigit():
        # A full FEN (halfmove clock and move number) where EPD has four fields: accept it.
        text = " ".join(fields[:4] + fields[6:])
    try:
        board, ops = chess.Board.from_epd(text)
    except ValueError as e:
        raise ValueError(f"not a valid EPD line: {e}") from None
    position_id = str(ops.get("id", "") or "")
    points: dict[str, int] = {}
    for key in POINT_FIELDS:
        if isinstance(ops.get(key), str):
            parsed = parse_points(ops[key], board)
            if parsed:
                points = parsed
                break

    def moves(key: str) -> frozenset[str]:
        value = ops.get(key)
        if value is None:
            return frozenset()
        if not isinstance(value, list):
            raise ValueError(f"{key} {value!r} is not a move list")
        return frozenset(m.uci() for m in value)

    position = TestPosition(
        line=line,
        fen=board.fen(),
        id=position_id,
        theme=theme_of(position_id) if position_id else "",
        points=points,
        best=moves("bm"),
        avoid=moves("am"),
    )
    if not position.points and not position.has_solution:
        raise ValueError("neither move points (c0/c1) nor bm/am: nothing to score")
    if board.is_game_over():
        raise ValueError("the position is already over")
    return position


def iter_suite(path: str, skipped: list[SkippedLine]) -> Iterator[TestPosition]:
    with open_text(path) as f:
        for number, text in enumerate(f, 1):
            text = text.strip()
            if not text or text.startswith("#"):
                continue
            try:
                yield parse_epd_line(text, number)
            except ValueError as e:
                skipped.append(SkippedLine(number, str(e)))


def read_suite(path: str, num: int | None = None) -> tuple[list[TestPosition], list[SkippedLine]]:
    """The first `num` well-formed positions of an EPD file (all when None), and the lines
    skipped as malformed. FileNotFoundError for a missing file, NotTextError (a ValueError)
    naming a file that is not text."""
    _check_file(path, "EPD file")
    skipped: list[SkippedLine] = []
    positions: list[TestPosition] = []
    with reading(path):
        for position in iter_suite(path, skipped):
            if num is not None and len(positions) >= num:
                break
            positions.append(position)
    return positions, skipped
