"""The standard piece values in pawns (P1 N3 B3 R5 Q9), the one table of them: `greedy`'s
material count (eval/agents/players.py) and the static exchange of a move
(model/networks/move_facts.py)."""

from __future__ import annotations

import chess

# The king is never captured in a game, so material counts it as nothing.
PIECE_VALUES: dict[chess.PieceType, int] = {
    chess.PAWN: 1,
    chess.KNIGHT: 3,
    chess.BISHOP: 3,
    chess.ROOK: 5,
    chess.QUEEN: 9,
    chess.KING: 0,
}
