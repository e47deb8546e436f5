"""The annotation pipeline's cheap mode (one search per board) and its exclusion of evaluation
positions, end to end on the real DirectRunner, real Stockfish and real Parquet."""

from __future__ import annotations

import io

import chess
import chess.pgn
import pytest

from core.actions import legal_actions
from core.engine_settings import EngineLimit
from core.positions import position_key
from core.schema import read_boards
from pipeline.annotate import annotate
from pipeline.annotate.arguments import parse_args
from pipeline.annotate.settings import AnnotateConfig
from pipeline.annotate.split_output import annotate_identity

GAMES = (
    '[Event "T"]\n[Site "https://lichess.org/modes001"]\n[Result "1-0"]\n\n'
    "1. e4 e5 2. Bc4 Nc6 3. Qh5 Nf6 4. Qxf7# 1-0\n\n"
    '[Event "T"]\n[Site "https://lichess.org/modes002"]\n[Result "*"]\n\n'
    "1. d4 d5 2. c4 e6 3. Nc3 Nf6 4. Bg5 Be7 *\n\n"
)


def fens_before_moves(text: str) -> list[str]:
    fens, stream = [], io.StringIO(text)
    while (game := chess.pgn.read_game(stream)) is not None:
        board = game.board()
        for move in game.mainline_moves():
            fens.append(board.fen())
            board.push(move)
    return fens


def test_search_mode_rows_hold_the_best_lines_and_say_so(stockfish, tmp_path):
    source = tmp_path / "games.pgn"
    source.write_text(GAMES)
    out = tmp_path / "out"
    stats = annotate.run(
        [str(source), "--out", str(out), "--mode", "search", "--multipv", "3",
         "--limit", "nodes=400", "--engine", stockfish, "--progress-seconds", "3600"]
    )  # fmt: skip
    rows = read_boards(str(out / "train")).to_pylist()
    assert {row["fen"] for row in rows} == set(fens_before_moves(GAMES))
    for row in rows:
        legal = legal_actions(chess.Board(row["fen"]))
        assert len(row["moves"]) == min(3, len(legal))
        assert row["moves"] == [m for m in legal if m in row["moves"]]  # action-space order
        assert row["partial"] == (len(legal) > 3)
        best = row["moves"].index(row["best_move"])
        assert row["state_win_prob"] == row["win_probs"][best] == max(row["win_probs"])
        assert row["limit"] == "search:nodes=400,multipv=3"
    assert stats["mode"] == "search" and stats["row_limit"] == "search:nodes=400,multipv=3"
    assert stats["action_values"] == sum(len(row["moves"]) for row in rows)
    # One search of ~400 nodes per board, not one per legal move.
    assert stats["nodes_searched"] < len(rows) * 600


def test_excluded_evaluation_positions_never_reach_the_data(stockfish, tmp_path):
    source = tmp_path / "games.pgn"
    source.write_text(GAMES)
    fens = fens_before_moves(GAMES)
    # A puzzle whose setup move leads to the board before 2. Bc4 (the FEN has other clocks),
    # and an EPD line holding the board before 3. Nc3.
    puzzle_start = chess.Board()
    puzzle_start.push_uci("e2e4")
    puzzles = tmp_path / "puzzles.csv"
    puzzles.write_text(
        "PuzzleId,FEN,Moves,Rating,RatingDeviation,Popularity,NbPlays,Themes,GameUrl,"
        f"OpeningTags\nx1,{puzzle_start.fen()},e7e5 d1h5,900,75,90,100,short,u,\n"
    )
    epd = tmp_path / "suite.epd"
    epd.write_text(f'{position_key(fens[11])} bm Nc3; id "T.1";\n')
    out = tmp_path / "out"
    stats = annotate.run(
        [str(source), "--out", str(out), "--exclude", str(puzzles), str(epd), "--mode", "search",
         "--limit", "nodes=50", "--engine", stockfish, "--progress-seconds", "3600"]
    )  # fmt: skip
    kept = {row["fen"] for row in read_boards(str(out / "train")).to_pylist()}
    dropped = {fens[2], fens[11]}  # 1. e4 e5 (after the puzzle's Moves[0]) and the EPD board
    assert kept == set(fens) - dropped
    assert stats["excluded"] == {"boards": 2, "occurrences": 2}
    assert stats["boards"]["unique"] == len(set(fens)) - 2
    assert stats["exclude"]["positions"] == 2 + 1  # after e7e5 and after d1h5; the EPD board
    assert [f["kind"] for f in stats["exclude"]["files"]] == ["puzzles", "epd"]


def test_mode_flags_are_checked_and_recorded_in_the_run_identity(tmp_path, capsys):
    config = AnnotateConfig(("x.pgn",), str(tmp_path), limit=EngineLimit.parse("nodes=9"))
    search = AnnotateConfig(
        ("x.pgn",), str(tmp_path), limit=EngineLimit.parse("nodes=9"), mode="search", multipv=2
    )
    assert annotate_identity(config, ["x.pgn"])["limit"] == "nodes=9"  # as journals always had it
    assert annotate_identity(search, ["x.pgn"])["limit"] == "search:nodes=9,multipv=2"
    with pytest.raises(SystemExit, match="--multipv is for --mode search"):
        parse_args(["x.pgn", "--out", str(tmp_path), "--multipv", "3"])
    source = tmp_path / "games.pgn"
    source.write_text(GAMES)
    code = annotate.main([str(source), "--out", str(tmp_path / "o"), "--exclude", "a.txt"])
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: --exclude a.txt: not a puzzle CSV")
    assert not (tmp_path / "o").exists()
