"""Opening positions for tournaments and self-play: the bundled ECO set, a user PGN or an EPD
file.

The bundled `core/data/openings.pgn` holds 62 well-known opening lines (ECO code, name and
main-line moves, 7 to 17 plies), one per ECO family so tournaments start from varied, balanced
positions. A PGN opening keeps its moves, so tournament games replay from the initial position
and any PGN viewer shows the opening; an EPD opening is a bare position (set up with a FEN).
"""

from __future__ import annotations

import io
import pathlib
import random
from collections.abc import Sequence
from dataclasses import dataclass

import chess
import chess.pgn

DEFAULT_OPENINGS = pathlib.Path(__file__).resolve().parent / "data" / "openings.pgn"


@dataclass(frozen=True)
class Opening:
    """A start position: `moves` (UCI) played from `fen`."""

    name: str
    eco: str
    fen: str
    moves: tuple[str, ...]

    def board(self) -> chess.Board:
        """The position after the opening, with its moves on the move stack."""
        board = chess.Board(self.fen)
        for uci in self.moves:
            board.push_uci(uci)
        return board

    @property
    def label(self) -> str:
        """The name as PGN `Opening` headers and tables show it."""
        return f"{self.eco} {self.name}".strip()


class OpeningsError(ValueError):
    pass


def _from_pgn(path: pathlib.Path, text: str) -> list[Opening]:
    openings, stream, record = [], io.StringIO(text), 0
    while (game := chess.pgn.read_game(stream)) is not None:
        record += 1
        where = f"{path}, game {record}"
        if game.errors:
            raise OpeningsError(f"{where}: {game.errors[0]}")
        board = game.board()
        moves = tuple(m.uci() for m in game.mainline_moves())
        name = game.headers.get("Opening") or game.headers.get("Event", "")
        if name in ("", "?"):
            name = f"{path.stem} #{record}"
        if game.headers.get("Variation"):
            name = f"{name}, {game.headers['Variation']}"
        eco = game.headers.get("ECO", "")
        opening = Opening(name=name, eco="" if eco == "?" else eco, fen=board.fen(), moves=moves)
        _check_playable(opening, where)
        openings.append(opening)
    return openings


def _from_epd(path: pathlib.Path, text: str) -> list[Opening]:
    openings = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{path}, line {number}"
        try:
            board, ops = chess.Board.from_epd(line)
        except ValueError as e:
            raise OpeningsError(f"{where}: {e}") from e
        eco = str(ops.get("eco", ""))
        name = str(ops.get("id") or ops.get("opening") or f"{path.stem} line {number}")
        opening = Opening(name=name, eco=eco, fen=board.fen(), moves=())
        _check_playable(opening, where)
        openings.append(opening)
    return openings


def _check_playable(opening: Opening, where: str) -> None:
    board = opening.board()
    if board.is_game_over(claim_draw=True):
        raise OpeningsError(f"{where}: the position is already over: {board.fen()}")
    if not board.is_valid():
        raise OpeningsError(f"{where}: not a legal position: {board.fen()}")


def load_openings(path: str | pathlib.Path | None = None) -> list[Opening]:
    """Reads a `.pgn` (each game's main line is an opening) or `.epd` file; the bundled set
    when `path` is None. Raises OpeningsError naming the file and record of a bad entry."""
    path = pathlib.Path(path) if path is not None else DEFAULT_OPENINGS
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise OpeningsError(f"cannot read openings {path}: {e}") from e
    if path.suffix.lower() == ".epd":
        openings = _from_epd(path, text)
    elif path.suffix.lower() == ".pgn":
        openings = _from_pgn(path, text)
    else:
        raise OpeningsError(f"{path}: openings must be a .pgn or .epd file")
    if not openings:
        raise OpeningsError(f"{path}: no openings found")
    return openings


def choose_openings(openings: Sequence[Opening], count: int, seed: int = 0) -> list[Opening]:
    """`count` openings: a seeded shuffle of the set, cycled if `count` exceeds its size,
    so every pairing of a tournament plays the same openings."""
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    order = list(openings)
    random.Random(seed).shuffle(order)
    return [order[i % len(order)] for i in range(count)]
