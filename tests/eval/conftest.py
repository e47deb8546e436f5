"""Helpers for the eval tests: a scripted agent (protocol tests), positions made by moves,
and (session fixtures) Stockfish-annotated boards and a small model trained on them."""

from __future__ import annotations

import pathlib
import random

import chess
import pytest

from core.schema import BOARDS_PREFIX, shard_name, write_boards
from eval.engines import AgentBase, EngineSettings, StockfishOracleAgent

ROOT = pathlib.Path(__file__).resolve().parents[2]


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


def random_positions(num: int, seed: int) -> list[tuple[str, int]]:
    """(FEN, times seen) of distinct non-terminal positions from seeded random games."""
    rng = random.Random(seed)
    counts: dict[str, int] = {}
    while len(counts) < num:
        board = chess.Board()
        for _ in range(rng.randint(4, 60)):
            moves = list(board.legal_moves)
            if not moves:
                break
            counts[board.fen()] = counts.get(board.fen(), 0) + 1
            board.push(rng.choice(moves))
    return list(counts.items())[:num]


def annotated_rows(positions, oracle: StockfishOracleAgent) -> list[dict]:
    """Rows of core.schema, every legal move valued by the real Stockfish (the oracle's
    one-root-move searches, as the pipeline annotates)."""
    rows = []
    for fen, count in positions:
        values = oracle.move_values(chess.Board(fen))
        best = max(values, key=lambda v: v.score)
        rows.append(
            {
                "fen": fen,
                "count": count,
                "moves": [v.move.uci() for v in values],
                "win_probs": [v.win_prob for v in values],
                "cp": [v.score.score() for v in values],
                "mate": [v.score.mate() for v in values],
                "best_move": best.move.uci(),
                "state_win_prob": best.win_prob,
                "state_cp": best.score.score(),
                "state_mate": best.score.mate(),
                "engine": "stockfish",
                "limit": oracle.settings.describe(),
            }
        )
    return rows


@pytest.fixture(scope="session")
def annotated(tmp_path_factory, stockfish) -> pathlib.Path:
    """A directory with train/ and test/ annotated-board Parquet made here with Stockfish."""
    root = tmp_path_factory.mktemp("annotated")
    with StockfishOracleAgent(EngineSettings(path=stockfish, nodes=200)) as oracle:
        for split, num, seed in (("train", 60, 1), ("test", 20, 2)):
            rows = annotated_rows(random_positions(num, seed), oracle)
            write_boards(rows, str(root / split / shard_name(BOARDS_PREFIX, 0, 1)))
    return root


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, annotated) -> pathlib.Path:
    """A small AV model trained here by model.train for 80 steps (real JAX, real data)."""
    from model.train import main as train_main

    run = tmp_path_factory.mktemp("run")
    # Two layers, a high learning rate and no periodic evaluation keep this to seconds of
    # training after the compile; enough to bring the test loss below uniform.
    argv = [
        "--config", str(ROOT / "model" / "configs" / "small.toml"),
        "--data", str(annotated / "train"), "--out", str(run),
        "--steps", "80", "--batch-size", "32",
        "--set", 'data.test=""', "--set", "model.num_layers=2",
        "--set", "train.learning_rate=2e-3", "--set", "train.checkpoint_every=80",
        "--set", "train.log_every=40",
    ]  # fmt: skip
    assert train_main(argv) == 0
    return run
