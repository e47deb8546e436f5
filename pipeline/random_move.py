"""Boards after a random move: the positions a mistake leaves, where the move to find punishes
it (as in a Lichess puzzle, which starts after the blunder of a real game).

Real games are mostly quiet, well played positions; a model that learns only from them rarely
sees a piece left hanging or a mate allowed. `annotate --random-move RATE` replaces RATE of a
run's boards by the board after one random legal move from them, so that the engine's label
is the punishment. Which boards and which move are decided by a hash of the board and the
seed: the same on every run and every runner.
"""

from __future__ import annotations

import chess

from pipeline.pgn import hash_point


def _uniform(fen: str, seed: int, salt: str) -> float:
    return hash_point(f"{salt}:{seed}:{fen}")


def chosen(fen: str, rate: float, seed: int = 0) -> bool:
    """Whether this board is one of the RATE share replaced (exactly all at 1, none at 0)."""
    return _uniform(fen, seed, "board") < rate


def after_random_move(fen: str, seed: int = 0) -> str | None:
    """The FEN after a legal move of `fen` chosen by hash (its clocks advanced as the rules
    say), or None when no move leaves a board with a move to find: no legal move, or every
    move ends the game (mate, stalemate, insufficient material)."""
    board = chess.Board(fen)
    moves = sorted(board.legal_moves, key=chess.Move.uci)  # python-chess's order is not a rule
    if not moves:
        return None
    first = int(_uniform(fen, seed, "move") * len(moves))
    for offset in range(len(moves)):
        board.push(moves[(first + offset) % len(moves)])
        if not board.is_game_over(claim_draw=False):
            return board.fen()
        board.pop()
    return None


def replace(fen: str, rate: float, seed: int = 0) -> str:
    """`fen`, or for the RATE share chosen the board after its random move (when it has one)."""
    if rate <= 0 or not chosen(fen, rate, seed):
        return fen
    return after_random_move(fen, seed) or fen
