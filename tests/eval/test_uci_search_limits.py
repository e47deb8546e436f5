"""The searching engine's limits, with the shipped model (models/cpu, a BC policy with a
value head of its own) in a real engine process: every network shape a search can use
is compiled before `readyok` (JAX's compile log counts them), `stop` is answered at once
while the search runs, a move keeps to its clock even while a batch is compiling (the
engine started without its warm-up), and Hash bounds the search tree."""

from __future__ import annotations

import os
import pathlib
import random
import re
import sys
import time

import chess
import pytest

from eval.agents.mcts import max_nodes_for

ROOT = pathlib.Path(__file__).resolve().parents[2]

MIDDLEGAME = "r1bqkb1r/pppp1ppp/2n2n2/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4"
COMPILE = re.compile(r"Compiling jit\((\w+)\) with global shapes and types (.*)")
NETWORK = ("log_probs", "both")  # the jitted network calls (model/graph_predictor.py)
INPUT = re.compile(r"int32\[[\d,]*\]")  # the shape of a board or edge input
# `stop` is answered within the engine's own 35 ms (eval/uci/choosers WAIT_STEP and
# STOP_GRACE); the test allows 1 s because the two CPUs it runs on are shared with other
# jobs that may hold both for longer than that, which says nothing of the engine. A batch
# that compiles, as before, takes 4 to 12 s.
ANSWER_WITHIN = 1.0

pytestmark = pytest.mark.slow


def start(uci_process, tmp_path, *flags: str, **env: str):
    """The engine on models/cpu (found from any directory), searching, with JAX logging
    each compilation to a file: (the engine, that file)."""
    log = tmp_path / "stderr.txt"
    env = dict(os.environ, JAX_LOG_COMPILES="1", **env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    engine = uci_process([sys.executable, "-m", "eval.uci", *flags], tmp_path, env=env, stderr=log)
    engine.send("uci", "setoption name Simulations value 100000")
    engine.until(lambda line: line == "uciok")
    return engine, log


def compiles(log) -> list[str]:
    """The network calls compiled so far: their function and the shapes of their inputs."""
    found = COMPILE.findall(log.read_text(errors="replace"))
    return [f"{name} {INPUT.findall(shapes)}" for name, shapes in found if name in NETWORK]


def timed(engine, go: str) -> tuple[float, list[str], str]:
    start = time.monotonic()
    lines, move = engine.go(go)
    return time.monotonic() - start, lines, move


def test_a_search_game_compiles_nothing_once_the_search_is_ready(uci_process, tmp_path):
    engine, log = start(uci_process, tmp_path)
    assert engine.ready() == []
    # readyok comes once the policy is compiled (its two widths for one board); the search's
    # shapes compile in the background, and a `go` with no clock waits for them.
    assert len(compiles(log)) >= 2
    engine.send("position startpos")
    timed(engine, "go nodes 1")
    compiled = compiles(log)
    # One model (its value head beside the policy, one program for both): 1 and SearchBatch
    # boards at two edge widths, and one wide board.
    assert len(compiled) == 5, compiled
    assert all(name.startswith("both ") for name in compiled), compiled
    rng = random.Random(3)
    board = chess.Board()
    nodes = [1, 2, 3, 5, 8, 13, 21, 40, 64, 100]
    for i, n in enumerate(nodes):
        engine.send("position startpos moves " + " ".join(m.uci() for m in board.move_stack))
        go = f"go nodes {n}" if i % 3 else f"go wtime {2000 + 100 * n} btime 60000"
        _, _, move = timed(engine, go)
        board.push_uci(move)
        if board.is_game_over():
            break
        board.push(rng.choice(list(board.legal_moves)))
        if board.is_game_over():
            break
    # And while a search runs until `stop`, which is answered at once.
    engine.send(f"position fen {MIDDLEGAME}", "go infinite")
    engine.until(lambda line: line.startswith("info depth") and " nodes 0 " not in line)
    start_stop = time.monotonic()
    engine.send("stop")
    lines = engine.until(lambda line: line.startswith("bestmove "))
    latency = time.monotonic() - start_stop
    assert chess.Board(MIDDLEGAME).is_legal(chess.Move.from_uci(lines[-1].split()[1]))
    assert latency < ANSWER_WITHIN, latency
    assert engine.ready() == []
    assert compiles(log) == compiled  # not one shape more
    code, _ = engine.finish()
    assert code == 0


def test_a_move_keeps_to_its_clock_while_its_batch_compiles(uci_process, tmp_path):
    # Without the warm-up the first batches compile in the search, seconds each (none is
    # read back from the compile cache): the move is answered from what the tree knows
    # when its time is up.
    engine, log = start(uci_process, tmp_path, "--no-warm-up", JAX_ENABLE_COMPILATION_CACHE="false")
    assert engine.ready() == []
    before = len(compiles(log))
    board = chess.Board(MIDDLEGAME)
    engine.send(f"position fen {MIDDLEGAME}")
    for go, allowed in (("go movetime 300", 0.3), ("go wtime 6000 btime 6000", 6.0 / 30)):
        took, lines, move = timed(engine, go)
        assert board.is_legal(chess.Move.from_uci(move)), lines
        assert took < allowed + ANSWER_WITHIN, (go, took)
    # `go infinite` then `stop` while a batch still compiles.
    engine.send("ucinewgame", f"position fen {MIDDLEGAME}", "go infinite")
    time.sleep(0.2)
    start_stop = time.monotonic()
    engine.send("stop")
    lines = engine.until(lambda line: line.startswith("bestmove "))
    assert time.monotonic() - start_stop < ANSWER_WITHIN
    assert board.is_legal(chess.Move.from_uci(lines[-1].split()[1])), lines
    assert len(compiles(log)) > before  # the batches did compile meanwhile
    engine.kill()


def test_hash_bounds_the_search_tree(uci_process, tmp_path):
    # 1 MB holds 256 nodes: `go infinite` stops growing the tree there, sends its last
    # info line, and still answers `stop` with a legal move.
    engine, _ = start(uci_process, tmp_path)
    engine.send("setoption name Hash value 1", "setoption name SearchBatch value 8")
    assert engine.ready() == []
    engine.send(f"position fen {MIDDLEGAME}", "go infinite")
    infos = [engine.until(lambda line: line.startswith("info depth"))[-1]]
    engine.timeout = 5.0  # an info line a second while it searches; none once it is done
    while True:
        try:
            infos.append(engine.until(lambda line: line.startswith("info depth"))[-1])
        except AssertionError:  # silence: the search has ended
            break
        assert len(infos) < 60, infos[-1]  # a few seconds; a minute is no bound
    playouts = int(infos[-1].split(" nodes ")[1].split()[0])
    assert 0 < playouts <= max_nodes_for(1) + 8, infos[-1]  # each playout adds a node at most
    engine.timeout = 300.0
    engine.send("stop")
    best = engine.until(lambda line: line.startswith("bestmove "))[-1].split()[1]
    assert chess.Board(MIDDLEGAME).is_legal(chess.Move.from_uci(best))
    engine.kill()
