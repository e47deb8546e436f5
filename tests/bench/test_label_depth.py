"""bench/label_depth.py: a deeper search's agreement with the stored labels, on real Stockfish
at a few nodes."""

from __future__ import annotations

import json

import chess
import chess.engine
import pytest

from bench.label_depth import main
from core.schema import write_boards

FENS = [
    "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3",
    "6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1",  # a mate in one
    "r1bqkb1r/pppp1ppp/2n2n2/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR w KQkq - 4 4",  # Qxf7 mates
]


def _labels(stockfish: str, nodes: int) -> list[str]:
    with chess.engine.SimpleEngine.popen_uci(stockfish) as uci:
        uci.configure({"Threads": 1, "Hash": 16})
        out = []
        for fen in FENS:
            uci.protocol.send_line("ucinewgame")
            out.append(uci.play(chess.Board(fen), chess.engine.Limit(nodes=nodes)).move.uci())
        return out


def test_labels_reproduce_and_the_deepest_agrees_with_itself(stockfish, tmp_path, capsys):
    split = tmp_path / "search-x"
    split.mkdir()
    # One-search rows as the annotator writes them (only the FEN and best move are read).
    rows = [
        {
            "fen": fen,
            "count": 1,
            "moves": [move],
            "win_probs": [0.5],
            "cp": [0],
            "mate": [None],
            "best_move": move,
            "state_win_prob": 0.5,
            "state_cp": 0,
            "state_mate": None,
            "partial": True,
            "engine": "Stockfish",
            "limit": "search:nodes=40,multipv=1",
        }
        for fen, move in zip(FENS, _labels(stockfish, 40), strict=True)
    ]
    write_boards(rows, str(split / "boards-00000-of-00001.parquet"))
    argv = ["--boards", str(split), "--num", "10", "--nodes", "400,40", "--engine", stockfish]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["boards"] == 3 and report["nodes"] == [40, 400]
    # Searches from a cleared hash at a node limit on one thread repeat their move.
    assert report["agrees_with_label"]["40"] == 1.0
    assert report["agrees_with_deepest"]["400"] == 1.0
    # Both mates in one are found at either depth.
    assert report["agrees_with_deepest"]["40"] >= 2 / 3
    assert set(report["ms_per_board"]) == {"40", "400"}


def test_no_files_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match="no Parquet files"):
        main(["--boards", str(tmp_path / "nothing"), "--num", "3"])
