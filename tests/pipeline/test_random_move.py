"""pipeline/random_move.py: which boards `annotate --random-move` replaces and by what, and the
flag end to end (real DirectRunner, real Stockfish, real Parquet)."""

from __future__ import annotations

import chess
import pytest

from core.positions import position_key
from core.schema import read_boards
from pipeline import random_move
from pipeline.annotate import annotate
from pipeline.annotate.arguments import parse_args
from tests.pipeline.test_annotate_modes import GAMES, fens_before_moves

FENS = fens_before_moves(GAMES)


def successors(fen: str) -> set[str]:
    board, found = chess.Board(fen), set()
    for move in board.legal_moves:
        board.push(move)
        found.add(board.fen())
        board.pop()
    return found


def test_the_board_after_a_random_move_is_a_legal_successor_chosen_by_the_seed():
    for fen in FENS:
        after = random_move.after_random_move(fen, seed=0)
        assert after in successors(fen)
        assert random_move.after_random_move(fen, seed=0) == after  # deterministic
    by_seed = {random_move.after_random_move(chess.STARTING_FEN, seed) for seed in range(20)}
    assert len(by_seed) > 5  # the seed changes the move (20 legal moves)


def test_moves_that_end_the_game_are_not_chosen():
    knight_ending = "8/8/8/8/8/8/8/K1k1n3 b - - 0 1"  # K+N v K: every move leaves a dead draw
    assert random_move.after_random_move(knight_ending) is None
    mated = "rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3"
    assert random_move.after_random_move(mated) is None  # no legal move
    back_rank = "7k/6pp/8/8/8/8/8/R5K1 w - - 0 1"  # Ra8 mates: 1 of its 17 moves
    chosen = {random_move.after_random_move(back_rank, seed) for seed in range(200)}
    assert len(chosen) > 10
    assert not any(chess.Board(after).is_game_over() for after in chosen)


def test_the_rate_is_the_share_of_boards_replaced():
    fens = set()
    board = chess.Board()
    for ply in range(400):  # distinct boards of one long random walk
        fens.add(board.fen())
        moves = sorted(board.legal_moves, key=chess.Move.uci)
        board.push(moves[(ply * 7) % len(moves)])
        if board.is_game_over():
            board = chess.Board()
    assert all(random_move.replace(f, 0.0) == f for f in fens)
    assert all(random_move.replace(f, 1.0) in successors(f) for f in fens)
    replaced = sum(random_move.replace(f, 0.3, seed=2) != f for f in fens) / len(fens)
    assert 0.2 < replaced < 0.4


def test_annotate_values_the_boards_after_a_random_move_and_excludes_them_too(stockfish, tmp_path):
    source = tmp_path / "games.pgn"
    source.write_text(GAMES)
    after = {fen: random_move.after_random_move(fen) for fen in FENS}
    # An evaluation position that a replacement produces must still be dropped.
    epd = tmp_path / "suite.epd"
    epd.write_text(f'{position_key(after[FENS[5]])} bm Nf3; id "T.1";\n')
    out = tmp_path / "out"
    stats = annotate.run(
        [str(source), "--out", str(out), "--mode", "search", "--limit", "nodes=50",
         "--random-move", "1", "--exclude", str(epd), "--engine", stockfish,
         "--progress-seconds", "3600"]
    )  # fmt: skip
    rows = read_boards(str(out / "train")).to_pylist()
    assert {row["fen"] for row in rows} == set(after.values()) - {after[FENS[5]]}
    for row in rows:
        assert row["best_move"] in row["moves"]
    assert stats["boards"]["after_random_move"] == len(FENS)
    assert stats["excluded"]["boards"] == 1
    assert stats["sampling"]["random_move_rate"] == 1.0


def test_a_rate_outside_zero_to_one_is_refused_in_one_line(tmp_path):
    with pytest.raises(SystemExit, match=r"--random-move must be in \[0, 1\], got 1.5"):
        parse_args(["x.pgn", "--out", str(tmp_path), "--random-move", "1.5"])
