"""A position as a key: a FEN without its move counters.

    position_key("8/8/8/8/8/8/8/K6k w - - 12 40") -> "8/8/8/8/8/8/8/K6k w - -"

The board, the side to move, castling rights and the en-passant square, as python-chess
writes them. Two boards that differ only in their clocks are one position, so the pipeline's
exclusion of evaluation positions and the jobs' held-out checks agree on what "the same
position" is.
"""

from __future__ import annotations


def position_key(fen: str) -> str:
    """A FEN without its halfmove clock and move number."""
    return " ".join(fen.split()[:4])
