"""bench/policy_averaging.py: arms of averaged BC policies, on the shipped models and the
bundled puzzles."""

from __future__ import annotations

import json

import chess
import pytest

from bench.policy_averaging import (
    AveragedPolicy,
    Item,
    log_probabilities,
    main,
    mirror_move,
    parse_arm,
)
from core.eval_sets import read_puzzles
from eval.agents.players import make_agent
from eval.puzzles import evaluate
from tests.conftest import ROOT, SAMPLE
from tests.pipeline.lichess_evals_files import random_positions

TRANSFORMER = str(ROOT / "models" / "cpu-transformer")
PUZZLES = str(SAMPLE / "puzzles.csv")


def _boards_without_castling(count: int, seed: int = 0) -> list[chess.Board]:
    boards = [b for b in random_positions(20 * count, seed) if not b.castling_rights]
    assert len(boards) >= count, "too few random boards without castling rights"
    return boards[:count]


def test_mirrored_moves_are_the_mirrored_boards_legal_moves():
    for board in _boards_without_castling(40):
        mirrored = board.transform(chess.flip_horizontal)
        assert {mirror_move(m) for m in board.legal_moves} == set(mirrored.legal_moves)
        for move in board.legal_moves:
            assert mirror_move(mirror_move(move)) == move


def test_parse_arm():
    assert parse_arm("pair=a+mirror:b@0.5") == (
        "pair",
        [Item("a", 1.0, False), Item("b", 0.5, True)],
    )
    for bad in ("a", "=a", "x=", "x=a@zero", "x=a@0", "x=a@-1", "x=@2", "x=a@nan"):
        with pytest.raises(ValueError, match="arm"):
            parse_arm(bad)


def test_one_item_plays_as_the_neural_agent_and_a_scaled_copy_changes_nothing():
    puzzles, _ = read_puzzles(PUZZLES, 25)
    alone = evaluate(make_agent(f"neural:{TRANSFORMER}"), puzzles, show_progress=False)
    one = evaluate(AveragedPolicy("one", [Item(TRANSFORMER)]), puzzles, show_progress=False)
    twice = evaluate(
        AveragedPolicy("twice", [Item(TRANSFORMER), Item(TRANSFORMER, 2.0)]),
        puzzles,
        show_progress=False,
    )
    moves = [[r["played"] for r in run["puzzles"]] for run in (alone, one, twice)]
    assert moves[0] == moves[1] == moves[2]
    assert alone["solved"] > 0


def test_mirror_reads_every_legal_move_once_and_only_without_castling():
    agent = AveragedPolicy("m", [Item(TRANSFORMER, mirror=True)])
    [predictor] = agent.predictors
    for board in _boards_without_castling(5, seed=1):
        plain = log_probabilities(predictor, board, mirror=False)
        both = log_probabilities(predictor, board, mirror=True)
        assert set(both) == set(plain) == set(board.legal_moves)
        assert all(v <= 0 for v in both.values())
        assert both != plain  # the network is not symmetric: the mirror's reading counts
    start = chess.Board()  # castling rights left: the mirror is not the same game
    assert log_probabilities(predictor, start, True) == log_probabilities(predictor, start, False)


def test_cli_prints_json_and_refuses_a_value_model_in_one_line(capsys):
    assert main(["--puzzles", PUZZLES, "--num", "5", "--arm", f"t={TRANSFORMER}"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["num"] == 5 and document["arms"]["t"]["total"] == 5
    assert main(["--puzzles", PUZZLES, "--arm", f"av={ROOT / 'models' / 'cpu-av'}"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "only BC policies" in err[0]
    assert main(["--puzzles", PUZZLES, "--arm", "bad"]) == 1
    assert "NAME=ITEM" in capsys.readouterr().err
