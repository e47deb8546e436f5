"""The trainer's evaluation on a split of one-search boards (`--mode search`: a best move and a
state value per board, every move valued only where there is one legal move): each metric says
how many boards it used, and none is printed as the split's on too few."""

from __future__ import annotations

import json
import pathlib

import chess
import chess.engine
import pytest

from core.actions import legal_actions
from core.engine_path import engine_id
from core.schema import make_board_row, shard_name, write_boards
from core.values import win_probability
from model import config as config_lib
from model.training.evaluator import format_eval
from model.training.train import train

# Boards with a single legal move (the white king must take the rook on b2): the only boards
# of a search split whose every move is valued.
FORCED = [f"{square}/8/8/8/8/8/1r6/K7 w - - 0 1" for square in ("k7", "1k6", "7k", "6k1")]


def search_rows(fens: list[str], engine_path: str) -> list[dict]:
    """Rows as `--mode search` writes them: one root search, its best move valued alone
    (partial unless it is the only legal move)."""
    name = engine_id(engine_path)
    rows = []
    with chess.engine.SimpleEngine.popen_uci(engine_path) as engine:
        for fen in fens:
            board = chess.Board(fen)
            info = engine.analyse(board, chess.engine.Limit(nodes=200))
            move = info["pv"][0].uci()
            score = info["score"].pov(board.turn)
            prob = win_probability(cp=score.score()) if score.mate() is None else (
                win_probability(mate=score.mate())
            )  # fmt: skip
            rows.append(
                make_board_row(
                    fen,
                    engine=name,
                    limit="search nodes=200 multipv=1",
                    moves=[move],
                    win_probs=[prob],
                    best_move=move,
                    state_win_prob=prob,
                    partial=len(legal_actions(board)) > 1,
                )
            )
    return rows


@pytest.fixture(scope="module")
def search_split(tmp_path_factory, stockfish, make_rows) -> pathlib.Path:
    root = tmp_path_factory.mktemp("search")
    write_boards(make_rows(64, seed=3), str(root / "train" / shard_name("boards", 0, 1)))
    fens = [r["fen"] for r in make_rows(40, seed=11)] + FORCED
    write_boards(search_rows(fens, stockfish), str(root / "test" / shard_name("boards", 0, 1)))
    return root


@pytest.mark.slow  # a training run: compiling the step takes most of it
def test_a_search_split_is_scored_by_its_best_move_and_value(search_split, tmp_path):
    config = config_lib.from_dict(
        {
            "model": {"num_layers": 1, "embedding_dim": 32, "num_heads": 2},
            "train": {"batch_size": 16, "num_steps": 2, "eval_boards": 500, "eval_batches": 1},
            "data": {"train": str(search_split / "train"), "test": str(search_split / "test")},
        }
    )
    logs: list[str] = []
    result = train(config, str(tmp_path), log=logs.append)
    (line,) = [x for x in logs if x.startswith("eval step 2")]
    # Only the four forced boards have every move valued, and one move ranks nothing.
    assert "action accuracy n/a (0 boards)" in line and "Kendall tau n/a (0 boards)" in line
    assert "action accuracy 1.000" not in line and "Kendall tau 1.000" not in line
    assert "best move 0." in line and "(40 boards)" in line  # the forced four left out
    assert "value error 0." in line and "(44 boards)" in line
    ev = result.last_eval
    assert ev["action_accuracy"] is None and ev["action_accuracy_boards"] == 0
    assert ev["best_move_agreement_boards"] == 40 and 0 <= ev["best_move_agreement"] <= 1
    assert ev["state_value_error_boards"] == 44 and 0 <= ev["state_value_error"] <= 1
    (record,) = [
        r for r in map(json.loads, open(tmp_path / "metrics.jsonl")) if r["kind"] == "eval"
    ]
    assert record["action_accuracy"] is None and record["kendall_tau_boards"] == 0
    assert record["best_move_agreement"] == ev["best_move_agreement"]
    assert record["eval_min_boards"] == 20


def test_a_metric_on_too_few_boards_is_not_the_splits():
    result = {
        "test_loss": 2.0,
        "test_accuracy": 0.5,
        "action_accuracy": None,
        "action_accuracy_boards": 3,
        "kendall_tau": 0.25,
        "kendall_tau_boards": 480,
        "best_move_agreement": 0.5,
        "best_move_agreement_boards": 1,
        "state_value_error": None,
        "state_value_error_boards": 0,
    }
    line = format_eval(result)
    assert "action accuracy n/a (3 boards)" in line
    assert "Kendall tau 0.250 (480 boards)" in line
    assert "best move 0.500 (1 board)" in line
    assert "value error n/a (0 boards)" in line
