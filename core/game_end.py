"""How a game ends by the rules, as tournaments and self-play judge it."""

from __future__ import annotations

from dataclasses import dataclass

import chess

DRAW = "1/2-1/2"


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
