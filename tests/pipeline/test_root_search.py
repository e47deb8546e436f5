"""One unrestricted search per board (the cheap annotation mode and self-play's moves), against
the real Stockfish."""

from __future__ import annotations

import os
import signal
import threading

import chess
import pytest

from core.actions import legal_actions
from core.engine_settings import EngineLimit
from core.schema import read_boards, write_boards
from pipeline.labels.action_values import BoardAnnotator, limit_label, search_row
from pipeline.labels.uci_client import (
    EngineProtocolError,
    PvLine,
    RootSearch,
    Score,
    UciEngine,
)

BACK_RANK_MATE = "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1"  # Ra8# mates at once
ITALIAN = "r1bqk1nr/pppp1ppp/2n5/2b1p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4"
MIDDLEGAME = "r2q1rk1/pp2bppp/2n1pn2/3p4/3P4/2NBPN2/PP3PPP/R2Q1RK1 w - - 0 10"
FEW_MOVES = "7k/8/8/8/8/8/7P/7K w - - 0 1"  # four legal moves


def test_a_root_search_reports_its_best_lines_best_first(stockfish):
    legal = legal_actions(chess.Board(BACK_RANK_MATE))
    with UciEngine(stockfish) as engine:
        one = engine.search(BACK_RANK_MATE, EngineLimit.parse("nodes=3000"))
        engine.set_multipv(3)
        three = engine.search(BACK_RANK_MATE, EngineLimit.parse("nodes=3000"))
    assert one.lines == (PvLine("a1a8", Score(mate=1)),) and one.best_move == "a1a8"
    assert three.lines[0] == one.lines[0] and three.best_move == "a1a8"
    assert len(three.lines) == 3 and len({line.move for line in three.lines}) == 3
    assert all(line.move in legal for line in three.lines)
    assert all(line.score.mate is None for line in three.lines[1:])
    assert 0 < three.nodes


def test_multipv_beyond_the_legal_moves_reports_each_move_once(stockfish):
    legal = legal_actions(chess.Board(FEW_MOVES))
    with UciEngine(stockfish) as engine:
        engine.set_multipv(5)
        search = engine.search(FEW_MOVES, EngineLimit.parse("nodes=2000"))
    assert sorted(line.move for line in search.lines) == sorted(legal)
    assert len(legal) == 4


def test_queued_root_searches_get_what_they_get_alone(stockfish):
    limit = EngineLimit.parse("nodes=2000")
    alone = []
    for fen in (ITALIAN, MIDDLEGAME, BACK_RANK_MATE):
        with UciEngine(stockfish) as engine:
            engine.set_multipv(2)
            alone.append(engine.search(fen, limit))
    with UciEngine(stockfish) as engine:
        engine.set_multipv(2)
        for fen in (ITALIAN, MIDDLEGAME, BACK_RANK_MATE):
            engine.submit_root(fen, limit)
        with pytest.raises(RuntimeError, match="collect_root"):
            engine.collect()
        assert [engine.collect_root() for _ in range(3)] == alone
        with pytest.raises(RuntimeError, match="queued"):
            engine.submit_root(ITALIAN, limit)
            engine.set_multipv(3)


def test_the_moves_played_are_the_position_and_a_game_keeps_its_hash(stockfish):
    with UciEngine(stockfish) as engine:
        first = engine.search(chess.STARTING_FEN, EngineLimit.parse("nodes=500"), ["f2f3"])
        mate = engine.search(
            chess.STARTING_FEN,
            EngineLimit.parse("nodes=500"),
            ["f2f3", "e7e5", "g2g4"],
            new_game=False,
        )
        timed = engine.search(ITALIAN, EngineLimit.parse("time=0.05"))
    assert first.best_move in legal_actions(_after(["f2f3"]))  # Black's move, not White's
    assert mate.lines[0] == PvLine("d8h4", Score(mate=1))
    assert timed.nodes > 2000  # sent when collected: the clock was not running while queued


