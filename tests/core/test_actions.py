import chess
import numpy as np
import pytest

from core.actions import (
    ACTIONS,
    NUM_ACTIONS,
    index_to_move,
    indices_to_moves,
    legal_action_mask,
    legal_actions,
    move_to_index,
    moves_to_indices,
)

TEST_VECTORS = {
    "a1b1": 0,
    "e1c1": 99,
    "e1g1": 102,
    "a7a8": 1399,
    "e8g8": 1714,
    "a2a1q": 1792,
    "a2b1n": 1799,
    "e7e8q": 1924,
    "h7g8n": 1967,
}


def test_size_and_uniqueness():
    assert NUM_ACTIONS == 1968
    assert len(set(ACTIONS)) == 1968
    assert sum(len(m) == 5 for m in ACTIONS) == 176


@pytest.mark.parametrize("move, index", sorted(TEST_VECTORS.items()))
def test_design_vectors(move, index):
    assert move_to_index(move) == index
    assert move_to_index(chess.Move.from_uci(move)) == index
    assert index_to_move(index) == move


def test_round_trip_vectorised():
    indices = np.arange(NUM_ACTIONS)
    moves = indices_to_moves(indices)
    assert moves_to_indices(moves).tolist() == indices.tolist()
    assert moves_to_indices(list(TEST_VECTORS)).tolist() == list(TEST_VECTORS.values())
    assert moves_to_indices([]).shape == (0,)


def test_unknown_moves_are_key_errors_naming_the_move():
    for bad in ["a1a1", "e2e5q", "a1h7", "zz"]:
        with pytest.raises(KeyError, match=bad):
            move_to_index(bad)
        with pytest.raises(KeyError, match=bad):
            moves_to_indices(["e2e4", bad])


def test_every_geometric_move_is_queen_or_knight_like():
    for move in ACTIONS:
        origin = chess.parse_square(move[:2])
        target = chess.parse_square(move[2:4])
        df = abs(chess.square_file(origin) - chess.square_file(target))
        dr = abs(chess.square_rank(origin) - chess.square_rank(target))
        assert (df, dr) != (0, 0)
        assert df == 0 or dr == 0 or df == dr or {df, dr} == {1, 2}


def _assert_all_legal_moves_map(board: chess.Board):
    moves = legal_actions(board)
    assert len(moves) == board.legal_moves.count()
    indices = moves_to_indices(moves)
    assert (np.diff(indices) > 0).all(), "legal_actions must be in action-space order"


# Positions that exercise every special move, built here rather than read from files.
SPECIAL_POSITIONS = {
    "castling both sides, both colours": "r3k2r/pppppppp/8/8/8/8/PPPPPPPP/R3K2R w KQkq - 0 1",
    "black castles": "r3k2r/pppppppp/8/8/8/8/PPPPPPPP/R3K2R b KQkq - 0 1",
    "white en passant": "4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2",
    "black en passant": "4k3/8/8/8/3pP3/8/8/4K3 b - e3 0 2",
    "white promotions with captures": "1n1n4/2P5/8/8/8/8/8/k3K3 w - - 0 1",
    "black underpromotion captures": "4k3/8/8/8/8/8/6p1/K4R1R b - - 0 1",
    "edge-file promotions": "1n4n1/P6P/8/8/8/8/p6p/1N2K1NK w - - 0 1",
}


@pytest.mark.parametrize("name", sorted(SPECIAL_POSITIONS))
def test_special_moves_map(name):
    board = chess.Board(SPECIAL_POSITIONS[name])
    _assert_all_legal_moves_map(board)


def test_special_moves_are_present():
    board = chess.Board(SPECIAL_POSITIONS["castling both sides, both colours"])
    assert {"e1g1", "e1c1"} <= set(legal_actions(board))
    board = chess.Board(SPECIAL_POSITIONS["white en passant"])
    assert "e5d6" in legal_actions(board)
    board = chess.Board(SPECIAL_POSITIONS["white promotions with captures"])
    assert {"c7c8q", "c7b8n", "c7d8r", "c7d8b"} <= set(legal_actions(board))
    board = chess.Board(SPECIAL_POSITIONS["black underpromotion captures"])
    assert {"g2f1n", "g2h1b", "g2g1r"} <= set(legal_actions(board))


def test_legal_action_mask():
    boards = [chess.Board(), chess.Board(SPECIAL_POSITIONS["white en passant"])]
    mask = legal_action_mask(boards)
    assert mask.shape == (2, NUM_ACTIONS)
    assert mask[0].sum() == 20
    assert mask[0, move_to_index("g1f3")] and not mask[0, move_to_index("e2e5")]


def test_every_legal_move_of_real_games_and_puzzles_maps(shared_data):
    import csv

    import chess.pgn

    checked = 0
    for path in sorted((shared_data / "games").glob("*.pgn")):
        with open(path) as f:
            while (game := chess.pgn.read_game(f)) is not None:
                board = game.board()
                for move in game.mainline_moves():
                    _assert_all_legal_moves_map(board)
                    board.push(move)
                    checked += 1
    for path in sorted((shared_data / "puzzles").glob("*.csv")):
        with open(path, newline="") as f:
            for row in csv.reader(f):
                fen_column = 0 if "/" in row[0] else 1
                if "/" not in row[fen_column]:
                    continue  # header
                board = chess.Board(row[fen_column])
                for uci in row[fen_column + 1].split():
                    _assert_all_legal_moves_map(board)
                    board.push_uci(uci)
                    checked += 1
    assert checked > 100_000
