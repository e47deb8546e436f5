"""pipeline.overlap on small splits written with the real schema."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from core.schema import write_boards
from pipeline.overlap import main, overlap

START = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"
E4 = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"
D4 = "rnbqkbnr/pppppppp/8/8/3P4/8/PPP1PPPP/RNBQKBNR b KQkq - 0 1"
NF3 = "rnbqkbnr/pppppppp/8/8/8/5N2/PPPPPPPP/RNBQKB1R b KQkq - 1 1"
# The start position again, reached later (knights out and back): same position, new counters.
START_LATER = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 4 3"


def _row(fen: str, count: int) -> dict:
    return {"fen": fen, "count": count, "moves": ["a2a3"], "win_probs": [0.5], "cp": [0],
            "mate": [None], "best_move": "a2a3", "state_win_prob": 0.5, "state_cp": 0,
            "state_mate": None, "engine": "Stockfish 15.1", "limit": "nodes=1"}  # fmt: skip


def test_the_fraction_of_test_boards_found_in_train(tmp_path, capsys):
    write_boards(
        [_row(START, 10), _row(E4, 3)], str(tmp_path / "train" / "boards-00000-of-00002.parquet")
    )
    write_boards([_row(D4, 1)], str(tmp_path / "train" / "boards-00001-of-00002.parquet"))
    test_rows = [_row(START, 6), _row(NF3, 1), _row(START_LATER, 1), _row(D4, 2)]
    write_boards(test_rows, str(tmp_path / "test" / "boards-00000-of-00001.parquet"))
    report = overlap(str(tmp_path / "train"), str(tmp_path / "test"))
    assert report["train_boards"] == 3 and report["test_boards"] == 4
    assert report["test_boards_in_train"] == 2 and report["fraction"] == 0.5
    assert report["weighted_fraction"] == 8 / 10
    assert report["fraction_ignoring_move_counters"] == 3 / 4
    assert main([str(tmp_path / "train"), str(tmp_path / "test")]) == 0
    assert json.loads(capsys.readouterr().out) == report


def test_files_that_are_not_annotated_boards_are_refused(tmp_path, capsys):
    (tmp_path / "x").mkdir()
    pq.write_table(pa.table({"fen": [START]}), tmp_path / "x" / "boards-00000-of-00001.parquet")
    assert main([str(tmp_path / "x"), str(tmp_path / "x")]) == 1
    assert "boards-00000-of-00001.parquet" in capsys.readouterr().err
    assert main([str(tmp_path / "missing"), str(tmp_path / "x")]) == 1
