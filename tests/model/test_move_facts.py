"""The static exchange of a move (model/networks/move_facts.py) on positions whose exchange is
known by hand, against a brute-force exchange on random boards, and as the networks read it."""

from __future__ import annotations

import chess
import pytest

from core.actions import move_to_index
from model.networks import board_graph
from model.networks.move_facts import (
    EXCHANGE_EVEN,
    EXCHANGE_LOSES,
    EXCHANGE_WINS,
    PIECE_VALUES,
    exchange_class,
    static_exchange,
)
from tests.model.move_fact_checks import assert_read_only_when_asked, move_edge_classes
from tests.model.random_boards import random_boards

CASES = [
    # (FEN, move, material the mover wins in pawns)
    ("4k3/8/8/3n4/4P3/8/8/4K3 w - - 0 1", "e4d5", 3),  # an undefended knight
    ("4k3/8/2p5/3p4/8/8/8/3QK3 w - - 0 1", "d1d5", -8),  # the queen for a defended pawn
    ("4k3/8/2p5/8/8/8/8/1N2K3 w - - 0 1", "b1a3", 0),  # a quiet move to a safe square
    ("4k3/8/4p3/8/8/2N5/8/4K3 w - - 0 1", "c3d5", -3),  # the knight moved en prise
    ("3rk3/3r4/8/8/8/8/3R4/3RK3 w - - 0 1", "d2d7", 0),  # rook for rook, x-rays behind both
    ("4k3/3r4/8/8/8/8/3R4/3RK3 w - - 0 1", "d2d7", 5),  # the x-ray rook keeps the gain
    ("4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 1", "e5d6", 1),  # en passant
    ("3rk3/4P3/8/8/8/8/8/4K3 w - - 0 1", "e7d8q", 4),  # rook and promotion, queen lost
    ("3k4/4P3/8/8/8/8/8/4K3 w - - 0 1", "e7e8q", -1),  # promotes, the pawn is taken
    ("7k/4P3/8/8/8/8/8/4K3 w - - 0 1", "e7e8q", 8),  # a safe promotion
    ("4k3/8/8/8/8/8/3p4/4K3 w - - 0 1", "e1d2", 1),  # the king takes an undefended pawn
    ("r3k3/8/8/8/8/8/8/R3K2R w KQ - 0 1", "e1g1", 0),  # castling is even
    ("4k3/8/8/3p4/4P3/8/8/4K3 b - - 0 1", "d5e4", 1),  # Black to move
]


@pytest.mark.parametrize(("fen", "uci", "expected"), CASES)
def test_the_exchange_of_known_positions(fen, uci, expected):
    board = chess.Board(fen)
    move = chess.Move.from_uci(uci)
    assert move in board.legal_moves
    assert static_exchange(board, move) == expected
    want = EXCHANGE_WINS if expected > 0 else EXCHANGE_LOSES if expected < 0 else EXCHANGE_EVEN
    assert exchange_class(board, move) == want


def _brute_force(board: chess.Board, square: chess.Square, on_square: int) -> int:
    """What the side to move wins by capturing on `square` (where a piece of value
    `on_square` stands) with its least valuable attacker, or by stopping, the captures
    played out by python-chess (pseudo-legal, as the exchange ignores pins)."""
    captures = list(board.generate_pseudo_legal_captures(to_mask=chess.BB_SQUARES[square]))
    if not captures:
        return 0
    move = min(captures, key=lambda m: PIECE_VALUES[board.piece_type_at(m.from_square)])
    mover = PIECE_VALUES[board.piece_type_at(move.from_square)]
    board.push(move)
    reply = _brute_force(board, square, mover)
    board.pop()
    return max(0, on_square - reply)


def test_the_exchange_agrees_with_playing_the_captures_out():
    checked = 0
    for board in random_boards(7, 60, (10, 60)):
        for move in board.legal_moves:
            # Captures that promote change the piece at stake: the swap counts a pawn.
            if board.is_castling(move) or chess.square_rank(move.to_square) in (0, 7):
                continue
            captured = board.piece_type_at(move.to_square)
            gain = PIECE_VALUES[captured] if captured else 0
            if board.is_en_passant(move):
                gain = PIECE_VALUES[chess.PAWN]
            mover = PIECE_VALUES[board.piece_type_at(move.from_square)]
            board.push(move)
            expected = gain - _brute_force(board, move.to_square, mover)
            board.pop()
            assert static_exchange(board, move) == expected, (board.fen(), move.uci())
            checked += 1
    assert checked > 500


def test_the_networks_read_the_exchange_only_when_asked():
    board = chess.Board("4k3/8/2p5/3p4/8/8/8/3QK3 w - - 0 1")
    by_move = move_edge_classes(board, board_graph.kind_exchange)
    assert by_move[move_to_index("d1d5")] == EXCHANGE_LOSES
    assert by_move[move_to_index("d1d2")] == EXCHANGE_EVEN
    assert_read_only_when_asked("move_exchanges", "exchange_embed")
