"""The searching UCI engine (models/cpu with its own value head, in this process) and the `go`
limits and commands a GUI sends besides the clocks: `setoption` during `go infinite` (applied
once the search ends, as Stockfish does), `go depth N` (a playout budget, 4^N) and `go mate N`
(ends at a mate found)."""

from __future__ import annotations

import re

import pytest

from eval.uci.choosers import DEPTH_BASE, PolicyChooser, SearchChooser
from tests.eval.uci_inprocess import engine_in_process

MIDDLEGAME = "r1bqkb1r/pppp1ppp/2n2n2/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4"
MATE_IN_ONE = "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1"
CAP = 5000  # Simulations: what a `go` without a budget of its own would search


@pytest.fixture(scope="module")
def engine():
    yield from engine_in_process(simulations=CAP)


def nodes_of(info: str) -> int:
    return int(re.search(r" nodes (\d+) ", info)[1])


def go(engine, fen: str, command: str) -> list[str]:
    server, out = engine
    while not out.lines.empty():  # what an earlier test left
        out.lines.get()
    server.handle("ucinewgame")
    server.handle(f"position fen {fen}")
    server.handle(command)
    return out.until_bestmove()


def test_setoption_during_go_infinite_waits_for_the_search_to_end(engine):
    server, out = engine
    server.handle("ucinewgame")
    server.handle(f"position fen {MIDDLEGAME}")
    server.handle("go infinite")
    first = out.lines.get(timeout=60)  # a second into the search, its first info line
    assert first.startswith("info depth"), first
    try:
        server.handle("setoption name Simulations value 0")
        server.handle("setoption name Seed value -1")  # rejected, when it is applied
        server.handle("isready")  # answered at once by a searching engine
        before_stop = []
        while not before_stop or before_stop[-1] != "readyok":
            before_stop.append(out.lines.get(timeout=60))
        assert not any(line.startswith("bestmove") for line in before_stop), before_stop
        assert isinstance(server.chooser(), SearchChooser)  # still the one searching
        server.handle("stop")
        lines = out.until_bestmove()
        assert nodes_of(lines[-2]) >= nodes_of(first) > 0, lines
        # Once the search ended, the options were set: the policy plays, the bad Seed refused.
        errors = []
        while not out.lines.empty():
            errors.append(out.lines.get())
        assert len(errors) == 1 and "Seed must lie in" in errors[0], errors
        assert server.options.simulations == 0 and isinstance(server.chooser(), PolicyChooser)
    finally:
        server.handle("stop")
        server.handle(f"setoption name Simulations value {CAP}")
    assert isinstance(server.chooser(), SearchChooser)


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_go_depth_is_a_budget_of_playouts(engine, depth):
    lines = go(engine, MIDDLEGAME, f"go depth {depth}")
    assert nodes_of(lines[-2]) == DEPTH_BASE**depth, lines
    # Along with nodes, the smaller budget counts.
    lines = go(engine, MIDDLEGAME, f"go depth {depth} nodes 3")
    assert nodes_of(lines[-2]) == 3, lines


def test_go_mate_ends_at_the_mate_found(engine):
    lines = go(engine, MATE_IN_ONE, "go mate 1")
    assert lines[-1] == "bestmove a1a8" and " score mate 1 " in lines[-2], lines
    assert nodes_of(lines[-2]) < CAP // 10, lines
    # No mate to find: it searches as far as it would without `mate`.
    lines = go(engine, MIDDLEGAME, "go mate 1 nodes 40")
    assert nodes_of(lines[-2]) == 40, lines
