"""The UCI `go` command read leniently, and the time budget with Move Overhead kept back."""

from __future__ import annotations

import chess
import pytest

from eval.uci.go import MOVES_TO_GO_DEFAULT, GoParams, parse_go, time_budget


def test_every_parameter_is_read():
    go, errors = parse_go(
        "ponder wtime 60000 btime 50000 winc 1000 binc 900 movestogo 12 depth 3 nodes 99 "
        "mate 2 movetime 500 infinite searchmoves e2e4 d2d4".split()
    )
    assert errors == []
    assert go == GoParams(
        wtime=60000,
        btime=50000,
        winc=1000,
        binc=900,
        movestogo=12,
        movetime=500,
        depth=3,
        nodes=99,
        mate=2,
        infinite=True,
        ponder=True,
        searchmoves=("e2e4", "d2d4"),
    )
    # searchmoves ends at the next parameter.
    go, _ = parse_go("searchmoves a2a3 wtime 100".split())
    assert go.searchmoves == ("a2a3",) and go.wtime == 100


@pytest.mark.parametrize(
    "args, expected, message",
    [
        ("wtime abc btime 100", GoParams(btime=100), "go wtime needs an integer, got 'abc'"),
        ("wtime", GoParams(), "go wtime needs an integer, got None"),
        ("wtime btime 5", GoParams(btime=5), "go wtime needs an integer, got 'btime'"),
        ("depth 1.5 nodes 7", GoParams(nodes=7), "go depth needs an integer, got '1.5'"),
        ("sideways movetime 10", GoParams(movetime=10), "unknown parameter 'sideways'"),
    ],
)
def test_a_bad_parameter_is_reported_and_the_rest_is_kept(args, expected, message):
    go, errors = parse_go(args.split())
    assert go == expected
    assert len(errors) == 1 and message in errors[0]


def test_time_budget_keeps_the_move_overhead_back():
    white, black = chess.WHITE, chess.BLACK
    assert time_budget(GoParams(movetime=1000), white, 100) == pytest.approx(0.9)
    clock = GoParams(wtime=31_000, btime=10_000, winc=2000, binc=0)
    assert time_budget(clock, white, 1000) == pytest.approx(
        (30_000 / MOVES_TO_GO_DEFAULT + 1500) / 1000
    )
    assert time_budget(clock, black, 100) == pytest.approx(9.9 / MOVES_TO_GO_DEFAULT)
    # movestogo spreads the clock over fewer moves, but never more than half of it.
    assert time_budget(GoParams(wtime=10_100, movestogo=4), white, 100) == pytest.approx(2.5)
    assert time_budget(GoParams(wtime=10_100, movestogo=1), white, 100) == pytest.approx(5.0)
    # An overhead larger than the clock still leaves a move due at once.
    assert time_budget(GoParams(wtime=50), white, 100) == 0.001
    assert time_budget(GoParams(movetime=50), white, 100) == 0.001
    # No clock: no limit.
    for go in (
        GoParams(),
        GoParams(depth=5),
        GoParams(infinite=True, wtime=9),
        GoParams(ponder=True),
    ):
        assert time_budget(go, white, 10) is None
