"""Helpers for the eval tests: a scripted agent (protocol tests) and positions made by moves."""

from __future__ import annotations

import chess
import pytest

from eval.engines import AgentBase


class ScriptedAgent(AgentBase):
    """Plays `script[board.fen()]` (UCI), whatever that move is, legal or not."""

    def __init__(self, script: dict[str, str], name: str = "scripted"):
        self.script = script
        self.name = name
        self.new_games = 0

    def new_game(self) -> None:
        self.new_games += 1

    def choose_move(self, board: chess.Board) -> chess.Move:
        return chess.Move.from_uci(self.script[board.fen()])


def position_after(fen: str, moves: str) -> str:
    """The FEN after playing the space-separated UCI `moves` from `fen`."""
    board = chess.Board(fen)
    for uci in moves.split():
        board.push_uci(uci)
    return board.fen()


@pytest.fixture
def scripted():
    """The ScriptedAgent class and the position_after helper."""
    return ScriptedAgent, position_after
