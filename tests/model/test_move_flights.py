"""The enemy king's flights after a move (model/networks/move_facts.py): how many squares it could
step to, on positions whose answer is known by hand, read off the bitboards as
playing the move says on random boards, and read by the networks only when their config asks."""

from __future__ import annotations

import chess
import pytest

from core.actions import move_to_index
from model.networks import board_graph
from model.networks.move_facts import (
    FLIGHTS_MANY,
    FLIGHTS_NONE,
    FLIGHTS_ONE,
    flight_class,
    flight_classes,
)
from tests.model.move_fact_checks import (
    assert_known,
    assert_read_only_when_asked,
    classes_seen,
    move_edge_classes,
)

CASES = [
    # (FEN, move, flight class)
    ("6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1", "a1a8", FLIGHTS_NONE),  # the back-rank mate
    ("6k1/5pp1/7p/8/8/8/8/R5K1 w - - 0 1", "a1a8", FLIGHTS_ONE),  # with a window on h7
    ("6k1/8/8/8/8/8/8/R5K1 w - - 0 1", "a1a2", FLIGHTS_MANY),  # a quiet move far away
    ("6k1/8/6K1/8/8/8/8/7Q w - - 0 1", "h1h7", FLIGHTS_ONE),  # the queen defended: f8 alone
    ("6k1/8/8/8/8/8/8/6KQ w - - 0 1", "h1h7", FLIGHTS_MANY),  # undefended, it can be taken
    ("7k/8/6K1/8/8/8/8/Q7 w - - 0 1", "a1a8", FLIGHTS_NONE),  # the line runs through the king
    ("r5k1/8/8/8/8/8/5PPP/6K1 b - - 0 1", "a8a1", FLIGHTS_NONE),  # Black to move
    ("4k3/8/8/8/8/8/8/4K2R w K - 0 1", "e1g1", FLIGHTS_MANY),  # castling, played
    ("1n4k1/P4ppp/8/8/8/8/8/6K1 w - - 0 1", "a7b8q", FLIGHTS_NONE),  # a promotion that mates
]


@pytest.mark.parametrize(("fen", "uci", "expected"), CASES)
def test_the_flights_of_known_positions(fen, uci, expected):
    assert_known(fen, uci, expected, flight_class, flight_classes)


def test_reading_the_bitboards_agrees_with_playing_the_moves():
    seen = classes_seen(flight_class, flight_classes, 13, 3)
    assert seen.sum() > 1_000 and seen[FLIGHTS_NONE] > 50 and seen[FLIGHTS_ONE] > 50, seen


def test_the_networks_read_the_flights_only_when_asked():
    board = chess.Board("6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1")
    by_move = move_edge_classes(board, board_graph.kind_flights)
    assert by_move[move_to_index("a1a8")] == FLIGHTS_NONE
    assert by_move[move_to_index("a1a2")] == FLIGHTS_MANY  # f8 and h8
    assert_read_only_when_asked("move_flights", "flights_embed")
