"""The API's parameters, checked: strings from a query or JSON values from a body, each of the
type it must be, or ApiError with a 4xx and one line naming the first bad one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import chess

from core.game_end import board_outcome
from eval.uci.options import UciError
from eval.uci.position import parse_position

MAX_NAME = 200  # characters of a model's name, a player's name, a page's id
WHOLE_NUMBER = re.compile(r"[0-9]{1,9}")

# chess.Board.status()'s flags in words, for a position that is not a legal one.
STATUS_WORDS = {
    chess.STATUS_NO_WHITE_KING: "no white king",
    chess.STATUS_NO_BLACK_KING: "no black king",
    chess.STATUS_TOO_MANY_KINGS: "more than one king of a side",
    chess.STATUS_TOO_MANY_WHITE_PAWNS: "more than 8 white pawns",
    chess.STATUS_TOO_MANY_BLACK_PAWNS: "more than 8 black pawns",
    chess.STATUS_PAWNS_ON_BACKRANK: "a pawn on the first or last rank",
    chess.STATUS_TOO_MANY_WHITE_PIECES: "more than 16 white pieces",
    chess.STATUS_TOO_MANY_BLACK_PIECES: "more than 16 black pieces",
    chess.STATUS_BAD_CASTLING_RIGHTS: "castling rights its kings and rooks do not allow",
    chess.STATUS_INVALID_EP_SQUARE: "an en passant square no last move can give",
    chess.STATUS_OPPOSITE_CHECK: "the side not to move is in check",
    chess.STATUS_EMPTY: "an empty board",
    chess.STATUS_TOO_MANY_CHECKERS: "a king in check from more than two pieces",
    chess.STATUS_IMPOSSIBLE_CHECK: "a check no last move can give",
}


class ApiError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def shown(value, limit: int = 60) -> str:
    """A value as the error line quotes it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def status_words(board: chess.Board) -> str:
    """Why `board` is not a legal position, in words."""
    status = board.status()
    words = [text for flag, text in STATUS_WORDS.items() if status & flag]
    return "; ".join(words) or "not a legal position"


def text_param(name: str, value, limit: int = MAX_NAME) -> str | None:
    """An optional string parameter (None when absent or JSON null)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApiError(400, f"{name} must be a string, got {shown(value)}")
    if len(value) > limit:
        raise ApiError(400, f"{name} is over {limit} characters")
    return value


def move_list(moves: str | Iterable[str] | None) -> list[str]:
    """UCI moves from a JSON list or a query string (separated by spaces or commas)."""
    if moves is None:
        return []
    if isinstance(moves, str):
        return moves.replace(",", " ").split()
    if not isinstance(moves, list) or not all(isinstance(m, str) for m in moves):
        raise ApiError(400, "moves must be a list of UCI strings (or one string of them)")
    return moves


def start_board(fen: str) -> chess.Board:
    """The legal position of `fen`; 400 saying in words what is wrong."""
    try:
        board = chess.Board(fen)
    except ValueError as e:
        raise ApiError(400, f"invalid FEN {shown(fen, 100)}: {e}") from None
    if not board.is_valid():
        raise ApiError(400, f"invalid FEN {shown(fen, 100)}: {status_words(board)}")
    return board


def game_board(fen: str | None, moves: str | Iterable[str] | None = None) -> chess.Board:
    """The board after `moves` from `fen` (the standard start when empty), every move on
    its stack; 400 naming a bad FEN or the first illegal move."""
    fen = text_param("fen", fen, limit=200)
    if fen and fen.strip():
        start_board(fen)  # its error in words before the UCI parser's
    head = ["fen", *fen.split()] if fen and fen.strip() else ["startpos"]
    try:
        return parse_position([*head, "moves", *move_list(moves)])
    except UciError as e:
        raise ApiError(400, str(e)) from None


def simulations_of(value, maximum: int) -> int:
    """Playouts from a JSON integer or a query's digits (absent or empty: 0)."""
    if value is None or value == "":
        return 0
    if isinstance(value, str) and WHOLE_NUMBER.fullmatch(value.strip()):
        sims = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        sims = value
    else:
        raise ApiError(400, f"simulations must be a whole number, got {shown(value)}")
    if not 0 <= sims <= maximum:
        raise ApiError(400, f"simulations must be between 0 and {maximum}, got {sims}")
    return sims


def require_playable(board: chess.Board) -> None:
    outcome = board_outcome(board)
    if outcome is not None:
        raise ApiError(
            409, f"the game is over ({outcome.termination}, {outcome.result}): no move to make"
        )


@dataclass(frozen=True)
class BoardRequest:
    """What /api/analysis and /api/play are asked: a playable position, the model and value
    model named (None: the defaults), the playouts to search (0: the policy alone), and the
    page that asks (a newer request of the same page supersedes this one)."""

    board: chess.Board
    model: str | None
    value: str | None
    simulations: int
    page: str | None = None

    @classmethod
    def parse(
        cls,
        max_simulations: int,
        fen=None,
        moves=None,
        model=None,
        value=None,
        simulations=0,
        page=None,
    ) -> BoardRequest:
        """The request from its parameters; 4xx naming the first bad one."""
        board = game_board(fen, moves)
        require_playable(board)
        return cls(
            board,
            text_param("model", model),
            text_param("value", value),
            simulations_of(simulations, max_simulations),
            text_param("page", page),
        )
