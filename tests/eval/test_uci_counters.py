"""Move 1,000 and later: a legal position whose fullmove number (or halfmove clock) is past
the tokenizer's three digits is played by the model as if it read 999, with the real
committed model (models/cpu, a BC gateau policy with a value head of its own), the
policy and the search alike: no error, no random move."""

from __future__ import annotations

import os
import pathlib
import sys

import chess

ROOT = pathlib.Path(__file__).resolve().parents[2]
LATE_MATE = "6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1000"
# Move 999 for Black, then one move each: the game reaches move 1,000 in `moves`.
BEFORE_1000 = "6k1/5ppp/8/8/8/8/5PPP/R5K1 b - - 0 999"
LATE_CLOCKS = "4k3/8/8/8/8/8/4P3/4K3 w - - 1200 1500"


def test_move_1000_and_later_gets_the_models_move(uci_process, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's engine, from anywhere
    engine = uci_process([sys.executable, "-m", "eval.uci"], cwd=tmp_path, env=env)
    engine.send("uci", "setoption name UCI_ShowWDL value true")
    engine.until(lambda line: line == "uciok")
    for simulations in (0, 64):
        engine.send(f"setoption name Simulations value {simulations}")
        assert engine.ready() == []
        engine.send(f"position fen {LATE_MATE}")
        lines, move = engine.go("go wtime 60000 btime 60000")
        assert move == "a1a8", (simulations, lines)
        engine.send(f"position fen {BEFORE_1000} moves g8h8 a1b1 h8g8")
        lines, move = engine.go("go nodes 64" if simulations else "go")
        board = chess.Board(BEFORE_1000)
        for uci in ("g8h8", "a1b1", "h8g8"):
            board.push_uci(uci)
        assert board.fullmove_number == 1001 and board.is_legal(chess.Move.from_uci(move))
        assert " wdl " in lines[-1], (simulations, lines)
        engine.send(f"position fen {LATE_CLOCKS}")
        lines, move = engine.go("go nodes 64" if simulations else "go")
        assert chess.Board(LATE_CLOCKS).is_legal(chess.Move.from_uci(move))
        errors = [line for line in lines if "error" in line]
        assert errors == [], (simulations, errors)
    assert engine.finish()[0] == 0
