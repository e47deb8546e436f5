"""pipeline/lichess_evals/lines.py: one line of the Lichess evaluation database -> one row,
or one failure with its reason."""

from __future__ import annotations

import json

import chess
import pytest

from core.actions import move_to_index
from core.schema import SOURCE_LICHESS_EVALS
from core.values import win_probability
from pipeline.lichess_evals.lines import ENGINE, BadLine, convert_line
from tests.pipeline.lichess_evals_files import (
    AFTER_E4,
    BAD_LINES,
    CASTLING,
    CHECKMATED,
    ONE_MOVE,
    START,
    TWO_MOVES,
    pv,
    random_positions,
    record,
)


def row(line: str) -> dict:
    return convert_line(line).row


def reason(line: str) -> str:
    with pytest.raises(BadLine) as caught:
        convert_line(line)
    return caught.value.reason


# --- the conversion of one line ---------------------------------------------------------------


def test_deepest_evaluation_wins_ties_to_more_knodes_then_first():
    evals = [
        {"pvs": [pv("e2e4", cp=1)], "knodes": 900, "depth": 20},
        {"pvs": [pv("d2d4", cp=2)], "knodes": 500, "depth": 36},
        {"pvs": [pv("c2c4", cp=3)], "knodes": 700, "depth": 36},
        {"pvs": [pv("g1f3", cp=4)], "knodes": 700, "depth": 36},
        {"pvs": [pv("b1c3", cp=5)], "knodes": 10**6, "depth": 30},
    ]
    got = row(json.dumps({"fen": START, "evals": evals}))
    assert got["moves"] == ["c2c4"] and got["cp"] == [3]
    assert got["limit"] == "depth=36,knodes=700"


def test_white_view_scores_become_the_side_to_moves():
    white = row(record(START, pv("e2e4 e7e5", cp=100)))
    assert white["cp"] == [100] and white["state_cp"] == 100 and white["state_mate"] is None
    assert white["win_probs"] == [win_probability(cp=100)] and white["state_win_prob"] > 0.5

    black = row(record(AFTER_E4, pv("e7e5 g1f3", cp=100)))
    assert black["cp"] == [-100] and black["state_cp"] == -100
    assert black["win_probs"] == [win_probability(cp=-100)] and black["state_win_prob"] < 0.5

    black_mates = row(record(AFTER_E4, pv("e7e5", mate=-3)))
    assert black_mates["mate"] == [3] and black_mates["cp"] == [None]
    assert black_mates["state_mate"] == 3 and black_mates["state_win_prob"] == 1.0
    black_mated = row(record(AFTER_E4, pv("e7e5", mate=2)))
    assert black_mated["mate"] == [-2] and black_mated["state_win_prob"] == 0.0
    white_mated = row(record(START, pv("e2e4", mate=-4)))
    assert white_mated["mate"] == [-4] and white_mated["state_win_prob"] == 0.0


def test_missing_clocks_get_the_defaults_and_given_ones_stay():
    assert row(record(START, pv("e2e4", cp=0)))["fen"] == START + " 0 1"
    assert row(record(START + " 7 42", pv("e2e4", cp=0)))["fen"] == START + " 7 42"


def test_fen_is_written_as_python_chess_writes_it():
    # An en passant square without a legal capture is dropped.
    got = row(record("4k3/8/8/8/4P3/8/8/4K2R b K e3", pv("e8d7", cp=0)))
    assert got["fen"] == "4k3/8/8/8/4P3/8/8/4K2R b K - 0 1"
    # Crazyhouse's promoted-piece mark: python-chess accepts it, board.fen() leaves it out.
    assert row(record("k7/8/8/8/8/8/8/KQ~6 w - -", pv("b1b8", cp=0)))["fen"] == (
        "k7/8/8/8/8/8/8/KQ6 w - - 0 1"
    )
    legal_ep = "rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6"
    assert row(record(legal_ep, pv("e5f6", cp=0)))["fen"] == legal_ep + " 0 1"
    for board in random_positions(200, seed=1):
        fen = board.fen(en_passant="fen")  # an en passant square after every double push
        first = next(iter(board.legal_moves)).uci()
        assert row(record(fen, pv(first, cp=0)))["fen"] == chess.Board(fen).fen()


