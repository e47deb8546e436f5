"""Agents that choose moves: one Protocol for neural policies, Stockfish and a random mover.

Every agent is a context manager and closes its processes in `close()`, never in `__del__`.
An agent receives the whole `chess.Board`, move stack included, so it can see repetitions.
"""

from __future__ import annotations

import random
from typing import Protocol, runtime_checkable

import chess


@runtime_checkable
class Agent(Protocol):
    """Something that plays: a name for tables and PGN headers, and a move for a board."""

    name: str

    def choose_move(self, board: chess.Board) -> chess.Move: ...

    def close(self) -> None: ...


class AgentBase:
    """Context-manager plumbing shared by the concrete agents."""

    name: str = "agent"

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class RandomAgent(AgentBase):
    """Plays a uniformly random legal move; seeded, so games are reproducible."""

    def __init__(self, seed: int = 0, name: str = "random"):
        self.name = name
        self._rng = random.Random(seed)

    def choose_move(self, board: chess.Board) -> chess.Move:
        moves = list(board.legal_moves)
        if not moves:
            raise ValueError(f"no legal move in {board.fen()!r}")
        return self._rng.choice(moves)
