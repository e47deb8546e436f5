"""The king danger a move leaves (model/networks/move_facts.py): the opponent's checks
once the move is on the board, on positions whose answer is known by hand, read off the
bitboards as playing the move says on random boards, the same through the board graph, and
read by the networks only when their config asks."""

from __future__ import annotations

import chess
import pytest

from core.actions import move_to_index
from model.networks import board_graph
from model.networks.move_facts import (
    DANGER_BOXED,
    DANGER_CLASSES,
    DANGER_GUARDED,
    DANGER_NONE,
    DANGER_SAFE,
    danger_class,
    danger_classes,
)
from tests.model.move_fact_checks import (
    assert_known,
    assert_read_only_when_asked,
    classes_seen,
    move_edge_classes,
)

# Black's rook on d8 sees d1 on White's back rank; White's rook on c1 guards it.
BACK_RANK = "3r2k1/5ppp/8/8/8/8/5PPP/2R3K1 w - - 0 1"
# Black's knight on e5 reaches f3, a knight's check on g1; White's rook on f1 guards it.
KNIGHT = "4k3/8/8/4n3/8/8/8/5RK1 w - - 0 1"
# White's queen on h5 can take on h7 next to Black's king, defended there by the bishop on d3.
QUEEN_AND_BISHOP = "6k1/5ppp/8/7Q/8/3B4/8/6K1 b - - 0 1"

CASES = [
    # (FEN, move, class)
    (BACK_RANK, "c1c7", DANGER_BOXED),  # the rook leaves the rank: Rd1 is the mate's shape
    (BACK_RANK, "c1d1", DANGER_BOXED),  # Rxd1 checks, and from d1 the rook sees f1 and h1
    (BACK_RANK, "h2h3", DANGER_GUARDED),  # d1 is still guarded (and h2 is free)
    (BACK_RANK, "g1f1", DANGER_GUARDED),
    (KNIGHT, "f1f2", DANGER_GUARDED),  # the rook still guards f3
    (KNIGHT, "f1a1", DANGER_SAFE),  # it does not, and the king has squares
    (KNIGHT, "g1h1", DANGER_NONE),  # no knight reaches f2 or g3
    (QUEEN_AND_BISHOP, "g8h8", DANGER_BOXED),  # Qxh7, defended, and g8 seen from h7
    (QUEEN_AND_BISHOP, "g8f8", DANGER_SAFE),  # Qc5 checks, and e8 is free
    (QUEEN_AND_BISHOP, "h7h6", DANGER_GUARDED),  # Bh7 next to the king defended by nothing
    (QUEEN_AND_BISHOP, "g7g6", DANGER_GUARDED),  # g6 blocks the bishop; Qxg6 is guarded
]


@pytest.mark.parametrize(("fen", "uci", "expected"), CASES)
def test_the_king_danger_a_move_leaves_in_known_positions(fen, uci, expected):
    assert_known(fen, uci, expected, danger_class, danger_classes)


def test_reading_the_bitboards_agrees_with_playing_the_moves():
    seen = classes_seen(danger_class, danger_classes, 23, DANGER_CLASSES)
    assert (seen > 10).all(), seen


def test_the_networks_read_it_only_when_asked():
    by_move = move_edge_classes(chess.Board(QUEEN_AND_BISHOP), board_graph.kind_danger)
    # Black to move: the actions are the moves as they are (the graph mirrors the squares).
    assert by_move[move_to_index("g8h8")] == DANGER_BOXED
    assert by_move[move_to_index("g8f8")] == DANGER_SAFE
    assert by_move[move_to_index("h7h6")] == DANGER_GUARDED
    assert_read_only_when_asked("move_king_danger", "danger_embed")
