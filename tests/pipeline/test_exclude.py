"""The evaluation positions a training set must not hold, read from real puzzle and EPD files."""

from __future__ import annotations

import pathlib

import chess
import pytest
import zstandard

from core.eval_sets import read_puzzles
from core.positions import position_key
from pipeline.exclude import load_exclusions
from runtime.text_files import NotTextError

SAMPLE_PUZZLES = pathlib.Path(__file__).resolve().parents[2] / "data" / "sample" / "puzzles.csv"
STS = '1kr5/3n4/q3p2p/p2n2p1/PppB1P2/5BP1/1P2Q2P/3R2K1 w - - bm f5; id "STS.001";'
WAC = '2rr3k/pp3pp1/1nnqbN1p/3pN3/2pP4/2P3Q1/PPB4P/R4RK1 w - - bm Qg6; id "WAC.001";'


def test_puzzle_positions_are_those_after_the_first_move(tmp_path):
    puzzles, _ = read_puzzles(str(SAMPLE_PUZZLES))
    exclusions = load_exclusions([str(SAMPLE_PUZZLES)])
    expected = set()
    for puzzle in puzzles:
        board = chess.Board(puzzle.fen)
        for uci in puzzle.moves:
            board.push_uci(uci)
            expected.add(position_key(board.fen()))
    assert exclusions.keys == expected
    (record,) = exclusions.files
    assert (record.kind, record.records, record.skipped) == ("puzzles", len(puzzles), 0)
    assert record.positions == len(expected) > len(puzzles)

    first = puzzles[0]
    board = chess.Board(first.fen)
    assert board.fen() not in exclusions  # the puzzle's own FEN is before the opponent's move
    board.push_uci(first.moves[0])
    # The same position reached at another move number is the same position.
    fields = board.fen().split()
    assert " ".join(fields[:4] + ["37", "80"]) in exclusions

    packed = tmp_path / "puzzles.csv.zst"
    packed.write_bytes(zstandard.ZstdCompressor().compress(SAMPLE_PUZZLES.read_bytes()))
    assert load_exclusions([str(packed)]).keys == expected


def test_epd_positions_and_malformed_lines_are_counted(tmp_path):
    epd = tmp_path / "suite.epd"
    epd.write_text(f"{STS}\n{WAC}\nnot an epd line\n{STS}\n")
    exclusions = load_exclusions([str(epd)])
    assert len(exclusions) == 2
    assert "1kr5/3n4/q3p2p/p2n2p1/PppB1P2/5BP1/1P2Q2P/3R2K1 w - - 5 40" in exclusions
    assert chess.STARTING_FEN not in exclusions
    (record,) = exclusions.files
    assert (record.kind, record.records, record.skipped, record.positions) == ("epd", 3, 1, 2)
    assert record.first_skipped.startswith("line 3:")
    both = load_exclusions([str(epd), str(SAMPLE_PUZZLES)])
    assert both.keys == exclusions.keys | load_exclusions([str(SAMPLE_PUZZLES)]).keys
    assert both.describe()["positions"] == len(both)


def test_bad_exclusion_paths_name_the_file(tmp_path):
    with pytest.raises(ValueError, match="games.pgn: not a puzzle CSV"):
        load_exclusions([str(tmp_path / "games.pgn")])
    with pytest.raises(FileNotFoundError, match="missing.epd: no such file"):
        load_exclusions([str(SAMPLE_PUZZLES), str(tmp_path / "missing.epd")])


@pytest.mark.parametrize("name", ["puzzles.csv", "suite.epd"])
def test_an_exclusion_file_that_is_not_text_is_one_error_naming_it(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"\xff\xfe\x00\x81 not UTF-8\n" * 10)
    with pytest.raises(NotTextError, match=rf"^{path} is not a text file \(not UTF-8"):
        load_exclusions([str(path)])
