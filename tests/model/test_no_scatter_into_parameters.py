"""The board-at-once networks reach no parameter through a scatter.

The gradient of an indexed lookup (`table[ids]`, an indexed `hk.Embed`) is a scatter-add of
every row of the batch into the table's few rows. On a GPU, in bfloat16, those additions
contend for the same addresses: the square-token network took 35 s a step at a batch of 1,024
boards on an H200 with them, and its lookups are one-hot matrix products now
(model/networks/board_net.py `small_embed`, model/networks/squares.py). This reads the
gradient's program, which needs no GPU: a scatter whose operand has a parameter's shape is
such a lookup's gradient.
"""

from __future__ import annotations

import chess
import jax
import jax.extend.core as jax_core
import numpy as np
import pytest

from core.tokenizer import tokenize_batch
from model import config as config_lib
from model.networks import board_graph, network

BOARDS = [
    chess.Board(),
    chess.Board("r3k2r/pP4pp/8/3pP3/8/8/5p2/R3K2R b KQkq - 0 1"),
]


def config(backbone: str, target: str) -> config_lib.Config:
    return config_lib.from_dict(
        {
            "model": {
                "backbone": backbone,
                "num_layers": 1,
                "embedding_dim": 16,
                "num_heads": 2,
                "widening_factor": 2,
                "move_checks": True,
                "move_exchanges": True,
                **({"attack_bias": True} if backbone == "squares" else {}),
            },
            "train": {"target": target, "num_bins": 8, "dtype": "float32"},
        }
    )


def scatter_operand_shapes(jaxpr) -> list[tuple[int, ...]]:
    """The operand shape of every scatter in a jaxpr and the jaxprs inside it."""
    shapes = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name.startswith("scatter"):
            shapes.append(tuple(eqn.invars[0].aval.shape))
        for sub in jax_core.jaxprs_in_params(eqn.params):
            shapes.extend(scatter_operand_shapes(sub))
    return shapes


@pytest.mark.parametrize(
    "backbone,target", [("squares", "bc"), ("squares", "av"), ("gateau", "bc"), ("gateau", "av")]
)
def test_the_gradient_scatters_into_no_parameter(backbone, target):
    cfg = config(backbone, target)
    apply = network.graph_module(cfg).build(cfg).apply
    params = jax.tree_util.tree_map(
        lambda x: np.zeros(x.shape, np.float32), network.param_shapes(cfg)
    )
    graphs = board_graph.encode_boards(BOARDS)
    padded = board_graph.pad_edges(graphs, np.arange(len(BOARDS)))
    states = tokenize_batch([b.fen() for b in BOARDS])

    def loss(p):
        return apply(p, states, padded["senders"], padded["receivers"], padded["kinds"]).sum()

    program = jax.make_jaxpr(jax.grad(loss))(params).jaxpr
    parameter_shapes = {tuple(x.shape) for x in jax.tree_util.tree_leaves(params)}
    scattered = scatter_operand_shapes(program)
    into_parameters = [s for s in scattered if s in parameter_shapes]
    assert not into_parameters, f"scatters into parameter-shaped tables: {into_parameters}"
    if backbone == "squares":  # the accelerator window's network: no scatter at all
        assert not scattered, f"scatters in the square network's gradient: {scattered}"
