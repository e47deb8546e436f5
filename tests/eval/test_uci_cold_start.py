"""The searching engine's start: `readyok` once the policy is compiled, the search's shapes
compiling in a thread of their own. Until they are, a move on the clock is the policy's,
a `go` without a clock waits for the search (or plays the policy's at `stop`); then the
search plays. With the real models/cpu (its own value head)."""

from __future__ import annotations

import os
import re
import sys
import threading

import chess
import pytest

from tests.eval.uci_inprocess import ROOT, engine_in_process

MIDDLEGAME = "r1bqkb1r/pppp1ppp/2n2n2/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4"


@pytest.fixture(scope="module")
def engine():
    yield from engine_in_process(simulations=100_000)


@pytest.fixture
def compiling(engine):
    """The engine's search as if its shapes were still compiling: `ready` unset until the
    test sets it (the factory's thread sets it so)."""
    server, _ = engine
    chooser = server.chooser()
    chooser.ready = threading.Event()
    yield chooser.ready
    chooser.ready.set()
    server.handle("stop")


def go(engine, command: str) -> list[str]:
    server, out = engine
    server.handle("ucinewgame")
    server.handle(f"position fen {MIDDLEGAME}")
    server.handle(command)
    return out.until_bestmove()


def nodes_of(info: str) -> int:
    return int(re.search(r" nodes (\d+) ", info)[1])


def test_a_move_on_the_clock_is_the_policys_while_the_search_compiles(engine, compiling):
    server, _ = engine
    expected = server.chooser().policy.agent.choose_move(chess.Board(MIDDLEGAME))
    lines = go(engine, "go wtime 3000 btime 3000")
    assert lines[-1] == f"bestmove {expected.uci()}", lines
    legal = chess.Board(MIDDLEGAME).legal_moves.count()
    assert nodes_of(lines[-2]) == legal and " score " not in lines[-2], lines
    assert not any("error" in x for x in lines), lines
    # Compiled: the search plays, on the same clock.
    compiling.set()
    lines = go(engine, "go wtime 3000 btime 3000")
    assert " score " in lines[-2], lines  # the tree's value (the policy's move had none)


def test_a_go_without_a_clock_waits_for_the_search(engine, compiling):
    threading.Timer(0.3, compiling.set).start()
    lines = go(engine, "go nodes 16")
    assert nodes_of(lines[-2]) == 16, lines


def test_stop_before_the_search_is_compiled_plays_the_policys_move(engine, compiling):
    server, out = engine
    expected = server.chooser().policy.agent.choose_move(chess.Board(MIDDLEGAME))
    server.handle("ucinewgame")
    server.handle(f"position fen {MIDDLEGAME}")
    server.handle("go infinite")
    server.handle("stop")
    lines = out.until_bestmove()
    assert lines[-1] == f"bestmove {expected.uci()}", lines


@pytest.mark.slow
def test_a_cold_start_answers_readyok_and_plays_then_searches(uci_process, tmp_path):
    """From an empty compilation cache, as a first start on a machine."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    engine = uci_process([sys.executable, "-m", "eval.uci"], cwd=tmp_path, env=env)
    engine.send("uci", "setoption name Simulations value 256")
    assert engine.ready()[-1] == "uciok"
    engine.send(f"position fen {MIDDLEGAME}")
    lines, move = engine.go("go wtime 60000 btime 60000")
    assert chess.Board(MIDDLEGAME).is_legal(chess.Move.from_uci(move)), lines
    lines, _ = engine.go("go nodes 8")
    assert nodes_of(lines[-1]) == 8, lines
    assert engine.finish()[0] == 0
    assert any((tmp_path / "cache" / "searchless-chess" / "xla").iterdir())