def test_moves_are_legal_distinct_and_in_action_space_order():
    got = convert_line(
        record(
            START,
            pv("g1f3", cp=30),
            pv("e2e4", cp=25),
            pv("a2a3", cp=-10),
            pv("g1f3 d7d5", cp=0),  # the same first move again: the first PV's score stays
            pv("b1c3", cp=12),
        )
    )
    moves = got.row["moves"]
    assert moves == sorted(moves, key=move_to_index) and len(moves) == 4
    board = chess.Board(START + " 0 1")
    assert all(chess.Move.from_uci(m) in board.legal_moves for m in moves)
    scores = dict(zip(moves, got.row["cp"], strict=True))
    assert scores == {"g1f3": 30, "e2e4": 25, "a2a3": -10, "b1c3": 12}
    assert got.row["win_probs"] == [win_probability(cp=scores[m]) for m in moves]
    assert got.duplicate_pv_moves == 1


def test_castling_as_king_takes_rook_is_normalised():
    got = row(record(CASTLING, pv("e1h1 e8g8", cp=10), pv("e1a1", cp=5)))
    assert got["moves"] == sorted(["e1g1", "e1c1"], key=move_to_index)
    assert got["best_move"] == "e1g1"


def test_partial_unless_the_pvs_cover_every_legal_move():
    assert row(record(START, pv("e2e4", cp=20), pv("d2d4", cp=15)))["partial"] is True
    assert row(record(ONE_MOVE, pv("a1b2", cp=-50)))["partial"] is False
    assert row(record(TWO_MOVES, pv("a1b2", cp=0), pv("a1a2", cp=-20)))["partial"] is False
    # Two PVs, but both start with the same move: one of two legal moves is valued.
    assert row(record(TWO_MOVES, pv("a1b2", cp=0), pv("a1b2 g1g2", cp=-5)))["partial"] is True


def test_best_move_is_the_first_pv_unless_a_later_one_is_strictly_better():
    first = convert_line(record(START, pv("e2e4", cp=40), pv("d2d4", cp=40), pv("c2c4", cp=10)))
    assert first.row["best_move"] == "e2e4" and not first.best_pv_not_first
    # Black to move: white-view cp 50 is -50 for black, cp -30 is +30, so d7d5 is better.
    later = convert_line(record(AFTER_E4, pv("e7e5", cp=50), pv("d7d5", cp=-30)))
    assert later.row["best_move"] == "d7d5" and later.best_pv_not_first
    assert later.row["state_cp"] == 30 and later.row["state_mate"] is None
    assert later.row["state_win_prob"] == win_probability(cp=30) == max(later.row["win_probs"])
    mate = row(record(AFTER_E4, pv("e7e5", cp=-900), pv("g8f6", mate=-1)))
    assert mate["best_move"] == "g8f6" and mate["state_mate"] == 1 and mate["state_cp"] is None


def test_row_provenance():
    got = row(record(START, pv("e2e4", cp=20), depth=41, knodes=123456))
    assert got["source"] == SOURCE_LICHESS_EVALS and got["engine"] == ENGINE
    assert got["limit"] == "depth=41,knodes=123456" and got["count"] == 1


@pytest.mark.parametrize("expected", sorted(BAD_LINES))
def test_each_kind_of_bad_line_is_recognised(expected):
    assert reason(BAD_LINES[expected]) == expected


def test_more_bad_lines():
    assert reason("") == "not_json"
    assert reason(b"\xff\xfe") == "not_json"
    assert reason("[1, 2]") == "bad_record"
    assert reason(json.dumps({"fen": START, "evals": [{"pvs": [], "depth": 3}]})) == "bad_record"
    assert reason(record(START, pv("", cp=0))) == "illegal_move"
    assert reason(record(START, pv("e2e4", cp=1.5))) == "bad_score"
    assert reason(record(START, pv("e2e4", cp=2**31))) == "bad_score"
    assert reason(record(AFTER_E4, pv("e7e5", cp=-(2**31)))) == "bad_score"  # negated: 2**31
    assert row(record(AFTER_E4, pv("e7e5", cp=2**31 - 1)))["cp"] == [-(2**31) + 1]
    assert reason(record(START, pv("e2e4", mate=0))) == "bad_score"  # mated, yet it has moves
    assert reason(record(CHECKMATED, pv("", mate=0))) == "no_legal_moves"