def _after(moves: list[str]) -> chess.Board:
    board = chess.Board()
    for uci in moves:
        board.push_uci(uci)
    return board


def test_search_rows_hold_the_lines_in_action_order_and_say_what_they_are(stockfish, tmp_path):
    limit = EngineLimit.parse("nodes=2000")
    annotator = BoardAnnotator(lambda: UciEngine(stockfish), limit, mode="search", multipv=3)
    row = annotator.annotate(BACK_RANK_MATE, count=2)
    full = BoardAnnotator(lambda: UciEngine(stockfish), limit, mode="search", multipv=9)
    whole = full.annotate(FEW_MOVES)
    annotator.close()
    full.close()
    order = legal_actions(chess.Board(BACK_RANK_MATE))
    assert len(row["moves"]) == 3 and row["moves"] == sorted(row["moves"], key=order.index)
    assert (row["best_move"], row["state_mate"], row["state_win_prob"]) == ("a1a8", 1, 1.0)
    assert row["win_probs"][row["moves"].index("a1a8")] == 1.0
    assert row["partial"] and row["count"] == 2
    assert row["limit"] == "search:nodes=2000,multipv=3" == limit_label(limit, "search", 3)
    assert not whole["partial"] and whole["moves"] == legal_actions(chess.Board(FEW_MOVES))
    assert whole["limit"] == "search:nodes=2000,multipv=9"
    write_boards([row, whole], str(tmp_path / "boards.parquet"))
    assert read_boards(str(tmp_path / "boards.parquet")).to_pylist() == [row, whole]


def test_a_restarted_engine_keeps_the_search_mode(stockfish):
    limit = EngineLimit.parse("nodes=150000")
    fens = (MIDDLEGAME, ITALIAN, BACK_RANK_MATE)
    reference = BoardAnnotator(lambda: UciEngine(stockfish), limit, mode="search", multipv=2)
    expected = [reference.annotate(fen) for fen in fens]
    reference.close()
    annotator = BoardAnnotator(lambda: UciEngine(stockfish), limit, mode="search", multipv=2)
    pid = annotator.start().pid
    for fen in fens:
        annotator.submit(fen)
    timer = threading.Timer(0.05, lambda: os.kill(pid, signal.SIGKILL))
    timer.start()
    outcomes = [annotator.collect() for _ in fens]
    timer.join()
    annotator.close()
    assert [o.row for o in outcomes] == expected and annotator.restarts == 1


def test_search_rows_refuse_lines_that_are_not_legal_moves():
    legal = legal_actions(chess.Board(BACK_RANK_MATE))
    tied = RootSearch((PvLine("g1f1", Score(cp=30)), PvLine("a1a2", Score(cp=30))), "g1f1", 9)
    row = search_row(BACK_RANK_MATE, 1, legal, tied, "sf", "search:nodes=9,multipv=2")
    assert row["moves"] == ["a1a2", "g1f1"]  # action-space order
    assert row["best_move"] == "g1f1"  # equal scores: the engine's first line
    illegal = RootSearch((PvLine("e2e4", Score(cp=30)),), "e2e4", 9)
    with pytest.raises(EngineProtocolError, match="e2e4"):
        search_row(BACK_RANK_MATE, 1, legal, illegal, "sf", "x")
    twice = RootSearch((PvLine("g1f1", Score(cp=3)), PvLine("g1f1", Score(cp=2))), "g1f1", 9)
    with pytest.raises(EngineProtocolError, match="twice"):
        search_row(BACK_RANK_MATE, 1, legal, twice, "sf", "x")
    with pytest.raises(ValueError, match="multipv is for the search mode"):
        BoardAnnotator(lambda: None, EngineLimit.parse("nodes=9"), multipv=3)
    with pytest.raises(ValueError, match="mode must be one of"):
        BoardAnnotator(lambda: None, EngineLimit.parse("nodes=9"), mode="fast")
