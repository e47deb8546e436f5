"""The threat of a move (model/networks/move_facts.py): what it newly attacks with gain, on
positions whose answer is known by hand, read off the bitboards as playing the move says on
random boards, and read by the networks only when their config asks."""

from __future__ import annotations

import chess
import pytest

from core.actions import move_to_index
from model.networks import board_graph
from model.networks.move_facts import (
    THREAT_MANY,
    THREAT_NONE,
    THREAT_ONE,
    threat_class,
    threat_classes,
)
from tests.model.move_fact_checks import (
    assert_known,
    assert_read_only_when_asked,
    classes_seen,
    move_edge_classes,
)

CASES = [
    # (FEN, move, threat class)
    ("2r1q1k1/8/8/8/4N3/8/8/6K1 w - - 0 1", "e4d6", THREAT_MANY),  # a knight forks rook and queen
    ("4k3/8/8/2n5/8/3P4/8/4K3 w - - 0 1", "d3d4", THREAT_ONE),  # a pawn attacks a knight
    ("4k3/8/2p5/3n4/8/8/8/3BK3 w - - 0 1", "d1b3", THREAT_NONE),  # a defended piece of equal worth
    ("4k3/8/8/3n4/8/8/8/3BK3 w - - 0 1", "d1b3", THREAT_ONE),  # the same piece undefended
    ("3q3k/8/8/8/3N4/8/8/3RK3 w - - 0 1", "d4f5", THREAT_ONE),  # a discovered attack on the queen
    ("3q3k/8/8/8/8/8/8/3RK3 w - - 0 1", "e1e2", THREAT_NONE),  # the queen was attacked before
    ("3q3k/8/8/8/8/8/8/3RK3 w - - 0 1", "d1d2", THREAT_NONE),  # and still is, by the same rook
    ("3k4/8/8/8/3n4/8/8/3RK3 w - - 0 1", "d1d4", THREAT_NONE),  # the captured piece is no threat
    ("4k3/8/8/8/8/8/8/4K2R w K - 0 1", "e1g1", THREAT_NONE),  # castling counts none
    ("4k3/8/3p4/8/2N5/8/8/4K3 b - - 0 1", "d6d5", THREAT_ONE),  # Black to move
    ("8/1P5k/8/8/8/8/1r6/4K3 w - - 0 1", "b7b8q", THREAT_ONE),  # the new queen on a loose rook
    ("4k3/3n4/8/4pP2/8/8/8/4K3 w - e6 0 1", "f5e6", THREAT_ONE),  # en passant
    ("4k3/8/8/3r4/8/8/8/3QK3 w - - 0 1", "d1d2", THREAT_NONE),  # it was attacked from d1 already
    ("4k3/8/8/8/1q6/8/8/3QK3 w - - 0 1", "d1d2", THREAT_ONE),  # a loose queen, by the queen
]


@pytest.mark.parametrize(("fen", "uci", "expected"), CASES)
def test_the_threat_of_known_positions(fen, uci, expected):
    assert_known(fen, uci, expected, threat_class, threat_classes)


def test_reading_the_bitboards_agrees_with_playing_the_moves():
    seen = classes_seen(threat_class, threat_classes, 11, 3)
    assert seen.sum() > 1_000 and seen[THREAT_ONE] > 50 and seen[THREAT_MANY] > 5, seen


def test_the_networks_read_the_threat_only_when_asked():
    board = chess.Board("2r1q1k1/8/8/8/4N3/8/8/6K1 w - - 0 1")
    # The attack edges carry no fact of a move (move_edge_classes asserts it).
    by_move = move_edge_classes(board, board_graph.kind_threat)
    assert by_move[move_to_index("e4d6")] == THREAT_MANY
    assert by_move[move_to_index("e4c3")] == THREAT_NONE
    assert_read_only_when_asked("move_threats", "threat_embed")
