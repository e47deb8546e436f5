"""The exposure of a move (model/networks/move_facts.py): how many of the mover's own pieces it
newly leaves en prise, on positions whose answer is known by hand, read off the bitboards as
playing the move says on random boards, and read by the networks only when their config asks."""

from __future__ import annotations

import chess
import numpy as np
import pytest

from core.actions import move_to_index
from model import config as config_lib
from model.networks import board_graph, network
from model.networks.move_facts import (
    EXPOSURE_MANY,
    EXPOSURE_NONE,
    EXPOSURE_ONE,
    exposure_class,
    exposure_classes,
)

CASES = [
    # (FEN, move, exposure class)
    ("4r1k1/8/8/8/4N3/3P4/8/K7 w - - 0 1", "d3d4", EXPOSURE_ONE),  # the knight's defender leaves
    ("4r1k1/8/8/8/4N3/3P4/8/K7 w - - 0 1", "a1b1", EXPOSURE_NONE),  # the king changes nothing
    ("3r2k1/8/8/8/3B4/8/8/3R3K w - - 0 1", "d4e5", EXPOSURE_ONE),  # a line opens on the rook
    ("r5k1/8/8/N7/8/1B6/8/R6K w - - 0 1", "b3a4", EXPOSURE_ONE),  # it blocks the knight's defence
    ("r5k1/8/8/N7/8/1B6/8/R6K w - - 0 1", "b3c4", EXPOSURE_NONE),  # elsewhere it does not
    (
        "2r1r1k1/8/8/8/8/2N1B3/3Q4/7K w - - 0 1",
        "d2d7",
        EXPOSURE_MANY,
    ),  # two pieces lose their guard
    ("2r1r1k1/8/8/8/8/2N1B3/3Q4/7K w - - 0 1", "d2d3", EXPOSURE_NONE),  # still guarding both
    ("k7/8/8/3p4/4n3/8/8/K3R3 b - - 0 1", "d5d4", EXPOSURE_ONE),  # Black to move
    ("4k3/8/8/8/8/8/8/4K2R w K - 0 1", "e1g1", EXPOSURE_NONE),  # castling moves no guard
    # A piece attacked by a cheaper one was en prise already: nothing new.
    ("6k1/8/3p4/4N3/8/8/3P4/K7 w - - 0 1", "d2d3", EXPOSURE_NONE),
    # A promotion by capture opens the file between the two rooks (played, not read off).
    ("nr4k1/1P6/8/8/8/8/8/1R5K w - - 0 1", "b7a8q", EXPOSURE_ONE),
    ("1r4k1/8/8/8/8/8/1B6/1R5K w - - 0 1", "b2c3", EXPOSURE_ONE),  # the bishop was the shield
]


@pytest.mark.parametrize(("fen", "uci", "expected"), CASES)
def test_the_exposure_of_known_positions(fen, uci, expected):
    board = chess.Board(fen)
    move = chess.Move.from_uci(uci)
    assert move in board.legal_moves
    assert exposure_class(board, move) == expected
    assert exposure_classes(board, [move]) == [expected]


def test_reading_the_bitboards_agrees_with_playing_the_moves():
    rng = np.random.default_rng(12)
    seen = np.zeros(3, int)
    for _ in range(80):
        board = chess.Board()
        for _ in range(int(rng.integers(6, 70))):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(moves[int(rng.integers(len(moves)))])
        legal = list(board.legal_moves)
        played = [exposure_class(board, move) for move in legal]
        assert exposure_classes(board, legal) == played, board.fen()
        np.add.at(seen, played, 1)
    assert seen.sum() > 1_000 and seen[EXPOSURE_ONE] > 50 and seen[EXPOSURE_MANY] > 2, seen


def test_the_networks_read_the_exposure_only_when_asked():
    board = chess.Board("2r1r1k1/8/8/8/8/2N1B3/3Q4/7K w - - 0 1")
    graphs = board_graph.encode_boards([board])
    moves = graphs.num_moves[0]
    kinds = graphs.kinds[:moves].astype(np.int64)
    by_move = dict(
        zip(graphs.actions[:moves].tolist(), board_graph.kind_exposure(kinds).tolist(), strict=True)
    )
    assert by_move[move_to_index("d2d7")] == EXPOSURE_MANY
    assert by_move[move_to_index("d2d3")] == EXPOSURE_NONE
    assert (board_graph.kind_exposure(graphs.kinds[moves:].astype(np.int64)) == 0).all()
    for backbone in ("gateau", "squares"):
        plain = config_lib.from_dict({"model": {"backbone": backbone}, "train": {"target": "bc"}})
        told = plain.replace(model={"move_exposures": True})
        config_lib.validate(told, check_data=False)
        assert "exposure_embed" in network.param_shapes(told)
        assert "exposure_embed" not in network.param_shapes(plain)
    with pytest.raises(config_lib.ConfigError, match="move_exposures"):
        config_lib.validate(told.replace(model={"backbone": "transformer"}), check_data=False)
