"""The UCI client and the board annotator against the real Stockfish (and, for retry logic
only, engines that fail on purpose)."""

from __future__ import annotations

import os
import signal
import stat
import sys
import textwrap
import threading

import chess
import pytest

from core.actions import legal_actions
from core.engine_settings import EngineLimit, EngineOptions
from pipeline.labels.action_values import (
    AnnotationFailed,
    BoardAnnotator,
    NoLegalMoves,
    best_index,
    board_moves,
)
from pipeline.labels.uci_client import (
    EngineDied,
    EngineProtocolError,
    EngineTimeout,
    MoveSearch,
    Score,
    UciEngine,
)

ITALIAN = "r1bqk1nr/pppp1ppp/2n5/2b1p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4"
MIDDLEGAME = "r2q1rk1/pp2bppp/2n1pn2/3p4/3P4/2NBPN2/PP3PPP/R2Q1RK1 w - - 0 10"
ENDGAME = "8/5pk1/6p1/8/3R4/6P1/5PKP/r7 b - - 0 40"
BACK_RANK_MATE = "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1"  # Ra8# mates at once
MATED = "R5k1/5ppp/8/8/8/8/5PPP/6K1 b - - 1 1"


def test_limits_parse_and_refuse_nonsense():
    assert EngineLimit.parse("nodes=2000") == EngineLimit(nodes=2000)
    assert str(EngineLimit.parse("nodes=2000")) == "nodes=2000"
    assert EngineLimit.parse("time=0.05").go_args == "movetime 50"
    assert str(EngineLimit.parse("time=0.05")) == "time=0.05"
    for bad in ("nodes", "nodes=0", "nodes=1.5", "depth=3", "time=-1", "time=abc"):
        with pytest.raises(ValueError, match="limit"):
            EngineLimit.parse(bad)


def test_scores_order_mates_around_centipawns_and_map_to_win_probabilities():
    ordered = [Score(mate=0), Score(mate=-1), Score(mate=-5), Score(cp=-300), Score(cp=0),
               Score(cp=250), Score(mate=7), Score(mate=1)]  # fmt: skip
    assert sorted(ordered, key=Score.rank_key) == ordered
    assert [s.win_prob for s in (Score(mate=0), Score(mate=-3), Score(mate=2))] == [0, 0, 1]
    assert Score(cp=0).win_prob == 0.5


def test_ties_go_to_the_first_move_in_action_order():
    searches = [MoveSearch("a", Score(cp=5), 1), MoveSearch("b", Score(cp=9), 1),
                MoveSearch("c", Score(cp=9), 1)]  # fmt: skip
    assert best_index(searches) == 1


def test_each_move_is_searched_alone_and_scored_from_the_movers_view(stockfish):
    moves = legal_actions(chess.Board(BACK_RANK_MATE))
    with UciEngine(stockfish) as engine:
        assert engine.name.startswith("Stockfish")
        results = engine.search_moves(BACK_RANK_MATE, moves, EngineLimit.parse("nodes=300"))
    assert [r.move for r in results] == moves
    by_move = {r.move: r for r in results}
    assert by_move["a1a8"].score == Score(mate=1)
    assert all(r.score.mate is None for m, r in by_move.items() if m != "a1a8")
    # A search stops early once it proves mate; the others use their whole budget.
    assert all(r.nodes >= 300 for m, r in by_move.items() if m != "a1a8")


def test_node_limited_values_do_not_depend_on_what_the_engine_searched_before(stockfish):
    limit = EngineLimit.parse("nodes=500")
    with UciEngine(stockfish) as fresh:
        alone = fresh.search_moves(ENDGAME, board_moves(ENDGAME), limit)
    with UciEngine(stockfish) as busy:
        for fen in (ITALIAN, MIDDLEGAME):
            busy.search_moves(fen, board_moves(fen), limit)
        after_others = busy.search_moves(ENDGAME, board_moves(ENDGAME), limit)
    assert after_others == alone


def test_time_limited_searches_run_one_at_a_time_for_their_full_time(stockfish):
    moves = board_moves(ITALIAN)[:3]
    with UciEngine(stockfish) as engine:
        results = engine.search_moves(ITALIAN, moves, EngineLimit.parse("time=0.05"))
    assert [r.move for r in results] == moves
    # Queued `go movetime` commands would start with their clock already run down.
    assert all(r.nodes > 2000 for r in results)


def test_an_illegal_restriction_is_a_protocol_error_not_a_wrong_value(stockfish):
    with UciEngine(stockfish) as engine, pytest.raises(EngineProtocolError, match="e2e5"):
        engine.search_moves(ITALIAN, ["e2e5"], EngineLimit.parse("nodes=100"))


def test_a_board_without_legal_moves_is_refused_before_any_search():
    with pytest.raises(NoLegalMoves):
        board_moves(MATED)
    with pytest.raises(ValueError, match="Chess960"):
        board_moves("bbqnnrkr/pppppppp/8/8/8/8/PPPPPPPP/BBQNNRKR w HFhf - 0 1")


def _after(seconds: float, action) -> threading.Timer:
    timer = threading.Timer(seconds, action)
    timer.start()
    return timer


def test_a_killed_engine_is_restarted_and_the_board_retried_to_the_same_values(stockfish):
    limit = EngineLimit.parse("nodes=5000")  # a board takes ~0.3 s: long enough to be killed in
    annotator = BoardAnnotator(lambda: UciEngine(stockfish), limit)
    reference = BoardAnnotator(lambda: UciEngine(stockfish), limit).annotate(MIDDLEGAME)
    first_pid = annotator.engine.pid
    timer = _after(0.05, lambda: os.kill(first_pid, signal.SIGKILL))
    row = annotator.annotate(MIDDLEGAME)
    timer.join()
    assert annotator.restarts == 1 and len(annotator.engine_pids) == 2
    assert row == reference
    annotator.close()


