"""When a game is over by the rules, and what it is worth: the one rule tournaments and the
tree search share.

A game ends on checkmate, stalemate, insufficient material, the third occurrence of a
position (counted over the board's move stack, so a board must carry the game's history) or
fifty moves without a capture or pawn move. Draws end the game as soon as they are claimable
on the board: an engine match has no one to forget to claim them.
"""

from __future__ import annotations

from dataclasses import dataclass

import chess

DRAW = "1/2-1/2"
DRAW_VALUE = 0.5  # win probability of a drawn position, for either side


@dataclass(frozen=True)
class Outcome:
    result: str  # "1-0", "0-1" or "1/2-1/2"
    termination: str


def board_outcome(board: chess.Board) -> Outcome | None:
    """The game's end by the rules, draws counted once claimable on the board; else None."""
    if board.is_checkmate():
        return Outcome("0-1" if board.turn == chess.WHITE else "1-0", "checkmate")
    if board.is_stalemate():
        return Outcome(DRAW, "stalemate")
    if board.is_insufficient_material():
        return Outcome(DRAW, "insufficient material")
    # A claim needs the position to have occurred three times: is_repetition looks at the
    # actual history only (can_claim_threefold_repetition also tries every next move).
    if board.is_repetition(3):
        return Outcome(DRAW, "threefold repetition")
    if board.halfmove_clock >= 100:
        return Outcome(DRAW, "fifty-move rule")
    return None


def terminal_value(board: chess.Board) -> float | None:
    """The exact win probability of a finished game for the side to move (0 when it is
    mated, 0.5 for every draw), or None while the game goes on."""
    outcome = board_outcome(board)
    if outcome is None:
        return None
    return DRAW_VALUE if outcome.result == DRAW else 0.0
