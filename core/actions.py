"""The 1968-move action space: every UCI move a standard game can contain, and its index.

Order (docs/design.md, squares a1=0 ... h8=63): for each from-square in ascending order, the
squares a queen reaches from it on an empty board (ascending), then the squares a knight
reaches (ascending): 1792 moves, castling included as the king's two-square move. Then 176
promotions: rank pairs 2->1 then 7->8, files a..h, each with the straight push, the capture
towards file-1 and the capture towards file+1, each with suffixes q, r, b, n.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import chess
import numpy as np


def _build() -> tuple[str, ...]:
    moves: list[str] = []
    for origin in range(64):
        queen = chess.SquareSet(chess.BB_RANK_ATTACKS[origin][0])
        queen |= chess.SquareSet(chess.BB_FILE_ATTACKS[origin][0])
        queen |= chess.SquareSet(chess.BB_DIAG_ATTACKS[origin][0])
        knight = chess.SquareSet(chess.BB_KNIGHT_ATTACKS[origin])
        for targets in (queen, knight):
            moves.extend(chess.square_name(origin) + chess.square_name(t) for t in targets)
    for from_rank, to_rank in (("2", "1"), ("7", "8")):
        for file_index, file in enumerate(chess.FILE_NAMES):
            for step in (0, -1, 1):
                target = file_index + step
                if not 0 <= target < 8:
                    continue
                for piece in "qrbn":
                    moves.append(f"{file}{from_rank}{chess.FILE_NAMES[target]}{to_rank}{piece}")
    return tuple(moves)


ACTIONS: tuple[str, ...] = _build()
NUM_ACTIONS = len(ACTIONS)  # 1968
# The most legal moves any reachable chess position has (R6R/3Q4/1Q4Q1/4Q3/2Q4Q/Q4Q2/pp1Q4/kBNN1KB1
# w - - 0 1, Petrović 1964): the most rows a policy ever scores for one board.
MAX_LEGAL_MOVES = 218
ACTION_TO_INDEX: dict[str, int] = {move: i for i, move in enumerate(ACTIONS)}

_ACTION_ARRAY = np.array(ACTIONS)
_SORTED_ORDER = np.argsort(_ACTION_ARRAY, kind="stable")
_SORTED_ACTIONS = _ACTION_ARRAY[_SORTED_ORDER]


def move_to_index(move: str | chess.Move) -> int:
    """Index of a UCI move (string or chess.Move); KeyError naming it if it is not an action."""
    uci = move if isinstance(move, str) else move.uci()
    try:
        return ACTION_TO_INDEX[uci]
    except KeyError:
        raise KeyError(f"move {uci!r} is not in the 1968-move action space") from None


def index_to_move(index: int) -> str:
    return ACTIONS[index]


def moves_to_indices(moves: Sequence[str] | np.ndarray) -> np.ndarray:
    """Vectorised move_to_index: an array of UCI strings -> int32 indices (KeyError if unknown)."""
    moves = np.asarray(moves, dtype=_ACTION_ARRAY.dtype)
    if moves.size == 0:
        return np.zeros(moves.shape, dtype=np.int32)
    positions = np.searchsorted(_SORTED_ACTIONS, moves)
    positions = np.minimum(positions, NUM_ACTIONS - 1)
    found = _SORTED_ACTIONS[positions] == moves
    if not found.all():
        bad = moves[~found].ravel()[0]
        raise KeyError(f"move {str(bad)!r} is not in the 1968-move action space")
    return _SORTED_ORDER[positions].astype(np.int32)


def indices_to_moves(indices: Sequence[int] | np.ndarray) -> np.ndarray:
    """Vectorised index_to_move: int indices -> array of UCI strings."""
    return _ACTION_ARRAY[np.asarray(indices)]


def legal_actions(board: chess.Board) -> list[str]:
    """The board's legal moves as UCI strings, in action-space order.

    This is the order of the `moves` column of the annotated dataset.
    """
    return sorted((m.uci() for m in board.legal_moves), key=move_to_index)


def legal_action_mask(boards: Iterable[chess.Board]) -> np.ndarray:
    """Boolean (num_boards, 1968): which actions are legal on each board."""
    rows = []
    for board in boards:
        row = np.zeros(NUM_ACTIONS, dtype=bool)
        row[[move_to_index(m) for m in board.legal_moves]] = True
        rows.append(row)
    return np.stack(rows) if rows else np.zeros((0, NUM_ACTIONS), dtype=bool)
