"""What every move fact's tests ask of the board graph and the networks: the fact as the
packed kinds of a board's move edges carry it, none on its attack edges, and the graph
backbones reading it only when their config names it."""

from __future__ import annotations

from collections.abc import Callable

import chess
import numpy as np
import pytest

from model import config as config_lib
from model.networks import board_graph, network
from tests.model.random_boards import random_boards


def move_edge_classes(board: chess.Board, kind_fact: Callable) -> dict[int, int]:
    """action -> the fact `kind_fact` reads off each move edge's packed kind of `board`'s
    graph; asserts that its attack edges carry none."""
    graphs = board_graph.encode_boards([board])
    moves = graphs.num_moves[0]
    kinds = graphs.kinds.astype(np.int64)
    assert (kind_fact(kinds[moves:]) == 0).all()
    return dict(
        zip(graphs.actions[:moves].tolist(), kind_fact(kinds[:moves]).tolist(), strict=True)
    )


def assert_read_only_when_asked(flag: str, embed: str) -> None:
    """Both graph backbones grow the `embed` parameters with `model.<flag>` on and not
    without it, and the paper's transformer, which has no move edges, refuses the flag."""
    for backbone in config_lib.GRAPH_BACKBONES:
        plain = config_lib.from_dict({"model": {"backbone": backbone}, "train": {"target": "bc"}})
        told = plain.replace(model={flag: True})
        config_lib.validate(told, check_data=False)
        assert embed in network.param_shapes(told)
        assert embed not in network.param_shapes(plain)
    with pytest.raises(config_lib.ConfigError, match=flag):
        config_lib.validate(told.replace(model={"backbone": "transformer"}), check_data=False)


def assert_known(
    fen: str, uci: str, expected: int, played: Callable, read: Callable[..., list[int]]
) -> None:
    """`uci` is legal on `fen`, and both the fact found by playing it (`played(board, move)`)
    and the fact read off the bitboards (`read(board, moves)`) are `expected`."""
    board = chess.Board(fen)
    move = chess.Move.from_uci(uci)
    assert move in board.legal_moves
    assert played(board, move) == expected
    assert read(board, [move]) == [expected]


def classes_seen(played: Callable, read: Callable[..., list[int]], seed: int, classes: int):
    """Asserts that reading the bitboards gives what playing each legal move gives on 80
    boards of random games (`seed`); the count of each of the `classes` seen."""
    seen = np.zeros(classes, int)
    for board in random_boards(seed, 80, (6, 70)):
        legal = list(board.legal_moves)
        found = [played(board, move) for move in legal]
        assert read(board, legal) == found, board.fen()
        np.add.at(seen, found, 1)
    return seen
