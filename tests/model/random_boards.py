"""Boards of seeded random games, for the tests that hold a fast reading of the bitboards to
playing the moves (the move facts)."""

from __future__ import annotations

from collections.abc import Iterator

import chess
import numpy as np


def random_boards(seed: int, count: int, plies: tuple[int, int]) -> Iterator[chess.Board]:
    """`count` boards, each after a random game of `plies` (low inclusive, high exclusive)
    random legal moves, cut short where the game ends."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        board = chess.Board()
        for _ in range(int(rng.integers(*plies))):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(moves[int(rng.integers(len(moves)))])
        yield board
