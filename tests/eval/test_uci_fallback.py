"""A searching UCI engine whose search has nothing when its move is due (a clock of a few
milliseconds, a loaded machine), or whose search fails: it plays the policy's move, never a
random one, with the real committed model (models/cpu, a BC policy with its own value head)."""

from __future__ import annotations

import os
import sys

import chess
import pytest

from eval.uci.choosers import PolicyChooser
from tests.eval.uci_inprocess import ROOT, HeldEvaluator, engine_in_process

MATE_IN_ONE = "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1"
MATE = "a1a8"


@pytest.fixture(scope="module")
def engine():
    """An engine on models/cpu searching, in this process (its search can then be held)."""
    yield from engine_in_process(simulations=100_000)


def held_go(engine, fen: str, go: str, error: Exception | None = None) -> list[str]:
    server, out = engine
    search = server.chooser().search
    held = search.evaluator = HeldEvaluator(search.evaluator, error)
    try:
        server.handle("ucinewgame")
        server.handle(f"position fen {fen}")
        server.handle(go)
        return out.until_bestmove()
    finally:
        held.release.set()
        search.evaluator = held.evaluator
        server.handle("isready")  # ends the search, if it still runs
        assert out.lines.get(timeout=60) == "readyok"


@pytest.mark.parametrize("go", ["go wtime 120 btime 120", "go movetime 20", "go ponder"])
def test_a_search_with_nothing_yet_plays_the_policys_move(engine, go):
    server, out = engine
    if go == "go ponder":  # stopped before the root is evaluated
        search = server.chooser().search
        held = search.evaluator = HeldEvaluator(search.evaluator)
        try:
            server.handle("ucinewgame")
            server.handle(f"position fen {MATE_IN_ONE}")
            server.handle(go)
            server.handle("stop")
            lines = out.until_bestmove()
        finally:
            held.release.set()
            search.evaluator = held.evaluator
    else:
        lines = held_go(engine, MATE_IN_ONE, go)
    assert not any("error" in line for line in lines), lines
    assert lines[-1] == f"bestmove {MATE}", lines


def test_the_policys_move_is_the_models_own_on_any_position(engine):
    server, _ = engine
    policy = server.chooser().policy
    assert isinstance(policy, PolicyChooser)
    board = chess.Board("r1bqkb1r/pppp1ppp/2n2n2/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4")
    expected = policy.agent.choose_move(board)
    lines = held_go(engine, board.fen(), "go wtime 100 btime 100")
    assert lines[-1] == f"bestmove {expected.uci()}", lines


def test_a_failing_search_falls_back_on_the_policy_not_a_random_move(engine):
    lines = held_go(engine, MATE_IN_ONE, "go movetime 50", error=RuntimeError("batch lost"))
    errors = [line for line in lines if line.startswith("info string error")]
    assert len(errors) == 1 and "batch lost" in errors[0], lines
    assert errors[0].endswith("playing the policy's move") and "random" not in errors[0]
    assert lines[-1] == f"bestmove {MATE}", lines


def test_short_clocks_always_give_the_mate(uci_process, tmp_path):
    """The engine as GUIs run it: the clocks so short that the search often has nothing
    (Move Overhead takes all but the 1 ms floor), each try a new game."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's engine, from anywhere
    engine = uci_process([sys.executable, "-m", "eval.uci"], cwd=tmp_path, env=env)
    engine.send(
        "uci",
        "setoption name Simulations value 100000",
        "setoption name Move Overhead value 5000",
    )
    engine.ready()
    for clock in (20, 120, 1000) * 4:
        engine.send("ucinewgame", f"position fen {MATE_IN_ONE}")
        lines, move = engine.go(f"go wtime {clock} btime {clock}")
        assert move == MATE and not any("random" in line for line in lines), (clock, lines)
    assert engine.finish()[0] == 0


@pytest.mark.parametrize("ending", ["quit", "end of input"])
def test_the_engine_ends_cleanly_while_its_search_still_compiles(uci_process, tmp_path, ending):
    """`quit`, or the GUI closing the pipe, right after `readyok`, while the search's batch
    shapes still compile in their thread: the engine waits for the shapes in hand, skips the
    rest and exits with status 0 (a compile thread still in XLA at the interpreter's exit
    aborted it: status -6, "terminate called without an active exception")."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    engine = uci_process([sys.executable, "-m", "eval.uci"], cwd=tmp_path, env=env)
    engine.send("uci", "setoption name Simulations value 100000")
    engine.ready()
    engine.send("ucinewgame", f"position fen {MATE_IN_ONE}")
    lines, move = engine.go("go wtime 20 btime 20")  # the policy's move: still compiling
    assert move == MATE, lines
    if ending == "quit":
        engine.send("quit")
    code, stderr = engine.finish()
    assert code == 0, stderr
    assert "Traceback" not in stderr and "terminate" not in stderr, stderr
