"""Whether a move's piece stands en prise before it (model/networks/move_facts.py), on positions
known by hand, as the board graph packs it and the networks read it."""

from __future__ import annotations

import chess
import numpy as np
import pytest

from core.actions import move_to_index
from model import config as config_lib
from model.networks import board_graph, network
from model.networks.move_facts import en_prise, escape_classes

CASES = [
    # (FEN, square, en prise)
    ("4k3/8/8/8/8/2p5/3N4/4K3 w - - 0 1", "d2", True),  # a knight attacked by a pawn
    ("4k3/8/8/8/3N4/2P2n2/8/4K3 w - - 0 1", "d4", False),  # attacked by an equal, defended
    ("4k3/8/8/8/3N4/5n2/8/4K3 w - - 0 1", "d4", True),  # the same, undefended
    ("4k3/8/8/8/8/8/8/r2BK3 w - - 0 1", "d1", False),  # attacked by a rook, defended by the king
    ("4k3/8/8/8/8/8/8/r2B2K1 w - - 0 1", "d1", True),  # the king too far to defend it
    ("4k3/8/8/8/8/8/8/4K3 w - - 0 1", "d4", False),  # an empty square
    ("4k3/8/8/8/8/8/8/r3K3 w - - 0 1", "e1", False),  # the king: its check is another fact
    ("4k3/8/3b4/4P3/8/8/8/4K3 b - - 0 1", "d6", True),  # Black to move
]


@pytest.mark.parametrize(("fen", "square", "expected"), CASES)
def test_en_prise_on_known_positions(fen, square, expected):
    assert en_prise(chess.Board(fen), chess.parse_square(square)) is expected


def test_every_move_of_a_piece_en_prise_escapes_and_the_graph_says_so():
    board = chess.Board("4k3/8/8/8/8/2p5/3N4/4K3 w - - 0 1")
    legal = list(board.legal_moves)
    expected = [int(move.from_square == chess.D2) for move in legal]
    assert escape_classes(board, legal) == expected and 1 in expected and 0 in expected
    graphs = board_graph.encode_boards([board])
    moves = graphs.num_moves[0]
    escapes = board_graph.kind_escape(graphs.kinds.astype(np.int64)).tolist()
    by_move = dict(zip(graphs.actions[:moves].tolist(), escapes[:moves], strict=True))
    assert by_move[move_to_index("d2b3")] == 1
    assert by_move[move_to_index("e1f1")] == 0
    assert set(escapes[moves:]) == {0}  # attack edges carry no fact of a move


def test_the_networks_read_the_escape_only_when_asked():
    for backbone in ("gateau", "squares"):
        plain = config_lib.from_dict({"model": {"backbone": backbone}, "train": {"target": "bc"}})
        told = plain.replace(model={"move_escapes": True})
        config_lib.validate(told, check_data=False)
        assert "escape_embed" in network.param_shapes(told)
        assert "escape_embed" not in network.param_shapes(plain)
    with pytest.raises(config_lib.ConfigError, match="move_escapes"):
        config_lib.validate(told.replace(model={"backbone": "transformer"}), check_data=False)
