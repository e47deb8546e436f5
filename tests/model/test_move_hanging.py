"""What a move leaves hanging (model/networks/move_facts.py): the most valuable of the mover's
other pieces left en prise, on positions whose answer is known by hand, read off the bitboards
as playing the move says on random boards, the same through the board graph, and read by the
networks only when their config asks."""

from __future__ import annotations

import chess
import pytest

from core.actions import move_to_index
from model.networks import board_graph
from model.networks.move_facts import (
    HANGING_MINOR,
    HANGING_NONE,
    HANGING_PAWN,
    HANGING_QUEEN,
    HANGING_ROOK,
    hanging_class,
    hanging_classes,
)
from tests.model.move_fact_checks import (
    assert_known,
    assert_read_only_when_asked,
    classes_seen,
    move_edge_classes,
)

# The bishop on g5 attacks Black's queen on d8; the knight on d5 stands on the white queen's
# file with nothing defending it.
QUEEN_ATTACKED = "r1bqkb1r/pppp1ppp/8/3n2B1/4p3/2P2N2/PP3PPP/R2QKB1R b KQkq - 1 9"

CASES = [
    # (FEN, move, class)
    (QUEEN_ATTACKED, "e4f3", HANGING_QUEEN),  # takes a knight, leaves the queen to the bishop
    (QUEEN_ATTACKED, "d8g5", HANGING_NONE),  # takes the attacker; the queen defends d5 on rank 5
    (QUEEN_ATTACKED, "d5f6", HANGING_NONE),  # the knight moves off the file and blocks the line
    (QUEEN_ATTACKED, "d8e7", HANGING_MINOR),  # the moved queen is the exchange's; the knight
    (QUEEN_ATTACKED, "a7a6", HANGING_QUEEN),  # ignores both
    # A rook attacked by a knight is en prise though defended: the attacker is cheaper.
    ("4k3/8/8/4n3/8/5R2/8/5RK1 w - - 0 1", "g1h1", HANGING_ROOK),
    ("4k3/8/8/4n3/8/5R2/8/5RK1 w - - 0 1", "f3f4", HANGING_NONE),
    # A pawn attacked by a rook and defended by nothing.
    ("4k3/8/8/8/r2P4/8/8/4K3 w - - 0 1", "e1e2", HANGING_PAWN),
    ("4k3/8/8/8/r2P4/8/8/4K3 w - - 0 1", "e1d2", HANGING_PAWN),  # d2 does not touch d4
    ("4k3/8/8/8/r2P4/8/8/4K3 w - - 0 1", "d4d5", HANGING_NONE),  # the moved piece: the exchange
    # Attacked by an equal piece and defended: not en prise.
    ("4k3/8/8/3b4/8/8/6BP/7K w - - 0 1", "h2h3", HANGING_NONE),
    ("4k3/8/8/3b4/8/8/6BP/7K w - - 0 1", "h1g1", HANGING_NONE),  # g1 still defends g2
    # The knight leaves the a-file and opens the rook's line onto the undefended bishop.
    ("r3k3/8/8/N7/8/8/B7/4K3 w - - 0 1", "a5c6", HANGING_MINOR),
    # Black to move, and a capture that removes the only attacker.
    ("4k3/8/8/8/8/8/3q4/3R3K b - - 0 1", "d2d1", HANGING_NONE),
    ("4k3/8/8/8/8/8/3q4/3R3K b - - 0 1", "e8e7", HANGING_QUEEN),
]


@pytest.mark.parametrize(("fen", "uci", "expected"), CASES)
def test_what_a_move_leaves_hanging_in_known_positions(fen, uci, expected):
    assert_known(fen, uci, expected, hanging_class, hanging_classes)


def test_reading_the_bitboards_agrees_with_playing_the_moves():
    seen = classes_seen(hanging_class, hanging_classes, 17, 5)
    assert (seen > 10).all(), seen


def test_the_networks_read_it_only_when_asked():
    by_move = move_edge_classes(chess.Board(QUEEN_ATTACKED), board_graph.kind_hanging)
    # Black to move: the actions are the moves as they are (the graph mirrors the squares).
    assert by_move[move_to_index("e4f3")] == HANGING_QUEEN
    assert by_move[move_to_index("d5f6")] == HANGING_NONE
    assert_read_only_when_asked("move_hanging", "hanging_embed")
