"""What every agent is: the Agent protocol, the context-manager plumbing they share, and the
legal moves a board must have for an agent to be asked about it."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import chess


@runtime_checkable
class Agent(Protocol):
    """Something that plays: a name for tables and PGN headers, and a move for a board."""

    name: str

    def choose_move(self, board: chess.Board) -> chess.Move: ...

    def new_game(self) -> None: ...

    def close(self) -> None: ...


class AgentBase:
    """Context-manager plumbing shared by the concrete agents."""

    name: str = "agent"

    def new_game(self) -> None:
        """Forget state carried between unrelated positions (e.g. an engine's hash table).

        Evaluations call it before each puzzle or test position so results do not depend on
        the order the positions come in.
        """

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def legal_moves(board: chess.Board) -> list[chess.Move]:
    moves = list(board.legal_moves)
    if not moves:
        raise ValueError(f"no legal move in {board.fen()!r}")
    return moves
