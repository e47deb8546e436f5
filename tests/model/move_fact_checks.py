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