def test_a_hung_engine_is_killed_by_the_watchdog_and_replaced(stockfish):
    limit = EngineLimit.parse("nodes=5000")
    annotator = BoardAnnotator(lambda: UciEngine(stockfish, timeout=1.0), limit)
    first_pid = annotator.engine.pid
    timer = _after(0.05, lambda: os.kill(first_pid, signal.SIGSTOP))
    row = annotator.annotate(MIDDLEGAME)
    timer.join()
    assert annotator.restarts == 1 and annotator.engine.pid != first_pid
    assert row["moves"] == board_moves(MIDDLEGAME)
    annotator.close()
    with pytest.raises(ProcessLookupError):  # the hung process is gone, not left stopped
        os.kill(first_pid, 0)


def _fake_engine(tmp_path, body: str) -> str:
    """A script speaking just enough UCI to start, then failing as `body` says."""
    path = tmp_path / "fake_engine.py"
    path.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent(
            """
            import sys, time
            for line in sys.stdin:
                if line.startswith("uci"):
                    print("id name FakeFish\\nuciok", flush=True)
                elif line.startswith("isready"):
                    print("readyok", flush=True)
                elif line.startswith("go"):
            """
        )
        + textwrap.indent(textwrap.dedent(body), " " * 8)
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_a_board_that_keeps_failing_raises_with_the_last_error(tmp_path):
    crasher = _fake_engine(tmp_path, "sys.exit(3)")
    annotator = BoardAnnotator(lambda: UciEngine(crasher), EngineLimit.parse("nodes=10"), retries=2)
    with pytest.raises(AnnotationFailed, match=r"3 attempts failed; last: EngineDied.*code 3"):
        annotator.annotate(ITALIAN)
    assert annotator.restarts == 3 and len(annotator.engine_pids) == 3


def test_an_engine_that_answers_garbage_is_a_protocol_error(tmp_path):
    liar = _fake_engine(tmp_path, 'print("bestmove a1a1", flush=True)')
    with UciEngine(liar) as engine, pytest.raises(EngineProtocolError, match="no score"):
        engine.search_moves(ITALIAN, ["e1g1"], EngineLimit.parse("nodes=10"))


def test_an_engine_that_cannot_start_is_a_clear_error(tmp_path):
    with pytest.raises(EngineDied, match="cannot start"):
        UciEngine(str(tmp_path / "no-such-engine"))
    with pytest.raises(EngineTimeout):
        silent = _fake_engine(tmp_path, "pass")
        engine = UciEngine(silent, timeout=0.5)
        engine.search_moves(ITALIAN, ["e1g1"], EngineLimit.parse("nodes=10"))


def test_boards_queued_behind_each_other_get_the_values_they_get_alone(stockfish):
    limit = EngineLimit.parse("nodes=400")
    alone = [BoardAnnotator(lambda: UciEngine(stockfish), limit).annotate(f)
             for f in (ITALIAN, MIDDLEGAME, ENDGAME)]  # fmt: skip
    annotator = BoardAnnotator(lambda: UciEngine(stockfish), limit)
    for fen in (ITALIAN, MIDDLEGAME, ENDGAME):
        annotator.submit(fen)
    assert annotator.in_flight == 3
    outcomes = [annotator.collect() for _ in range(3)]
    assert [o.row for o in outcomes] == alone
    annotator.close()


def test_a_kill_with_boards_queued_retries_each_of_them(stockfish):
    limit = EngineLimit.parse("nodes=5000")
    fens = (MIDDLEGAME, ITALIAN, ENDGAME)
    reference = BoardAnnotator(lambda: UciEngine(stockfish), limit)
    expected = [reference.annotate(f) for f in fens]
    reference.close()
    annotator = BoardAnnotator(lambda: UciEngine(stockfish), limit)
    first_pid = annotator.start().pid
    for fen in fens:
        annotator.submit(fen)
    timer = _after(0.05, lambda: os.kill(first_pid, signal.SIGKILL))
    outcomes = [annotator.collect() for _ in fens]
    timer.join()
    assert [o.row for o in outcomes] == expected and annotator.restarts == 1
    annotator.close()


def test_the_engine_record_sets_every_option_it_names_before_the_first_search(tmp_path):
    """A recording script, not Stockfish: what matters is what the client sends."""
    sent = tmp_path / "sent.txt"
    path = tmp_path / "recorder.py"
    path.write_text(
        f"#!{sys.executable}\n"
        + textwrap.dedent(
            f"""
            import sys
            for line in sys.stdin:
                with open({str(sent)!r}, "a") as out:
                    out.write(line)
                if line.startswith("uci"):
                    print("id name Recorder\\nuciok", flush=True)
                elif line.startswith("isready"):
                    print("readyok", flush=True)
                elif line.startswith("quit"):
                    break
            """
        )
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    options = EngineOptions(str(path), threads=2, hash_mb=32, elo=1500, extra_options={"Foo": 1})
    with UciEngine(options) as engine:
        assert engine.name == "Recorder"
    lines = sent.read_text().splitlines()
    assert lines.index("isready") > max(i for i, s in enumerate(lines) if "setoption" in s)
    assert {s for s in lines if s.startswith("setoption")} == {
        "setoption name Threads value 2",
        "setoption name Hash value 32",
        "setoption name UCI_LimitStrength value true",
        "setoption name UCI_Elo value 1500",
        "setoption name Foo value 1",
        "setoption name MultiPV value 1",
    }
